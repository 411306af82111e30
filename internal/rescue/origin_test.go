package rescue

import (
	"fmt"
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

// TestOriginsAgreeWithTheWalk: the index answers what OriginDataTime's
// walk answers, claim by claim.
func TestOriginsAgreeWithTheWalk(t *testing.T) {
	inv, claims := originFleet(200)
	o := NewOrigins(inv)
	for i := range claims {
		cl := &claims[i]
		wt, wok := OriginDataTime(inv, cl)
		it, iok := o.DataTime(cl)
		if wok != iok || !wt.Equal(it) {
			t.Fatalf("%s: index (%v, %v), walk (%v, %v)", cl.Name, it, iok, wt, wok)
		}
	}
	if _, ok := NewOrigins(nil).DataTime(&claims[0]); ok {
		t.Error("an empty index found an origin")
	}
}

// originFleet is n snapshots of one namespace and n claims created from
// them (every third one from a snapshot created after it: no origin).
func originFleet(n int) (*inventory.Inventory, []inventory.Claim) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	inv := &inventory.Inventory{Snapshots: map[string][]inventory.Snapshot{}}
	claims := make([]inventory.Claim, n)
	for i := range n {
		cut := t0.Add(time.Duration(i) * time.Second)
		name := fmt.Sprintf("backup-%05d", i)
		inv.Snapshots["ws"] = append(inv.Snapshots["ws"], inventory.Snapshot{Namespace: "ws", Name: name, CreationTimestamp: cut, CutTime: &cut, ReadyToUse: true})
		created := cut.Add(time.Hour)
		if i%3 == 0 {
			created = cut.Add(-time.Hour)
		}
		claims[i] = inventory.Claim{Namespace: "ws", Name: fmt.Sprintf("ws-%05d", i), CreationTimestamp: created, DataSource: name}
	}
	return inv, claims
}

// BenchmarkOriginDataTime is the rescue's cost, per claim created from a
// snapshot, of finding that snapshot's data time among 10,000 snapshots of
// its namespace (issue 43): the walk is O(snapshots) per claim, the index
// O(1) after one O(snapshots) build per run.
func BenchmarkOriginDataTime(b *testing.B) {
	inv, claims := originFleet(10000)
	b.Run("walk", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			OriginDataTime(inv, &claims[i%len(claims)])
		}
	})
	b.Run("index", func(b *testing.B) {
		o := NewOrigins(inv)
		for i := 0; b.Loop(); i++ {
			o.DataTime(&claims[i%len(claims)])
		}
	})
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			NewOrigins(inv)
		}
	})
}
