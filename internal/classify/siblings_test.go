package classify

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestWorkspaceUnrescued is the rule of docs/spec.md#reap-workspace-first,
// one row per state of a sibling claim.
func TestWorkspaceUnrescued(t *testing.T) {
	decision := func(ns, name, ws string, s State) Decision {
		return Decision{Claim: &inventory.Claim{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}, Workspace: ws, State: s}
	}
	rows := []struct {
		name    string
		sibling Decision
		want    []string
	}{
		{"an orphan within its grace period", decision("ns", "w-data", "w", Grace), []string{"w-data (Grace)"}},
		{"an orphan past it", decision("ns", "w-data", "w", Orphaned), []string{"w-data (Orphaned)"}},
		{"an orphan being snapshotted", decision("ns", "w-data", "w", Snapshotting), []string{"w-data (Snapshotting)"}},
		{"an orphan whose snapshot failed", decision("ns", "w-data", "w", SnapshotFailed), []string{"w-data (SnapshotFailed)"}},
		{"a rescued sibling", decision("ns", "w-data", "w", Rescued), nil},
		{"a sibling in use", decision("ns", "w-data", "w", InUse), nil},
		{"an attached sibling", decision("ns", "w-data", "w", Attached), nil},
		{"a held sibling", decision("ns", "w-data", "w", Held), nil},
		{"a young sibling", decision("ns", "w-data", "w", Young), nil},
		{"a superseded claim of the workspace", decision("ns", "w-old", "w", Superseded), nil},
		{"an orphan of another workspace", decision("ns", "x-data", "x", Orphaned), nil},
		{"an orphan of the same workspace name in another namespace", decision("other", "w-data", "w", Orphaned), nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ds := []Decision{decision("ns", "w-home", "w", Rescued), row.sibling}
			if got := WorkspaceUnrescued(ds, &ds[0]); !slices.Equal(got, row.want) {
				t.Fatalf("got %v, want %v", got, row.want)
			}
			if got := WorkspaceUnrescuedReason(ds, &ds[0]); (got == "") != (row.want == nil) {
				t.Fatalf("reason %q for %v", got, row.want)
			}
		})
	}
	// A claim that is its own workspace has no siblings, whatever the
	// other claims of the namespace are.
	own := []Decision{decision("ns", "a", "", Rescued), decision("ns", "b", "", Orphaned)}
	if got := WorkspaceUnrescued(own, &own[0]); got != nil {
		t.Errorf("a claim without a workspace waits for %v", got)
	}
}
