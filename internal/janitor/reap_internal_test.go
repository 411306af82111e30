package janitor

import (
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/reap"
)

// TestReapedOn: the rescues a run's reap deleted claims on are kept by the
// same run's retention step; skipped and failed deletions, and deletions
// relying on no snapshot (a discard on a claim in use), keep nothing.
func TestReapedOn(t *testing.T) {
	outs := []reap.Outcome{
		{Namespace: "ns", Name: "a", Action: reap.ActionDeleted, Evidence: &reap.Evidence{UID: "s-a"}},
		{Namespace: "ns", Name: "b", Action: reap.ActionSkipped, Evidence: &reap.Evidence{UID: "s-b"}},
		{Namespace: "ns", Name: "c", Action: reap.ActionFailed, Evidence: &reap.Evidence{UID: "s-c"}},
		{Namespace: "ns", Name: "d", Action: reap.ActionDeleted},
	}
	keep := reapedOn(outs)
	if len(keep) != 1 || keep["s-a"] != "claim ns/a was reaped on it in this run" {
		t.Errorf("reapedOn = %v, want only s-a", keep)
	}
}
