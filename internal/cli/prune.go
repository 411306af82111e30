package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
)

func newPruneCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandPrune,
		Short: "Delete the janitor's own rescues by retention, never the last copy",
		Long: `prune deletes the janitor's own rescues by retention
(docs/spec.md#retention), never anyone else's snapshot.

  - --keep-for D: rescues cut longer ago than D are candidates.
  - --keep-last N: all but the N newest of each workspace (by data time) are.
  - With both, a rescue is kept when either keeps it; with neither, prune
    refuses before reading anything (exit 2).

Whatever the retention, it never deletes the only copy of a workspace's last
data, a rescue a claim not yet Bound restores from, a held rescue
(pvc-janitor.io/hold), or the rescue of a claim that still exists and has no
newer rescue.

A Retain VolumeSnapshotContent is set to Delete first only with
--delete-contents; without it, such a rescue is kept. The blast radius,
--dry-run, --yes (needed over several clusters) and the Lease work as for
reap.`,
		Example: `  # Which rescues all but the newest of each workspace would go
  janitor prune -n workspaces --workspace-label workspace-id --keep-last 1 --dry-run

  # Keep 30 days, and always the 2 newest of each workspace
  janitor prune -A --workspace-label workspace-id --keep-for 720h --keep-last 2 --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			confirm, check := confirmation(s, config.CommandPrune)
			return command(cmd, s, config.CommandPrune, check, func(sess *session) error { return pruneOn(sess, *confirm) })
		},
	}
	return withFlags(cmd, config.CommandPrune)
}

// pruneOn is prune's run on one cluster.
func pruneOn(sess *session, confirm func(int) (bool, error)) error {
	if err := sess.lock(!sess.cfg.DryRun, nil); err != nil {
		return err
	}
	res, err := janitor.Prune(sess.ctx, sess.clients, sess.pruneOptions(confirm))
	if err != nil {
		if lerr := sess.leaseErr(); lerr != nil {
			err = lerr
		}
		return sess.failed(err)
	}
	r := sess.newReport(config.CommandPrune, sess.cfg.DryRun)
	return sess.finish(r, addPrune(r, res))
}

// pruneOptions are the options of a prune, and of run's retention step.
func (sess *session) pruneOptions(confirm func(int) (bool, error)) janitor.PruneOptions {
	cfg := sess.cfg
	return janitor.PruneOptions{Scan: sess.scanOptions(cfg.DryRun), Confirm: confirm,
		Retention:    retention.Policy{KeepFor: cfg.KeepFor, KeepLast: cfg.KeepLast, DeleteContents: cfg.DeleteContents},
		MaxDeletions: cfg.MaxDeletions, MaxDeletionPercent: cfg.MaxDeletionPercent}
}

// addPrune records a prune as the report's snapshot entries and returns
// its error: a blast radius that held it back, or failed deletions (exit 4).
func addPrune(r *report.Report, res *prune.Result) error {
	if res.Snapshots != nil {
		r.SetRescues(res.Snapshots, res.Now)
	}
	var failed []error
	for _, o := range res.Outcomes {
		e := snapshotEntry(&o.Snapshot, o.DeletionPolicy)
		e.Namespace, e.Name, e.SourceClaim, e.Workspace = o.Namespace, o.Name, o.Source, o.Workspace
		e.RestoreSize, e.Action, e.Reason, e.LeakedContent = o.RestoreSize, o.Action, o.Reason, o.LeakedContent
		r.Snapshots = append(r.Snapshots, e)
		if o.Err != nil {
			failed = append(failed, fmt.Errorf("%s/%s: %w", o.Namespace, o.Name, o.Err))
		}
	}
	if res.Blocked != "" {
		r.AddNote(res.Blocked)
		if blockedByRadius(res) {
			return exitcode.New(exitcode.Partial, fmt.Errorf("%s", res.Blocked))
		}
	}
	return failuresError("prunes", failed)
}

// blockedByRadius: the blast radius, not a "no" at the prompt, held the
// prune back.
func blockedByRadius(res *prune.Result) bool {
	for _, o := range res.Outcomes {
		if o.Action == prune.ActionLimited {
			return true
		}
	}
	return false
}
