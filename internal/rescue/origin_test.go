package rescue

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestRescueOfAClaimCreatedFromASnapshot: the rescue of a claim a platform
// created from a snapshot records that snapshot's data time as its
// restored-data-time; a janitor's restore keeps its own record; a snapshot
// of that name created after the claim is another one.
func TestRescueOfAClaimCreatedFromASnapshot(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cut := t0.Add(-time.Hour)
	since := t0.Add(time.Hour)
	backup := inventory.Snapshot{Namespace: "ws", Name: "backup-1", CreationTimestamp: cut, CutTime: &cut, ReadyToUse: true}
	later := backup
	later.CreationTimestamp, later.CutTime = t0.Add(time.Minute), &since
	for _, tc := range []struct {
		name  string
		snaps []inventory.Snapshot
		ann   map[string]string
		want  string
	}{
		{"created from backup-1", []inventory.Snapshot{backup}, nil, cut.Format(time.RFC3339)},
		{"backup-1 is gone", nil, nil, ""},
		{"a backup-1 created after the claim is another snapshot", []inventory.Snapshot{later}, nil, ""},
		{"the janitor's restore records its own", []inventory.Snapshot{backup},
			map[string]string{inventory.AnnotationRestoredDataTime: t0.Add(-2 * time.Hour).Format(time.RFC3339)}, t0.Add(-2 * time.Hour).Format(time.RFC3339)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := inventory.Claim{Namespace: "ws", Name: "ws-bob-2", UID: "u2", CreationTimestamp: t0, DataSource: "backup-1", Annotations: tc.ann}
			inv := &inventory.Inventory{Snapshots: map[string][]inventory.Snapshot{"ws": tc.snaps}}
			r := &rescuer{inv: inv}
			a := r.annotations(&classify.Decision{Claim: &cl, OrphanedSince: &since}, 1)
			if got := a[inventory.AnnotationRestoredDataTime]; got != tc.want {
				t.Errorf("restored-data-time %q, want %q", got, tc.want)
			}
		})
	}
}
