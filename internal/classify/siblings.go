package classify

import (
	"slices"
	"strings"
)

// WorkspaceUnrescued names the other claims of d's workspace that are
// orphans not yet rescued (Grace, Orphaned, Snapshotting, SnapshotFailed):
// while there is one, no claim of the workspace may be reaped
// (docs/spec.md#reap-workspace-first). A workspace with several claims
// (home and data) is rescued as a whole before any of them goes, so that
// a returning user gets every role back from one stop (restore
// --workspace, docs/spec.md#restore-roles) and a reaped home never waits
// on a data claim whose rescue keeps failing. A claim that is its own
// workspace (no workspace label) has no siblings; a sibling in use, held,
// young, superseded or rescued is no reason to wait. ds are the decisions
// of one read; the names are sorted, nil when none.
func WorkspaceUnrescued(ds []Decision, d *Decision) []string {
	if d.Workspace == "" || d.Claim == nil {
		return nil
	}
	var out []string
	for i := range ds {
		o := &ds[i]
		if o == d || o.Claim == nil || o.Workspace != d.Workspace || o.Claim.Namespace != d.Claim.Namespace ||
			o.Claim.UID == d.Claim.UID {
			continue
		}
		if rule := RuleFor(o.State); rule.Idle && rule.Snapshot != SnapRescue {
			out = append(out, o.Claim.Name+" ("+string(o.State)+")")
		}
	}
	slices.Sort(out)
	return out
}

// WorkspaceUnrescuedReason is why a Rescued claim waits for its workspace
// (report and explain), "" when it need not.
func WorkspaceUnrescuedReason(ds []Decision, d *Decision) string {
	names := WorkspaceUnrescued(ds, d)
	if len(names) == 0 {
		return ""
	}
	return "workspace " + d.Workspace + " is not rescued yet: " + strings.Join(names, ", ") + "; its claims are reaped once every orphan of it is rescued"
}
