package report

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/cost"
)

// TestSizesAndMoney: bytes per state; a deleted claim frees its bytes only
// when its volume is Delete, a Retain one is named as Released; with
// prices, the monthly cost of unused and superseded claims, of rescues,
// and what the run saved; without prices, no money at all.
func TestSizesAndMoney(t *testing.T) {
	const gi = int64(cost.GiB)
	build := func() *Report {
		r := New("run", false, "dev", time.Now())
		r.Claims = []*ClaimEntry{
			{Namespace: "ws", Name: "a", State: "Rescued", Capacity: 10 * gi, StorageClass: "fast", ReclaimPolicy: "Delete", VolumeName: "pv-a",
				Action: ActionDeleted, Snapshot: &SnapshotRef{Name: "a-rescue", ReadyToUse: true, RestoreSize: 10 * gi}},
			{Namespace: "ws", Name: "b", State: "Rescued", Capacity: 5 * gi, StorageClass: "fast", ReclaimPolicy: "Retain", VolumeName: "pv-b",
				Action: ActionDeleted, Snapshot: &SnapshotRef{Name: "b-rescue", ReadyToUse: true, RestoreSize: 5 * gi}},
			{Namespace: "ws", Name: "c", State: "Orphaned", Capacity: 20 * gi, StorageClass: "slow", ReclaimPolicy: "Delete"},
			{Namespace: "ws", Name: "d", State: "Superseded", Capacity: 4 * gi, StorageClass: "exotic", ReclaimPolicy: "Delete"},
			{Namespace: "ws", Name: "e", State: "InUse", Capacity: 1 * gi, StorageClass: "fast", ReclaimPolicy: "Delete"},
		}
		return r
	}
	r := build()
	r.Finish(time.Now())
	s := r.Summary
	if s.BytesByState["Rescued"] != 15*gi || s.BytesByState["Orphaned"] != 20*gi || s.FreedBytes != 10*gi || s.UnfreedBytes != 5*gi ||
		len(s.ReleasedVolumes) != 1 || s.ReleasedVolumes[0] != "pv-b" || s.Cost != nil {
		t.Errorf("summary without prices: %+v", s)
	}
	out := write(t, r, "table")
	if !strings.Contains(out, "freed 10Gi; not freed 5Gi (reclaim policy Retain: Released volumes pv-b)") || strings.Contains(out, "monthly cost") {
		t.Errorf("table without prices:\n%s", out)
	}

	p, err := cost.Parse([]string{"fast=0.20", "slow=0.05"}, "0.10")
	if err != nil {
		t.Fatal(err)
	}
	r = build()
	r.SetPrices(p)
	r.Finish(time.Now())
	c := r.Summary.Cost
	// Unused: c (20Gi slow = 1.00); superseded d has no price; rescues:
	// 15Gi of snapshots = 1.50; saved: a (10Gi fast = 2.00), not b (Retain).
	if c == nil || c.Orphaned != 1 || c.Superseded != 0 || c.Rescues != 1.5 || c.Saved != 2 || c.Unpriced != 1 {
		t.Fatalf("cost %+v", c)
	}
	if e := r.Entry("ws", "e"); e.MonthlyCost == nil || *e.MonthlyCost != 0.2 {
		t.Errorf("claim cost %v", e.MonthlyCost)
	}
	if out := write(t, r, "table"); !strings.Contains(out, "this run saved 2.00 (1 claim without a price)") {
		t.Errorf("table with prices:\n%s", out)
	}
}
