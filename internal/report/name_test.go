package report

import (
	"strings"
	"testing"
)

// TestNameIsWhatWasActedOn (docs/spec.md#output-formats): -o name prints
// the objects the command acted on, or in a dry run would act on, as
// kubectl's delete --dry-run -o name prints what it would delete: never a
// claim in use or held that reap leaves alone, which piped into kubectl
// delete would go.
func TestNameIsWhatWasActedOn(t *testing.T) {
	snap := func(name string) *SnapshotRef { return &SnapshotRef{Name: name} }
	claims := []*ClaimEntry{
		{Namespace: "ws", Name: "in-use", State: "InUse"},
		{Namespace: "ws", Name: "held", State: "Held"},
		{Namespace: "ws", Name: "grace", State: "Grace", Action: "would-mark"},
		{Namespace: "ws", Name: "marked", State: "Grace", Action: "marked"},
		{Namespace: "ws", Name: "gone", State: "Rescued", Action: "deleted", Snapshot: snap("gone-rescue")},
		{Namespace: "ws", Name: "would-go", State: "Rescued", Action: "would-delete", Snapshot: snap("would-go-rescue")},
		{Namespace: "ws", Name: "blocked", State: "Rescued", Action: "reap-blocked"},
		{Namespace: "ws", Name: "skipped", State: "InUse", Action: "reap-skipped"},
		{Namespace: "ws", Name: "failed", State: "Rescued", Action: "delete-failed"},
		{Namespace: "ws", Name: "created", State: "Rescued", Action: "snapshot-created", Snapshot: snap("created-rescue")},
		{Namespace: "ws", Name: "would-snap", State: "Orphaned", Action: "would-snapshot", Snapshot: snap("would-snap-rescue")},
		{Namespace: "ws", Name: "ready", State: "Rescued", Action: "snapshot-ready", Snapshot: snap("ready-rescue")},
		{Namespace: "ws", Name: "snap-failed", State: "SnapshotFailed", Action: "snapshot-failed", Snapshot: snap("failed-rescue")},
		{Namespace: "ws", Name: "archived", State: "Rescued", Action: "superseded-archived", Snapshot: snap("archived-rescue")},
		{Namespace: "ws", Name: "rescued-reaped", State: "Rescued", Action: "deleted", SnapshotCreated: true, Snapshot: snap("rr-rescue")},
		{Namespace: "ws", Name: "at-risk", State: "InUse", Action: "at-risk"},
		{Namespace: "ws", Name: "restored", Action: "restored"},
		{Namespace: "ws", Name: "would-restore", Action: "would-restore"},
	}
	snapshots := []*SnapshotEntry{
		{Namespace: "ws", Name: "pruned", Action: "pruned"},
		{Namespace: "ws", Name: "would-prune", Action: "would-prune"},
		{Namespace: "ws", Name: "kept", Action: "kept"},
		{Namespace: "ws", Name: "only-copy-at-risk", Action: "at-risk"},
		{Namespace: "ws", Name: "only-copy", Action: ""},
	}
	const pvc, vs = "persistentvolumeclaim/", "volumesnapshot.snapshot.storage.k8s.io/"
	cases := []struct {
		command string
		want    []string
	}{
		{"scan", []string{pvc + "grace", pvc + "marked"}},
		{"reap", []string{pvc + "gone", pvc + "would-go", pvc + "rescued-reaped"}},
		{"snapshot", []string{vs + "created-rescue", vs + "would-snap-rescue", vs + "archived-rescue", vs + "rr-rescue"}},
		{"run", []string{pvc + "gone", pvc + "would-go", vs + "created-rescue", vs + "would-snap-rescue", vs + "archived-rescue",
			vs + "rr-rescue", pvc + "rescued-reaped", vs + "pruned", vs + "would-prune"}},
		{"prune", []string{vs + "pruned", vs + "would-prune"}},
		{"guard", []string{pvc + "at-risk", vs + "only-copy-at-risk"}},
		{"restore", []string{pvc + "restored", pvc + "would-restore"}},
	}
	for _, tc := range cases {
		t.Run(tc.command, func(t *testing.T) {
			r := &Report{Command: tc.command, Claims: claims, Snapshots: snapshots}
			var b strings.Builder
			if err := WriteOutput(&b, r, Output{Format: "name"}); err != nil {
				t.Fatal(err)
			}
			want := strings.Join(tc.want, "\n") + "\n"
			if b.String() != want {
				t.Errorf("-o name:\n%s\nwant\n%s", b.String(), want)
			}
		})
	}
}
