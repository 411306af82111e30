package report

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Rescues is what the janitor's ready rescues in scope hold (docs/spec.md#retention): how
// many, their bytes (status.restoreSize) and how many per age bucket. It is
// as last read by the run (the scan at its start; run's retention step
// reads again after its rescues and reaps), less what the run pruned.
type Rescues struct {
	Count int   `json:"count"`
	Bytes int64 `json:"bytes"`
	// ByAge counts them per AgeBuckets label, every label present.
	ByAge map[string]int `json:"byAge"`
}

// AgeBuckets are the rescues' age buckets, in order: a rescue is in the
// first whose Max is above its age (the last has none). The age is from
// the moment the storage system cut it (its creation when not known).
var AgeBuckets = []struct {
	Label string
	Max   time.Duration
}{
	{"under-1d", 24 * time.Hour},
	{"1d-7d", 7 * 24 * time.Hour},
	{"7d-30d", 30 * 24 * time.Hour},
	{"30d-90d", 90 * 24 * time.Hour},
	{"over-90d", 0},
}

// AgeBucket is the label of the bucket of age.
func AgeBucket(age time.Duration) string {
	for _, b := range AgeBuckets {
		if b.Max == 0 || age < b.Max {
			return b.Label
		}
	}
	return AgeBuckets[len(AgeBuckets)-1].Label
}

// SetRescues gives the report the snapshots read (by namespace), for its
// summary's rescues: the janitor's ready ones not being deleted, aged at
// now (the server's clock). A later call replaces an earlier one: run's
// retention step reads after its rescues and reaps.
func (r *Report) SetRescues(snaps map[string][]inventory.Snapshot, now time.Time) {
	r.rescues = make([]rescueItem, 0, len(r.rescues)) // non-nil: set
	for _, ss := range snaps {
		for i := range ss {
			s := &ss[i]
			if !s.ManagedByJanitor || !s.ReadyToUse || s.DeletionTimestamp != nil {
				continue
			}
			r.rescues = append(r.rescues, rescueItem{key: key{s.Namespace, s.Name}, bucket: AgeBucket(now.Sub(classify.CutTime(s))), bytes: s.RestoreSize})
		}
	}
}

type rescueItem struct {
	key    key
	bucket string
	bytes  int64
}

// rescueSummary sums the rescues set, less the snapshots the report's
// entries say were pruned; nil when none were set. A fleet report sums its
// clusters' summaries instead (Merge).
func (r *Report) rescueSummary() *Rescues {
	if r.merged != nil {
		return r.merged
	}
	if r.rescues == nil {
		return nil
	}
	pruned := map[key]bool{}
	for _, e := range r.Snapshots {
		if e.Action == ActionPruned {
			pruned[key{e.Namespace, e.Name}] = true
		}
	}
	out := newRescues()
	for _, it := range r.rescues {
		if pruned[it.key] {
			continue
		}
		out.Count++
		out.Bytes += it.bytes
		out.ByAge[it.bucket]++
	}
	return out
}

func newRescues() *Rescues {
	out := &Rescues{ByAge: make(map[string]int, len(AgeBuckets))}
	for _, b := range AgeBuckets {
		out.ByAge[b.Label] = 0
	}
	return out
}

// add sums o into s.
func (s *Rescues) add(o *Rescues) {
	s.Count += o.Count
	s.Bytes += o.Bytes
	for k, v := range o.ByAge {
		s.ByAge[k] += v
	}
}
