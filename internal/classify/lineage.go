package classify

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Provenance annotations (docs/spec.md#rule-restored-data-time).
const (
	// AnnotationRestoredFrom on a restored claim names the snapshot it was
	// restored from.
	AnnotationRestoredFrom = inventory.Prefix + "restored-from"
	// AnnotationRestoredDataTime on a restored claim is the data time (RFC
	// 3339) of the snapshot it was restored from: until the claim is used
	// again, that is the newest data it holds.
	AnnotationRestoredDataTime = inventory.AnnotationRestoredDataTime
	// AnnotationLastUsed on a claim is the last use the janitor saw (RFC
	// 3339, the API server's clock).
	AnnotationLastUsed = inventory.AnnotationLastUsed
)

// CopyKind is what a copy of a workspace's data is (docs/spec.md#rule-lineage).
type CopyKind uint8

// The kinds of copy. Their order is the order in which copies of equal data
// time are preferred: a live claim, a restored claim, the janitor's rescue,
// someone else's snapshot, and last an archive (docs/spec.md#retention-archives).
const (
	CopyClaim CopyKind = iota + 1
	CopyRestored
	CopyRescue
	CopyForeign
	CopyArchive
)

var copyKindNames = [...]string{"", "claim", "restored-claim", "rescue", "foreign-snapshot", "archive"}

func (k CopyKind) String() string {
	if int(k) < len(copyKindNames) {
		return copyKindNames[k]
	}
	return "unknown"
}

// WorkspaceKey names a workspace: a namespace and a workspace label value,
// or, for a claim without one, the claim's own name (Own).
type WorkspaceKey struct {
	Namespace string
	Name      string
	Own       bool
}

// Copy is one copy of a workspace's data with its data time and provenance.
type Copy struct {
	Kind      CopyKind
	Workspace WorkspaceKey
	Name      string
	UID       types.UID
	// Source is the claim whose data it is: a claim's own UID, a snapshot's
	// pvc-janitor.io/source-uid ("" when unknown); SourceName its name.
	Source     types.UID
	SourceName string
	// DataTime is the newest moment whose writes it can hold.
	DataTime time.Time
	// Base is how far the workspace's line reaches in it: it holds the
	// workspace's writes up to Base, not only its own. A claim's is its
	// creation (a newer claim carries the workspace on); a restored
	// claim's, and a snapshot of one, the data time it was restored from;
	// any other snapshot's, its data time.
	Base time.Time
	// Intact: a snapshot that is intact (docs/spec.md#rule-intact); a claim
	// that is not being deleted and not Lost.
	Intact bool
	// InUse: a claim in use now (InUse or Attached).
	InUse bool
	// Recorded: a janitor's rescue whose data time is recorded.
	Recorded bool
	// Retain: a snapshot whose content has deletionPolicy Retain.
	Retain bool
	// From is the snapshot a claim was created from: its
	// spec.dataSourceRef or spec.dataSource (kind VolumeSnapshot), else
	// the janitor's pvc-janitor.io/restored-from; "" for a claim created
	// empty, and for a snapshot (docs/spec.md#rule-descent).
	From string
	// Claim or Snapshot is the inventory object, when built from one.
	Claim    *inventory.Claim
	Snapshot *inventory.Snapshot
}

// Lineage is every copy of each workspace's data (docs/spec.md#rule-lineage). It is
// the one judge that destructive decisions ask where a workspace's newest
// data is and whether a copy is the last one holding some data. Whether one
// copy holds another's data it answers by descent only
// (docs/spec.md#rule-descent): parent links each copy to the copy its data
// came from.
type Lineage struct {
	Copies []Copy
	// heads maps a workspace to its first copy; next chains the others.
	heads map[WorkspaceKey]int32
	next  []int32
	// parent is, for a claim, the snapshot it was created from, for a
	// snapshot, its source claim (same UID); -1 when not in the lineage.
	parent []int32
	// Carry is the operator's statement --sessions-carry-data: a named
	// workspace's newer sessions carry its older data, so the workspace's
	// line (Copy.Base) holds too (docs/spec.md#rule-sessions-carry-data).
	Carry bool
	// ClockSkew is --clock-skew: a data time read off a cut (the storage
	// system's clock) and one recorded on the API server's clock compare
	// only by this margin (docs/spec.md#rule-descent).
	ClockSkew time.Duration
}

// NewLineage indexes copies by workspace and links each to its parent; it
// keeps the slice.
func NewLineage(copies []Copy) *Lineage {
	l := &Lineage{Copies: copies, heads: make(map[WorkspaceKey]int32, len(copies)/2+1), next: make([]int32, len(copies)),
		parent: make([]int32, len(copies))}
	claims := map[types.UID]int32{}
	var snaps map[nsName]int32
	for i := range copies {
		c := &copies[i]
		k := c.Workspace
		if h, ok := l.heads[k]; ok {
			l.next[i] = h
		} else {
			l.next[i] = -1
		}
		l.heads[k] = int32(i)
		l.parent[i] = -1
		switch {
		case c.isClaim():
			if c.UID != "" {
				claims[c.UID] = int32(i)
			}
		case c.Snapshot != nil || c.Name != "":
			if snaps == nil {
				snaps = make(map[nsName]int32)
			}
			snaps[nsName{k.Namespace, c.Name}] = int32(i)
		}
	}
	for i := range copies {
		c := &copies[i]
		if c.isClaim() {
			if j, ok := snaps[nsName{c.Workspace.Namespace, c.From}]; ok && c.From != "" && createdBefore(&copies[j], c) {
				l.parent[i] = j
			}
		} else if j, ok := claims[c.Source]; ok && c.Source != "" {
			l.parent[i] = j
		}
	}
	return l
}

// createdBefore reports whether snapshot s can be the source of claim c: it
// was not created after the claim (a snapshot of the same name created
// later is another snapshot). Unknown times do not refuse.
func createdBefore(s, c *Copy) bool {
	if s.Snapshot == nil || c.Claim == nil {
		return true
	}
	return !s.Snapshot.CreationTimestamp.After(c.Claim.CreationTimestamp)
}

func (c *Copy) isClaim() bool { return c.Kind == CopyClaim || c.Kind == CopyRestored }

// BuildLineage lists the copies of every workspace of inv. ds are the
// decisions of inv.Claims (same order; nil when not classified: then no
// claim is in use and orphaned-since is read from the mark only); now is
// the data time of a claim in use.
func BuildLineage(inv *inventory.Inventory, ds []Decision, now time.Time) *Lineage {
	n := len(inv.Claims)
	for _, list := range inv.Snapshots {
		n += len(list)
	}
	copies := make([]Copy, 0, n)
	byName := make(map[nsName]int32, len(inv.Claims))
	for i := range inv.Claims {
		cl := &inv.Claims[i]
		var d *Decision
		if ds != nil {
			d = &ds[i]
		}
		copies = append(copies, ClaimCopy(cl, d, now))
		byName[nsName{cl.Namespace, cl.Name}] = int32(i)
	}
	for ns, list := range inv.Snapshots {
		for j := range list {
			s := &list[j]
			var src *Copy
			if i, ok := byName[nsName{ns, s.SourceClaim}]; ok && s.SourceClaim != "" {
				if c := &copies[i]; (s.SourceUID == "" || s.SourceUID == c.UID) && !s.CreationTimestamp.Before(c.Claim.CreationTimestamp) {
					src = c
				}
			}
			copies = append(copies, SnapshotCopy(s, inv.Contents, src))
		}
	}
	return NewLineage(copies)
}

// ClaimKey is the workspace of a claim.
func ClaimKey(cl *inventory.Claim) WorkspaceKey {
	if cl.Labels.Workspace != "" {
		return WorkspaceKey{Namespace: cl.Namespace, Name: cl.Labels.Workspace}
	}
	return WorkspaceKey{Namespace: cl.Namespace, Name: cl.Name, Own: true}
}

// SnapshotKey is the workspace of a snapshot: its workspace label, else
// its source claim's own.
func SnapshotKey(s *inventory.Snapshot) WorkspaceKey {
	if s.Workspace != "" {
		return WorkspaceKey{Namespace: s.Namespace, Name: s.Workspace}
	}
	return WorkspaceKey{Namespace: s.Namespace, Name: s.SourceClaim, Own: true}
}

// ClaimCopy is a claim as a copy. d is its decision (nil: not classified).
func ClaimCopy(cl *inventory.Claim, d *Decision, now time.Time) Copy {
	c := Copy{Kind: CopyClaim, Workspace: ClaimKey(cl), Name: cl.Name, UID: cl.UID, Source: cl.UID, SourceName: cl.Name,
		Base: cl.CreationTimestamp, Intact: cl.DeletionTimestamp == nil && cl.Phase != "Lost", Claim: cl}
	if d != nil {
		c.InUse = d.UsedNow()
	}
	restored, rok := RestoredDataTime(cl)
	if rok {
		c.Kind, c.Base = CopyRestored, restored
	}
	c.From = cl.DataSource
	if c.From == "" {
		c.From = cl.Annotations[AnnotationRestoredFrom]
	}
	c.DataTime = ClaimDataTime(cl, d, now)
	return c
}

// ClaimDataTime is the newest moment whose writes claim cl can hold
// (docs/spec.md#rule-restored-data-time): now while it is in use; else its
// orphaned-since (the end of its last use), unless a use was seen after
// it (pvc-janitor.io/last-used); a restored claim not used since its
// restore, the data time it was restored from; without any of these, now
// (unknown is newest: the safe side for the copy itself).
func ClaimDataTime(cl *inventory.Claim, d *Decision, now time.Time) time.Time {
	if d != nil && d.UsedNow() {
		return now
	}
	// A last-used that does not parse is a use seen now (lastUsed).
	u := lastUsed(cl, now)
	used, uok := u.at, !u.at.IsZero()
	if restored, ok := RestoredDataTime(cl); ok {
		// Marked orphaned on its first scan is no use: only a seen use
		// (the last-used record) after the restore adds new data, and
		// then its end dates it, as any claim's.
		if !uok || !used.After(cl.CreationTimestamp) || !used.After(restored) {
			return restored
		}
	}
	var t time.Time
	ok := false
	if d != nil && d.OrphanedSince != nil {
		t, ok = *d.OrphanedSince, true
	} else if raw, has := cl.Annotations[inventory.AnnotationOrphanedSince]; has {
		if m, err := time.Parse(time.RFC3339, raw); err == nil {
			t, ok = m, true
		}
	}
	// A last use the janitor saw is when it saw the claim in use, not when
	// the use ended: without an orphaned-since at or after it, the use may
	// have gone on until now (found by the model checker: a claim seen in
	// use, then written and left, was dated by that sighting, and restore
	// put an older backup beside it).
	if !ok || (uok && used.After(t)) {
		return now
	}
	return t
}

// RestoredDataTime is the data time a restored claim was restored from
// (pvc-janitor.io/restored-data-time), when it is one and it parses.
func RestoredDataTime(cl *inventory.Claim) (time.Time, bool) {
	raw, ok := cl.Annotations[AnnotationRestoredDataTime]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		// A restored claim whose provenance does not parse: its data is
		// of no known time; the zero time never counts as newer data.
		return time.Time{}, true
	}
	return t, true
}

// SnapshotCopy is a snapshot as a copy. src is its source claim's copy when
// the claim is in the inventory (nil otherwise).
func SnapshotCopy(s *inventory.Snapshot, contents map[string]inventory.Content, src *Copy) Copy {
	c := Copy{Workspace: SnapshotKey(s), Name: s.Name, UID: s.UID, Source: s.SourceUID, SourceName: s.SourceClaim, Snapshot: s}
	switch {
	case !s.ManagedByJanitor:
		c.Kind = CopyForeign
	case s.Superseded:
		c.Kind = CopyArchive
	default:
		c.Kind = CopyRescue
	}
	var since *time.Time
	if src != nil && c.Kind == CopyForeign && src.Claim != nil && src.Kind == CopyClaim && !src.InUse {
		t := src.DataTime
		since = &t
	}
	c.DataTime = DataTime(s, since)
	c.Base = c.DataTime
	if src != nil {
		if c.Source == "" {
			c.Source = src.UID
		}
		if src.Kind == CopyRestored && src.Base.Before(c.Base) {
			c.Base = src.Base
		}
	}
	// The rescue of a restored claim records how far its claim's line
	// reached, for when the claim is gone.
	if rt := s.RestoredDataTime; rt != nil && rt.Before(c.Base) {
		c.Base = *rt
	}
	c.Intact, _ = Intact(s, contents)
	c.Recorded = DataTimeKnown(s)
	c.Retain = contents[s.ContentName].DeletionPolicy == "Retain"
	return c
}

// Holds reports whether copy j holds copy i's data (docs/spec.md#rule-descent):
// j is intact and descends from i. A copy descends from a claim's data when
// it is the same claim (same UID), a snapshot of that claim whose data time
// is at least as new (at equal data times, the one Newer ranks first, so
// that two copies never hold each other), or, transitively, a claim created
// from such a snapshot (Copy.From) or a snapshot of that claim. A claim
// holds others' data only while in use: an orphan's data goes into a
// rescue of its own before it is reaped. Nothing else holds anything:
// not a newer claim of the workspace, not a copy of newer data, not a
// claim of the same name (a claim created empty descends from nothing).
func (l *Lineage) Holds(j, i int) bool {
	how, _ := l.holds(j, i)
	return how != heldNot
}

// How one copy holds another's: the proof Holds found.
type heldHow uint8

const (
	heldNot       heldHow = iota
	heldSameClaim         // y is x's claim (same UID)
	heldNewerCut          // y is a snapshot of x's claim, at least as new
	heldDescent           // an ancestor of y (via) is x or a newer snapshot of x's claim
	heldLine              // --sessions-carry-data: y carries the workspace's line past x
)

// holds is Holds with its proof: how j holds i, and for heldDescent the
// ancestor through which.
func (l *Lineage) holds(j, i int) (heldHow, int32) {
	y, x := &l.Copies[j], &l.Copies[i]
	if !y.Intact || j == i || (y.UID != "" && y.UID == x.UID) {
		return heldNot, -1
	}
	if x.Source != "" && y.Source == x.Source {
		switch {
		case y.isClaim():
			return heldSameClaim, -1
		case Newer(y, x) && l.asNew(y, x):
			return heldNewerCut, -1
		}
		return heldNot, -1
	}
	if y.isClaim() && !y.InUse {
		return heldNot, -1
	}
	if k := l.descends(j, x); k >= 0 {
		return heldDescent, k
	}
	if l.Carry && !x.Workspace.Own && !y.Workspace.Own && carries(y, x) {
		return heldLine, -1
	}
	return heldNot, -1
}

// Proof says how copy j holds copy i's data (docs/spec.md#rule-descent):
// which object, by which field; "" when it does not.
func (l *Lineage) Proof(j, i int) string {
	how, k := l.holds(j, i)
	switch how {
	case heldSameClaim:
		return "the same claim (UID " + string(l.Copies[j].UID) + ")"
	case heldNewerCut:
		return "a snapshot of the same claim with data as new"
	case heldDescent:
		a := &l.Copies[k]
		if a.UID == l.Copies[i].UID {
			return "created from it (spec.dataSource or pvc-janitor.io/restored-from)"
		}
		return "created from snapshot " + a.Name + " of the same claim, with data as new"
	case heldLine:
		return "it carries the workspace's line past it (--sessions-carry-data)"
	}
	return ""
}

// carries is the workspace's line under --sessions-carry-data
// (docs/spec.md#rule-sessions-carry-data): y carries the line strictly past
// x's data time, or, when x is an archive and y is not, up to it. An
// archive or someone else's snapshot carries no line; a claim, only while
// in use (Holds checked that).
func carries(y, x *Copy) bool {
	switch {
	case y.Kind == CopyArchive || y.Kind == CopyForeign:
		return false
	case x.Kind == CopyArchive:
		return !y.Base.Before(x.DataTime)
	}
	return y.Base.After(x.DataTime)
}

// descends is the ancestor of copy j (the snapshot a claim was created
// from, a snapshot's source claim, and so on) that is x, or a snapshot of
// x's claim whose data is at least as new as x's; -1 when none is.
func (l *Lineage) descends(j int, x *Copy) int32 {
	for depth, k := 0, l.parent[j]; k >= 0 && depth < maxDescent; depth, k = depth+1, l.parent[k] {
		a := &l.Copies[k]
		if a.isClaim() {
			continue // a snapshot's source claim: its own data is newer than the snapshot's
		}
		if a.UID != "" && a.UID == x.UID {
			return k
		}
		if x.Source != "" && a.Source == x.Source && !a.DataTime.Before(x.DataTime) && l.asNew(a, x) {
			return k
		}
	}
	return -1
}

