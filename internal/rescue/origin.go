package rescue

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// annotations are rescueAnnotations plus, for a claim a platform created
// from a snapshot (spec.dataSource, no restored-data-time of the
// janitor's), the data time of that snapshot as its restored-data-time:
// the rescue's line reaches no further than the data the claim started
// from (docs/spec.md#rule-restored-data-time), so restore weighs it so once
// the claim is gone (found by the model checker: the rescue of a claim
// created from an old backup was restored beside the workspace's claim
// holding newer data).
func (r *rescuer) annotations(d *classify.Decision, attempt int) map[string]string {
	a := rescueAnnotations(d, attempt)
	if _, ok := a[inventory.AnnotationRestoredDataTime]; !ok {
		r.originsOnce.Do(func() { r.origins = NewOrigins(r.inv) })
		if t, ok := r.origins.DataTime(d.Claim); ok {
			a[inventory.AnnotationRestoredDataTime] = t.UTC().Format(time.RFC3339)
		}
	}
	return a
}

// OriginDataTime is the data time of the snapshot claim cl was created
// from (its spec.dataSource), when that snapshot is in the inventory and
// was created no later than the claim; a rescue of a restored claim counts
// the earlier of its data time and the restored data time it records.
//
// It walks the namespace's snapshots; a rescue of many claims asks an
// Origins index instead (BenchmarkOriginDataTime).
func OriginDataTime(inv *inventory.Inventory, cl *inventory.Claim) (time.Time, bool) {
	if inv == nil || cl.DataSource == "" {
		return time.Time{}, false
	}
	list := inv.Snapshots[cl.Namespace]
	for i := range list {
		s := &list[i]
		if s.Name != cl.DataSource || s.CreationTimestamp.After(cl.CreationTimestamp) {
			continue
		}
		return originTime(s), true
	}
	return time.Time{}, false
}

func originTime(s *inventory.Snapshot) time.Time {
	t := classify.DataTime(s, nil)
	if rt := s.RestoredDataTime; rt != nil && rt.Before(t) {
		t = *rt
	}
	return t
}

// Origins indexes an inventory's snapshots by namespace and name, for
// OriginDataTime once per rescued claim: O(1) per claim instead of a walk
// of its namespace's snapshots (issue 43).
type Origins struct {
	// by holds one snapshot per name: a namespace's snapshot names are
	// unique in one read.
	by map[string]map[string]*inventory.Snapshot
}

// NewOrigins indexes the snapshots of inv (nil: none).
func NewOrigins(inv *inventory.Inventory) *Origins {
	o := &Origins{by: map[string]map[string]*inventory.Snapshot{}}
	if inv == nil {
		return o
	}
	for ns, list := range inv.Snapshots {
		m := make(map[string]*inventory.Snapshot, len(list))
		for i := range list {
			if _, dup := m[list[i].Name]; !dup {
				m[list[i].Name] = &list[i]
			}
		}
		o.by[ns] = m
	}
	return o
}

// DataTime is OriginDataTime on the indexed inventory.
func (o *Origins) DataTime(cl *inventory.Claim) (time.Time, bool) {
	if cl.DataSource == "" {
		return time.Time{}, false
	}
	if s := o.by[cl.Namespace][cl.DataSource]; s != nil && !s.CreationTimestamp.After(cl.CreationTimestamp) {
		return originTime(s), true
	}
	return time.Time{}, false
}
