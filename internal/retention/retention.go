// Package retention decides which of the janitor's rescues prune may delete
// (docs/spec.md#retention). Decide is a pure function of what a run read: retention makes
// candidates, and four rules keep a candidate whatever the retention says, so
// that the last copy of a workspace's data is never pruned.
package retention

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Policy is the retention asked for. Zero KeepFor and KeepLast: nothing is
// a candidate.
type Policy struct {
	KeepFor  time.Duration // --keep-for: rescues cut earlier than now-KeepFor are candidates
	KeepLast int           // --keep-last: all but the N newest (by data time) per workspace are candidates
	// DeleteContents (--delete-contents): the janitor may set a Retain
	// content to Delete before deleting its snapshot.
	DeleteContents bool
}

// Rescue is one of the janitor's snapshots.
type Rescue struct {
	inventory.Snapshot
	Hold bool // pvc-janitor.io/hold: "true" as a label or an annotation
}

// Claim is a claim of the namespace as this run classified it.
type Claim struct {
	UID       types.UID
	Name      string
	Workspace string
	State     classify.State
	// Rescue is the snapshot a Rescued claim is rescued by (its decision's
	// snapshot), nil otherwise.
	Rescue *inventory.Snapshot
	// Bound is status.phase == Bound.
	Bound bool
	// RestoresFrom is the snapshot its dataSourceRef (or dataSource) names.
	RestoresFrom string
}

// Verdict is the decision on one rescue.
type Verdict struct {
	Snapshot *inventory.Snapshot
	Prune    bool
	Reason   string
}

// Decide returns a verdict per rescue, in the order of rescues.
func Decide(p Policy, rescues []Rescue, contents map[string]inventory.Content, claims []Claim, now time.Time) []Verdict {
	out := make([]Verdict, len(rescues))
	byUID := map[types.UID]*Claim{}
	for i := range claims {
		byUID[claims[i].UID] = &claims[i]
	}
	rank := ranks(rescues)
	last := lastCopies(rescues, contents, claims)
	for i := range rescues {
		r := &rescues[i]
		v := Verdict{Snapshot: &r.Snapshot}
		v.Prune, v.Reason = candidate(p, r, rank[i], now)
		if v.Prune {
			if why := protected(p, r, last[i], byUID, contents, claims); why != "" {
				v.Prune, v.Reason = false, why
			}
		}
		out[i] = v
	}
	return out
}

// group is what --keep-last counts within: the workspace, else the source
// claim.
func group(r *Rescue) string {
	if r.Workspace != "" {
		return "w/" + r.Workspace
	}
	return "c/" + string(r.SourceUID) + "/" + r.SourceClaim
}

// ranks is each rescue's place in its group, newest data first (0-based).
func ranks(rescues []Rescue) []int {
	idx := make([]int, len(rescues))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ra, rb := &rescues[idx[a]], &rescues[idx[b]]
		if ga, gb := group(ra), group(rb); ga != gb {
			return ga < gb
		}
		da, db := classify.DataTime(&ra.Snapshot, nil), classify.DataTime(&rb.Snapshot, nil)
		if !da.Equal(db) {
			return da.After(db)
		}
		return ra.Name > rb.Name
	})
	rank := make([]int, len(rescues))
	n, prev := 0, ""
	for _, i := range idx {
		if g := group(&rescues[i]); g != prev {
			n, prev = 0, g
		}
		rank[i] = n
		n++
	}
	return rank
}

// candidate applies the retention: a rescue is a candidate when every
// retention set would let it go (one that keeps it keeps it).
func candidate(p Policy, r *Rescue, rank int, now time.Time) (bool, string) {
	if p.KeepFor <= 0 && p.KeepLast <= 0 {
		return false, "no retention set (--keep-for, --keep-last)"
	}
	var why string
	if p.KeepFor > 0 {
		cut := classify.CutTime(&r.Snapshot)
		if age := now.Sub(cut); age < p.KeepFor {
			return false, fmt.Sprintf("kept by --keep-for %s: cut %s ago", p.KeepFor, age.Round(time.Second))
		}
		why = fmt.Sprintf("cut more than --keep-for %s ago (%s)", p.KeepFor, cut.UTC().Format(time.RFC3339))
	}
	if p.KeepLast > 0 {
		if rank < p.KeepLast {
			return false, fmt.Sprintf("kept by --keep-last %d: number %d of its workspace by data time", p.KeepLast, rank+1)
		}
		if why != "" {
			why += " and "
		}
		why += fmt.Sprintf("older than the %d newest of its workspace", p.KeepLast)
	}
	return true, why
}

// lastCopies marks, per group, the newest intact rescue when no claim of
// the group is InUse or Rescued by a newer snapshot: it is the only copy of
// the workspace's last data.
func lastCopies(rescues []Rescue, contents map[string]inventory.Content, claims []Claim) []bool {
	newest := map[string]int{}
	for i := range rescues {
		r := &rescues[i]
		if ok, _ := classify.Intact(&r.Snapshot, contents); !ok {
			continue
		}
		g := group(r)
		j, seen := newest[g]
		if !seen || classify.DataTime(&r.Snapshot, nil).After(classify.DataTime(&rescues[j].Snapshot, nil)) {
			newest[g] = i
		}
	}
	out := make([]bool, len(rescues))
	for g, i := range newest {
		out[i] = !movedOn(g, &rescues[i], claims)
	}
	return out
}

// movedOn: a claim of the rescue's group is in use, or rescued by a
// snapshot with newer data than r.
func movedOn(g string, r *Rescue, claims []Claim) bool {
	data := classify.DataTime(&r.Snapshot, nil)
	for i := range claims {
		c := &claims[i]
		in := (r.Workspace != "" && c.Workspace == r.Workspace) || (r.Workspace == "" && c.UID == r.SourceUID)
		if !in {
			continue
		}
		if c.State == classify.InUse || c.State == classify.Attached {
			return true
		}
		if c.State == classify.Rescued && c.Rescue != nil && c.Rescue.UID != r.UID && classify.DataTime(c.Rescue, nil).After(data) {
			return true
		}
	}
	return false
}

// protected is why a candidate is kept whatever the retention, or "".
func protected(p Policy, r *Rescue, last bool, byUID map[types.UID]*Claim, contents map[string]inventory.Content, claims []Claim) string {
	switch {
	case r.Hold:
		return "held (pvc-janitor.io/hold)"
	case last:
		return "the only copy of its workspace's last data"
	}
	for i := range claims {
		if c := &claims[i]; c.RestoresFrom == r.Name && !c.Bound {
			return "claim " + c.Name + " restores from it and is not Bound yet"
		}
	}
	if src, ok := byUID[r.SourceUID]; ok && r.SourceUID != "" {
		newer := src.State == classify.Rescued && src.Rescue != nil && src.Rescue.UID != r.UID &&
			classify.DataTime(src.Rescue, nil).After(classify.DataTime(&r.Snapshot, nil))
		if !newer {
			return "its source claim " + src.Name + " exists and is not rescued by a newer snapshot"
		}
	}
	if c, ok := contents[r.ContentName]; ok && c.DeletionPolicy == "Retain" && !p.DeleteContents {
		return "its content " + c.Name + " is Retain: deleting the snapshot would leave the content and its cost (--delete-contents)"
	}
	return ""
}
