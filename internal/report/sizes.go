package report

import (
	"sort"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// sizes fills the summary's bytes and, with prices, its money.
func (r *Report) sizes(s *Summary) {
	priced := r.prices.Any()
	var c Cost
	seenSnap := map[string]bool{}
	for _, e := range r.Claims {
		if e.Capacity > 0 && e.State != "" {
			if s.BytesByState == nil {
				s.BytesByState = map[string]int64{}
			}
			s.BytesByState[e.State] += e.Capacity
		}
		deleted := e.Action == ActionDeleted
		if deleted {
			if e.ReclaimPolicy == "Delete" {
				s.FreedBytes += e.Capacity
			} else if e.ReclaimPolicy != "" {
				s.UnfreedBytes += e.Capacity
				s.ReleasedVolumes = append(s.ReleasedVolumes, e.VolumeName)
			}
		}
		if !priced {
			e.MonthlyCost = nil
			continue
		}
		m, ok := r.prices.Claim(e.StorageClass, e.Capacity)
		if !ok {
			c.Unpriced++
			e.MonthlyCost = nil
		} else {
			e.MonthlyCost = &m
		}
		switch {
		case deleted && e.ReclaimPolicy == "Delete":
			c.Saved += m
		case deleted:
		case classify.RuleFor(classify.State(e.State)).Idle:
			c.Orphaned += m
		case e.State == string(classify.Superseded):
			c.Superseded += m
		}
		if sn := e.Snapshot; sn != nil && sn.ReadyToUse && !seenSnap[e.Namespace+"/"+sn.Name] {
			seenSnap[e.Namespace+"/"+sn.Name] = true
			if v, ok := r.prices.Snapshot(sn.RestoreSize); ok {
				c.Rescues += v
			}
		}
	}
	sort.Strings(s.ReleasedVolumes)
	if priced {
		c.Orphaned, c.Superseded, c.Rescues, c.Saved = cents(c.Orphaned), cents(c.Superseded), cents(c.Rescues), cents(c.Saved)
		s.Cost = &c
	}
}

func cents(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }
