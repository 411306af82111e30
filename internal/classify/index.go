package classify

import (
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// nsName keys the per-call indexes: a namespace and a name, a workspace or a
// StatefulSet claim prefix.
type nsName struct{ ns, name string }

// top2 holds two indexes (-1 when empty): the newest claim of a workspace
// and the next newest.
type top2 struct{ a, b int32 }

// wsEntry is what a workspace's supersession check needs.
type wsEntry struct {
	// claims: the two newest claims that are not Lost and not restored.
	claims top2
	// restored is the restored claim (not Lost) whose restored data time
	// (restoredT, Unix seconds: the annotation keeps whole seconds) is the
	// newest, -1 when none: a restored claim carries the workspace on from
	// its source's data, not from its creation (docs/spec.md#rule-lineage).
	restored  int32
	restoredT int64
	// snaps heads the chain (through index.wsNext) of the workspace's
	// snapshots that can show that it moved on (not archives, not being
	// deleted); -1 when none.
	snaps int32
	// inUse is the newest claim of the workspace that is in use now and
	// not restored, -1 when none; inUseRestored the restored one in use
	// whose restored data time (inUseRestoredT) is the newest.
	inUse          int32
	inUseRestored  int32
	inUseRestoredT int64
}

var emptyWS = wsEntry{claims: top2{-1, -1}, snaps: -1, restored: -1, inUse: -1, inUseRestored: -1}

// index is built once per Classify call so that each claim costs a few map
// look-ups instead of a scan of the inventory. Lists are chained through
// next-arrays rather than stored as slices per key, so that building the index
// costs a handful of allocations whatever the inventory's size.
type index struct {
	// snaps is every snapshot of the inventory, flattened.
	snaps []*inventory.Snapshot
	// bySource maps (namespace, source claim name) to the first snapshot of
	// that source; snapNext chains the others.
	bySource map[nsName]int32
	snapNext []int32
	// ws maps (namespace, workspace) to its entry; wsNext chains its
	// snapshots. Nil without a workspace label.
	ws     map[nsName]wsEntry
	wsNext []int32
	// byName maps (namespace, claim name) to the claim's index, and since
	// holds each orphan's orphaned-since (nil when unknown or not an
	// orphan): the data time of another tool's snapshot depends on its
	// source claim's. Nil when there are no snapshots.
	byName map[nsName]int32
	since  []*time.Time
	// sts maps (namespace, "<template>-<statefulset>") to the first
	// StatefulSet template producing that prefix; stsNext chains the others.
	sts     map[nsName]int32
	stsNext []int32
	// forks maps (namespace, a snapshot's source claim name) to the claims
	// created from that snapshot (spec.dataSource or the janitor's
	// restored-from, the snapshot created no later than the claim): the
	// workspace lines that descend from the claim's data
	// (docs/spec.md#rule-superseded). Nil when no claim names a snapshot.
	forks map[nsName][]fork
}

// fork is a claim created from snapshot snap.
type fork struct {
	claim int32
	snap  *inventory.Snapshot
}

// buildForks indexes the claims of inv created from one of its snapshots.
// It costs nothing when no claim names a snapshot.
func (ix *index) buildForks(inv *inventory.Inventory) {
	var byName map[nsName]*inventory.Snapshot
	for i := range inv.Claims {
		o := &inv.Claims[i]
		name := o.DataSource
		if name == "" {
			name = o.Annotations[AnnotationRestoredFrom]
		}
		if name == "" {
			continue
		}
		if byName == nil {
			byName = map[nsName]*inventory.Snapshot{}
			for ns, list := range inv.Snapshots {
				for j := range list {
					byName[nsName{ns, list[j].Name}] = &list[j]
				}
			}
			ix.forks = map[nsName][]fork{}
		}
		s := byName[nsName{o.Namespace, name}]
		if s == nil || s.SourceClaim == "" || s.CreationTimestamp.After(o.CreationTimestamp) {
			continue
		}
		k := nsName{o.Namespace, s.SourceClaim}
		ix.forks[k] = append(ix.forks[k], fork{claim: int32(i), snap: s})
	}
}

// build indexes inv for the second pass of Classify; ds holds the
// first pass's decisions (states 1–6, orphaned-since of orphans).
func (ix *index) build(inv *inventory.Inventory, p Policy, ds []Decision, orphans []bool) {
	if p.WorkspaceLabel != "" {
		ix.buildWorkspaces(inv, ds)
		if !p.SessionsCarryData {
			ix.buildForks(inv)
		}
	}
	n := 0
	for _, list := range inv.Snapshots {
		n += len(list)
	}
	if n == 0 {
		return
	}
	ix.byName = make(map[nsName]int32, len(inv.Claims))
	ix.since = make([]*time.Time, len(inv.Claims))
	for i := range inv.Claims {
		c := &inv.Claims[i]
		ix.byName[nsName{c.Namespace, c.Name}] = int32(i)
		if orphans[i] {
			ix.since[i] = ds[i].OrphanedSince
		}
	}
	ix.buildSnapshots(inv, n)
}

// buildWorkspaces indexes the claims of each named workspace: its two
// newest claims, its restored claim of the newest data, and the newest of
// each kind in use.
func (ix *index) buildWorkspaces(inv *inventory.Inventory, ds []Decision) {
	ix.ws = make(map[nsName]wsEntry, len(inv.Claims))
	for i := range inv.Claims {
		c := &inv.Claims[i]
		ws := c.Labels.Workspace
		if ws == "" {
			continue
		}
		k := nsName{c.Namespace, ws}
		e, ok := ix.ws[k]
		if !ok {
			e = emptyWS
		}
		t, restored := RestoredDataTime(c)
		rt := t.Unix()
		switch {
		case c.Phase == "Lost":
		case !restored:
			e.claims = pushClaim(inv.Claims, e.claims, int32(i))
		case e.restored < 0 || rt > e.restoredT:
			e.restored, e.restoredT = int32(i), rt
		}
		if ds[i].State == InUse {
			switch {
			case restored:
				if e.inUseRestored < 0 || rt > e.inUseRestoredT {
					e.inUseRestored, e.inUseRestoredT = int32(i), rt
				}
			case e.inUse < 0 || c.CreationTimestamp.After(inv.Claims[e.inUse].CreationTimestamp):
				e.inUse = int32(i)
			}
		}
		ix.ws[k] = e
	}
}

// buildSnapshots chains the n snapshots of inv by source claim name and,
// for workspaces with claims in scope, by workspace.
func (ix *index) buildSnapshots(inv *inventory.Inventory, n int) {
	ix.snaps = make([]*inventory.Snapshot, 0, n)
	ix.snapNext = make([]int32, 0, n)
	ix.bySource = make(map[nsName]int32, n)
	if ix.ws != nil {
		ix.wsNext = make([]int32, n)
	}
	for ns, list := range inv.Snapshots {
		for j := range list {
			s := &list[j]
			i := int32(len(ix.snaps))
			ix.snaps = append(ix.snaps, s)
			k := nsName{ns, s.SourceClaim}
			if head, ok := ix.bySource[k]; ok {
				ix.snapNext = append(ix.snapNext, head)
			} else {
				ix.snapNext = append(ix.snapNext, -1)
			}
			ix.bySource[k] = i
			if ix.ws != nil && s.Workspace != "" && !s.Superseded && s.DeletionTimestamp == nil {
				// A workspace known only from snapshots cannot supersede
				// any claim in scope: no entry needed.
				wk := nsName{ns, s.Workspace}
				if e, ok := ix.ws[wk]; ok {
					ix.wsNext[i] = e.snaps
					e.snaps = i
					ix.ws[wk] = e
				}
			}
		}
	}
}

// buildSts indexes the StatefulSet claim templates, which the first pass
// needs to find referrers.
func (ix *index) buildSts(inv *inventory.Inventory) {
	if len(inv.StatefulSetTemplates) > 0 {
		ix.sts = make(map[nsName]int32, len(inv.StatefulSetTemplates))
		ix.stsNext = make([]int32, len(inv.StatefulSetTemplates))
		for i, t := range inv.StatefulSetTemplates {
			k := nsName{t.Namespace, t.Template + "-" + t.StatefulSet}
			if head, ok := ix.sts[k]; ok {
				ix.stsNext[i] = head
			} else {
				ix.stsNext[i] = -1
			}
			ix.sts[k] = int32(i)
		}
	}
}

// newerSnap orders snapshots by creation, then by name so that the choice
// does not depend on map iteration order.
func newerSnap(a, b *inventory.Snapshot) bool {
	if !a.CreationTimestamp.Equal(b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp)
	}
	return a.Name > b.Name
}

// newerCut orders snapshots by cut time, then by name.
func newerCut(a, b *inventory.Snapshot) bool {
	ta, tb := CutTime(a), CutTime(b)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.Name > b.Name
}

// pushClaim keeps t.a the newest claim and t.b the next newest. Ties keep the
// earlier claim of the inventory first.
func pushClaim(claims []inventory.Claim, t top2, i int32) top2 {
	c := claims[i].CreationTimestamp
	switch {
	case t.a < 0:
		t.a = i
	case c.After(claims[t.a].CreationTimestamp):
		t.a, t.b = i, t.a
	case t.b < 0 || c.After(claims[t.b].CreationTimestamp):
		t.b = i
	}
	return t
}

// stsOrdinal splits a claim name <prefix>-<ordinal> where ordinal is a run of
// decimal digits; ok is false when the name has no such form.
func stsOrdinal(name string) (prefix string, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", false
	}
	for j := i + 1; j < len(name); j++ {
		if name[j] < '0' || name[j] > '9' {
			return "", false
		}
	}
	return name[:i], true
}