// asNew reports whether snapshot y's data is at least as new as x's across
// clocks: a data time read off a cut is on the storage system's clock, a
// recorded one (the janitor's rescue) on the API server's; when the two
// differ, y must be newer by --clock-skew (a cut read a second ahead may
// have been taken before x's last write).
func (l *Lineage) asNew(y, x *Copy) bool {
	if y.Recorded == x.Recorded || x.isClaim() {
		return true
	}
	return !y.DataTime.Before(x.DataTime.Add(l.ClockSkew))
}

// maxDescent bounds a walk up the ancestors: a chain is one snapshot and
// one claim per session of a workspace, and malformed objects (a claim
// naming a snapshot of itself) must not loop.
const maxDescent = 256

// HeldBy is the index of a copy of x's workspace that holds copy i's data,
// or -1: copy i is the last intact copy of it. Only copies of the same
// workspace are asked: a descendant filed under another workspace (a
// restore --as a claim of another label) leaves i kept, the safe side.
func (l *Lineage) HeldBy(i int) int {
	x := &l.Copies[i]
	for j := l.head(x.Workspace); j >= 0; j = l.next[j] {
		if int(j) != i && l.Holds(int(j), i) {
			return int(j)
		}
	}
	return -1
}

// LastCopy reports whether copy i is the last intact copy of its data.
func (l *Lineage) LastCopy(i int) bool { return l.HeldBy(i) < 0 }

// Newest is the copy of the workspace holding its newest data (-1 when it
// has none) and whether another copy ties it. Of equal data times the kind
// order decides (a claim, a restored claim, a rescue, someone else's
// snapshot, an archive), then the name. Only intact copies count.
func (l *Lineage) Newest(k WorkspaceKey) (best int, tie bool) {
	best = -1
	for j := l.head(k); j >= 0; j = l.next[j] {
		c := &l.Copies[j]
		if !c.Intact {
			continue
		}
		if best < 0 {
			best = int(j)
			continue
		}
		b := &l.Copies[best]
		if c.DataTime.Equal(b.DataTime) {
			tie = true
		}
		if Newer(c, b) {
			if !c.DataTime.Equal(b.DataTime) {
				tie = false
			}
			best = int(j)
		}
	}
	return best, tie
}

// IsNewest reports whether copy i holds its workspace's newest data, and
// whether another copy holds data of the same time.
func (l *Lineage) IsNewest(i int) (newest, tie bool) {
	c := &l.Copies[i]
	if !c.Intact {
		return false, false
	}
	for j := l.head(c.Workspace); j >= 0; j = l.next[j] {
		o := &l.Copies[j]
		if int(j) == i || !o.Intact {
			continue
		}
		switch {
		case o.DataTime.After(c.DataTime):
			return false, false
		case o.DataTime.Equal(c.DataTime):
			tie = true
		}
	}
	return true, tie
}

// Newer orders copies by data time, then kind (docs/spec.md#retention-archives), then
// name (the higher first, as newerSnap does, so that the choice does not
// depend on order).
func Newer(a, b *Copy) bool {
	if !a.DataTime.Equal(b.DataTime) {
		return a.DataTime.After(b.DataTime)
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Name > b.Name
}

// Of returns the indexes of a workspace's copies.
func (l *Lineage) Of(k WorkspaceKey) []int {
	var out []int
	for j := l.head(k); j >= 0; j = l.next[j] {
		out = append(out, int(j))
	}
	return out
}

func (l *Lineage) head(k WorkspaceKey) int32 {
	if h, ok := l.heads[k]; ok {
		return h
	}
	return -1
}

// lineTime is how far the workspace's line reaches in snapshot s, whose
// data time is t: a snapshot of a restored claim in the inventory reaches
// only as far as the data that claim was restored from
// (docs/spec.md#rule-lineage), whatever was written to it since.
func (c *classifier) lineTime(s *inventory.Snapshot, t time.Time) time.Time {
	if rt := s.RestoredDataTime; rt != nil && rt.Before(t) {
		t = *rt // recorded by the rescue: the claim may be gone
	}
	if s.SourceClaim == "" || c.ix.byName == nil {
		return t
	}
	i, ok := c.ix.byName[nsName{s.Namespace, s.SourceClaim}]
	if !ok {
		return t
	}
	cl := &c.inv.Claims[i]
	if (s.SourceUID != "" && s.SourceUID != cl.UID) || s.CreationTimestamp.Before(cl.CreationTimestamp) {
		return t
	}
	if rt, ok := RestoredDataTime(cl); ok && rt.Before(t) {
		return rt
	}
	return t
}
