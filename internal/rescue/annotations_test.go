package rescue

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestRescueAnnotations: a rescue records its source, its orphaned-since
// and the attempt; the rescue of a restored claim also records the data
// time the claim was restored from (docs/spec.md#rule-restored-data-time);
// one whose provenance does not parse records the zero time: its data is of
// no known time, and the line the rescue carries reaches no other claim's
// data (the side that keeps copies).
func TestRescueAnnotations(t *testing.T) {
	since := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		ann      map[string]string
		restored string // the pvc-janitor.io/restored-data-time wanted ("" none)
	}{
		{"a claim the janitor did not restore", nil, ""},
		{"a restored claim", map[string]string{classify.AnnotationRestoredDataTime: "2026-12-01T09:00:00Z"}, "2026-12-01T09:00:00Z"},
		{"a restored claim whose provenance does not parse", map[string]string{classify.AnnotationRestoredDataTime: "yesterday"}, "0001-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &inventory.Claim{Namespace: "ws", Name: "alice-old", UID: "uid-1", Annotations: tc.ann}
			a := rescueAnnotations(&classify.Decision{Claim: cl, OrphanedSince: &since}, 2)
			want := map[string]string{
				inventory.AnnotationSourceUID:     "uid-1",
				inventory.AnnotationSourceName:    "alice-old",
				inventory.AnnotationOrphanedSince: "2026-12-03T14:00:00Z",
				inventory.Prefix + "attempt":      "2",
			}
			if tc.restored != "" {
				want[inventory.AnnotationRestoredDataTime] = tc.restored
			}
			if len(a) != len(want) {
				t.Errorf("annotations %v, want %v", a, want)
			}
			for k, v := range want {
				if a[k] != v {
					t.Errorf("%s = %q, want %q", k, a[k], v)
				}
			}
		})
	}
}
