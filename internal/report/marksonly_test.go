package report

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestMarksOnlyReportSaysWhatItWrote (docs/spec.md#marks-only): a preview
// with marks does mark the orphan, so its reason says so (unlike a plain
// dry run's), and its summary, alone or per cluster of a fleet, says that
// the marks were written and nothing else.
func TestMarksOnlyReportSaysWhatItWrote(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	inv := &inventory.Inventory{Claims: []inventory.Claim{{Namespace: "ws", Name: "ws-a", UID: "u-a", ResourceVersion: "1",
		Phase: "Bound", VolumeName: "pv-a", CreationTimestamp: now.Add(-time.Hour)}}}
	ds := classify.Classify(inv, classify.Policy{GracePeriod: 30 * time.Minute}, now)
	r := New("run", true, "c", now)
	r.MarksOnly = true
	r.AddDecisions(ds)
	if reason := r.Claims[0].Reason; !strings.Contains(reason, "marking it now") {
		t.Errorf("reason %q: the preview marks the claim and must say so", reason)
	}
	const says = "(marks only: nothing but the janitor's marks was written)"
	if line := summaryLine(r); !strings.HasSuffix(line, says) || strings.Contains(line, "dry run") {
		t.Errorf("summary %q, want it to end %q", line, says)
	}
	if line := clusterLine(ClusterBlock{Name: "c", Summary: &r.Summary}, r); !strings.HasSuffix(line, says) {
		t.Errorf("a fleet's cluster line %q, want it to end %q", line, says)
	}
}
