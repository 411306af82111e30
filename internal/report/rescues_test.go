package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

func TestAgeBucket(t *testing.T) {
	const day = 24 * time.Hour
	for _, c := range []struct {
		age  time.Duration
		want string
	}{
		{0, "under-1d"},
		{day - time.Second, "under-1d"},
		{day, "1d-7d"},
		{7*day - time.Second, "1d-7d"},
		{7 * day, "7d-30d"},
		{30 * day, "30d-90d"},
		{90*day - time.Second, "30d-90d"},
		{90 * day, "over-90d"},
		{400 * day, "over-90d"},
		{-time.Hour, "under-1d"}, // a cut a little ahead of the server's clock
	} {
		if got := AgeBucket(c.age); got != c.want {
			t.Errorf("AgeBucket(%s) = %s, want %s", c.age, got, c.want)
		}
	}
}

// TestRescuesSummary: only the janitor's ready rescues not being deleted
// count, aged from their cut (their creation when the cut is unknown),
// less what the run pruned; a fleet report sums its clusters'.
func TestRescuesSummary(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	snap := func(name string, mine, ready bool, cut *time.Time, created time.Duration, size int64) inventory.Snapshot {
		return inventory.Snapshot{Namespace: "ws", Name: name, ManagedByJanitor: mine, ReadyToUse: ready, CutTime: cut,
			CreationTimestamp: now.Add(-created), RestoreSize: size}
	}
	deleting := snap("deleting", true, true, ago(time.Hour), time.Hour, 1<<20)
	deleting.DeletionTimestamp = ago(time.Minute)
	snaps := map[string][]inventory.Snapshot{"ws": {
		snap("fresh", true, true, ago(time.Hour), time.Hour, 1<<30),
		snap("week", true, true, ago(3*24*time.Hour), time.Hour, 2<<30), // cut counts, not the creation (an import)
		snap("old", true, true, nil, 100*24*time.Hour, 4<<30),           // no cut time: its creation
		snap("pruned", true, true, ago(40*24*time.Hour), 40*24*time.Hour, 8<<30),
		snap("not-mine", false, true, ago(time.Hour), time.Hour, 16<<30),
		snap("not-ready", true, false, nil, time.Hour, 0),
		deleting,
	}}
	r := New("run", false, "a", now)
	r.SetRescues(snaps, now)
	r.Snapshots = []*SnapshotEntry{{Namespace: "ws", Name: "pruned", Action: ActionPruned}, {Namespace: "ws", Name: "week", Action: "kept"}}
	r.Finish(now)
	want := &Rescues{Count: 3, Bytes: 7 << 30, ByAge: map[string]int{"under-1d": 1, "1d-7d": 1, "7d-30d": 0, "30d-90d": 0, "over-90d": 1}}
	if !reflect.DeepEqual(r.Summary.Rescues, want) {
		t.Errorf("rescues %+v, want %+v", r.Summary.Rescues, want)
	}
	var b bytes.Buffer
	if err := Write(&b, r, "table"); err != nil {
		t.Fatal(err)
	}
	if line := "rescues: 3 ready rescues hold 7Gi (age: under-1d 1, 1d-7d 1, over-90d 1)"; !strings.Contains(b.String(), line+"\n") {
		t.Errorf("table lacks %q:\n%s", line, b.String())
	}

	// Sizes of 0 are unknown (CSI size_bytes), and said so.
	zero := New("run", false, "a", now)
	zero.SetRescues(map[string][]inventory.Snapshot{"ws": {snap("z", true, true, ago(time.Hour), time.Hour, 0)}}, now)
	zero.Finish(now)
	b.Reset()
	if err := Write(&b, zero, "table"); err != nil {
		t.Fatal(err)
	}
	if line := "rescues: 1 ready rescue, restoreSize not reported (age: under-1d 1)"; !strings.Contains(b.String(), line+"\n") {
		t.Errorf("table lacks %q:\n%s", line, b.String())
	}

	// A report that read no snapshots has no rescues (no zero to mislead).
	none := New("restore", false, "a", now)
	none.Finish(now)
	if none.Summary.Rescues != nil {
		t.Errorf("a report without a read has rescues %+v", none.Summary.Rescues)
	}

	// Fleet: the clusters' sums, and a cluster without a read adds nothing.
	b2 := New("run", false, "b", now)
	b2.SetRescues(map[string][]inventory.Snapshot{"x": {snap("x", true, true, ago(8*24*time.Hour), time.Hour, 1)}}, now)
	b2.Finish(now)
	m := Merge("run", false, now, r.prices, []Part{{Context: "a", Report: r}, {Context: "b", Report: b2}, {Context: "c", Report: none}})
	m.Finish(now)
	want = &Rescues{Count: 4, Bytes: 7<<30 + 1, ByAge: map[string]int{"under-1d": 1, "1d-7d": 1, "7d-30d": 1, "30d-90d": 0, "over-90d": 1}}
	if !reflect.DeepEqual(m.Summary.Rescues, want) {
		t.Errorf("fleet rescues %+v, want %+v", m.Summary.Rescues, want)
	}
}
