// Package retention decides which of the janitor's rescues prune may delete
// (docs/spec.md#retention). Decide is a pure function of what a run read: retention makes
// candidates, and four rules keep a candidate whatever the retention says, so
// that the last copy of a workspace's data is never pruned.
package retention

import (
	"fmt"
	"sort"
	"strings"
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
	// SessionsCarryData (--sessions-carry-data): the operator states that
	// a named workspace's newer sessions carry its older data
	// (docs/spec.md#rule-sessions-carry-data); without it only descent holds.
	SessionsCarryData bool
	// ClockSkew is --clock-skew: a snapshot dated by its cut (storage
	// clock) holds one dated on the API server's clock only by this
	// margin, and the other way round (docs/spec.md#rule-descent).
	ClockSkew time.Duration
	// Keep are rescues kept whatever the retention, with why: in a run,
	// those its reap deleted a claim on moments ago (the claim's data is
	// in them now, whatever else prune reads or ranks).
	Keep map[types.UID]string
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
	// RestoredFrom is its pvc-janitor.io/restored-from: the janitor restored
	// it from that snapshot.
	RestoredFrom string
	// Created is its creationTimestamp; RestoredDataTime its
	// pvc-janitor.io/restored-data-time, for a restored claim (raw: the
	// judge reads it, docs/spec.md#rule-restored-data-time).
	Created          time.Time
	RestoredDataTime string
	// OrphanedSince is its decision's orphaned-since (nil: unknown or not
	// an orphan): it dates someone else's snapshot of the claim when
	// earlier than the cut (docs/spec.md#rule-data-time).
	OrphanedSince *time.Time
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
	l, at := judge(rescues, contents, claims)
	l.Carry, l.ClockSkew = p.SessionsCarryData, p.ClockSkew
	for i := range rescues {
		r := &rescues[i]
		v := Verdict{Snapshot: &r.Snapshot}
		v.Prune, v.Reason = candidate(p, r, rank[i], now)
		if v.Prune {
			c := &l.Copies[at[i]]
			holder := l.HeldBy(at[i])
			why := restoring(r, now)
			if why == "" {
				why = protected(p, r, c.Intact && holder < 0, byUID, contents, claims)
			}
			if why != "" {
				v.Prune, v.Reason = false, why
			} else {
				v.Reason += "; " + heldWhy(c, l, at[i], holder)
			}
		}
		out[i] = v
	}
	return out
}

// heldWhy says why a rescue about to be pruned is no last copy: the copy
// that holds its data, or that it is not intact.
func heldWhy(c *classify.Copy, l *classify.Lineage, at, holder int) string {
	if !c.Intact {
		return "not intact"
	}
	h := &l.Copies[holder]
	return "its data is also in " + strings.ReplaceAll(h.Kind.String(), "-", " ") + " " + h.Name + ": " + l.Proof(holder, at)
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
		// docs/spec.md#retention-archives: an archive ranks after a
		// rescue of equal data.
		if ra.Superseded != rb.Superseded {
			return !ra.Superseded
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

// judge builds the lineage of the namespace's rescues and claims; at maps
// each rescue to its copy. An intact rescue that no other copy holds
// (Lineage.HeldBy) is the last intact copy of its data
// (docs/spec.md#retention-last-copy, docs/spec.md#rule-lineage): no other
// rescue, no claim in use that carries the workspace's line past it, no
// rescue of a claim holds it. An older claim in use (a lingering pod) or a
// restored claim of older data holds none of it; an archive never holds a
// rescue's data, and a rescue of equal data holds an archive's. A Rescued claim's rescue is a copy too (the
// classifier found it intact), also when it is not one of the janitor's.
func judge(rescues []Rescue, contents map[string]inventory.Content, claims []Claim) (*classify.Lineage, []int) {
	ns := ""
	if len(rescues) > 0 {
		ns = rescues[0].Namespace
	}
	copies := make([]classify.Copy, 0, len(rescues)+2*len(claims))
	byUID := make(map[types.UID]int, len(claims))
	for i := range claims {
		c := &claims[i]
		cp := claimCopy(ns, c)
		byUID[c.UID] = len(copies)
		copies = append(copies, cp)
	}
	mine := make(map[types.UID]bool, len(rescues))
	at := make([]int, len(rescues))
	for i := range rescues {
		s := &rescues[i].Snapshot
		mine[s.UID] = true
		at[i] = len(copies)
		copies = append(copies, snapCopy(s, contents, copies, byUID))
	}
	for i := range claims {
		c := &claims[i]
		if classify.RuleFor(c.State).Snapshot != classify.SnapRescue || c.Rescue == nil || mine[c.Rescue.UID] {
			continue
		}
		cp := snapCopy(c.Rescue, contents, copies, byUID)
		cp.Workspace = copies[byUID[c.UID]].Workspace
		cp.Kind, cp.Intact, cp.Source = classify.CopyRescue, true, c.UID
		// Someone else's snapshot of an idle claim holds the claim's data
		// of its last use, not of its cut (finding E of issue 38): dated
		// by the claim's orphaned-since, its line reaches no further.
		if t := c.OrphanedSince; t != nil && t.Before(cp.DataTime) {
			cp.DataTime = *t
			if cp.Base.After(*t) {
				cp.Base = *t
			}
		}
		copies = append(copies, cp)
	}
	return classify.NewLineage(copies), at
}

func claimCopy(ns string, c *Claim) classify.Copy {
	cl := &inventory.Claim{Namespace: ns, Name: c.Name, UID: c.UID, CreationTimestamp: c.Created, Phase: "Bound",
		Labels: inventory.ClaimLabels{Workspace: c.Workspace}}
	if c.RestoredDataTime != "" {
		cl.Annotations = map[string]string{classify.AnnotationRestoredDataTime: c.RestoredDataTime}
	}
	cl.DataSource = c.RestoresFrom
	if c.RestoredFrom != "" {
		if cl.Annotations == nil {
			cl.Annotations = map[string]string{}
		}
		cl.Annotations[classify.AnnotationRestoredFrom] = c.RestoredFrom
	}
	return classify.ClaimCopy(cl, &classify.Decision{Claim: cl, State: c.State, OrphanedSince: c.OrphanedSince}, time.Time{})
}

func snapCopy(s *inventory.Snapshot, contents map[string]inventory.Content, copies []classify.Copy, byUID map[types.UID]int) classify.Copy {
	var src *classify.Copy
	if j, ok := byUID[s.SourceUID]; ok && s.SourceUID != "" {
		src = &copies[j]
	}
	return classify.SnapshotCopy(s, contents, src)
}

// restoring is why a restore's source is kept (docs/spec.md#restore-protects-source):
// its pvc-janitor.io/restoring mark is younger than inventory.RestoringFor
// or cannot be dated. Prune reads the mark again right before each delete
// (prune.StillPrunable); kept here, the rescue is no candidate at all, so
// its content is never set to Delete and it counts in no blast radius.
func restoring(r *Rescue, now time.Time) string {
	if !inventory.RestoringBlocks(r.Restoring, now) {
		return ""
	}
	return "a restore is reading it (pvc-janitor.io/restoring: " + r.Restoring + ")"
}

// protected is why a candidate is kept whatever the retention, or "".
func protected(p Policy, r *Rescue, last bool, byUID map[types.UID]*Claim, contents map[string]inventory.Content, claims []Claim) string {
	if why, ok := p.Keep[r.UID]; ok {
		return why
	}
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
		newer := classify.RuleFor(src.State).Snapshot == classify.SnapRescue && src.Rescue != nil && src.Rescue.UID != r.UID &&
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
