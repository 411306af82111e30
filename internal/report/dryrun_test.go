package report

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestDryRunReasonIsHonest (docs/spec.md#rule-grace, issue 39 item 4): an
// orphan without orphaned-since is Grace, and a scan marks it now; a dry
// run writes no mark, so its report must not say it is marking it (on a
// cluster without the Unused condition the claim would stay Grace, run
// after run, with nothing saying why). The decisions are the classifier's
// own, so that a change of its wording fails here rather than silently
// keeping the false reason.
func TestDryRunReasonIsHonest(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	inv := &inventory.Inventory{Claims: []inventory.Claim{{Namespace: "ws", Name: "ws-a", UID: "u-a", ResourceVersion: "1",
		Phase: "Bound", VolumeName: "pv-a", CreationTimestamp: now.Add(-time.Hour)}}}
	ds := classify.Classify(inv, classify.Policy{GracePeriod: 30 * time.Minute}, now)
	if len(ds) != 1 || ds[0].State != classify.Grace || ds[0].Marks.OrphanedSince != classify.Set {
		t.Fatalf("setup: %+v, want one Grace claim to mark", ds)
	}
	for _, dryRun := range []bool{false, true} {
		r := New("scan", dryRun, "c", now)
		r.AddDecisions(ds)
		reason := r.Claims[0].Reason
		says := strings.Contains(reason, "marking it now")
		if says == dryRun {
			t.Errorf("dry run %t: reason %q; a run that marks says it marks, a dry run says it does not", dryRun, reason)
		}
		if dryRun && !strings.Contains(reason, "dry run") {
			t.Errorf("dry run: reason %q, want it to say that the dry run wrote no mark", reason)
		}
	}
}
