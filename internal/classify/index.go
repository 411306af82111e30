package classify

import (
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// nsName keys the per-call indexes: a namespace and a name, a workspace or a
// StatefulSet claim prefix.
type nsName struct{ ns, name string }

// top2 holds two indexes (-1 when empty). For claims of a workspace: the
// newest claim and the next newest. For evidence snapshots of a workspace:
// the newest snapshot and the newest one whose source claim name differs from
// the first one's, which is all that "the newest snapshot whose source is not
// claim C" needs, whatever C is.
type top2 struct{ a, b int32 }

// wsEntry is what a workspace's supersession check needs.
type wsEntry struct{ claims, snaps top2 }

var emptyWS = wsEntry{top2{-1, -1}, top2{-1, -1}}

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
	// ws maps (namespace, workspace) to its newest claims and to its newest
	// snapshots that can show that the workspace moved on (not archives, not
	// being deleted). Nil without a workspace label.
	ws map[nsName]wsEntry
	// sts maps (namespace, "<template>-<statefulset>") to the first
	// StatefulSet template producing that prefix; stsNext chains the others.
	sts     map[nsName]int32
	stsNext []int32
}

func buildIndex(inv *inventory.Inventory, p Policy) *index {
	ix := &index{}
	if p.WorkspaceLabel != "" {
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
			e.claims = pushClaim(inv.Claims, e.claims, int32(i))
			ix.ws[k] = e
		}
	}

	n := 0
	for _, list := range inv.Snapshots {
		n += len(list)
	}
	if n > 0 {
		ix.snaps = make([]*inventory.Snapshot, 0, n)
		ix.snapNext = make([]int32, 0, n)
		ix.bySource = make(map[nsName]int32, n)
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
					// A workspace known only from snapshots cannot
					// supersede any claim in scope: no entry needed.
					wk := nsName{ns, s.Workspace}
					if e, ok := ix.ws[wk]; ok {
						e.snaps = ix.pushSnap(e.snaps, i)
						ix.ws[wk] = e
					}
				}
			}
		}
	}

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
	return ix
}

// newerSnap orders snapshots by creation, then by name so that the choice
// does not depend on map iteration order.
func newerSnap(a, b *inventory.Snapshot) bool {
	if !a.CreationTimestamp.Equal(b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp)
	}
	return a.Name > b.Name
}

// pushSnap keeps t.a the newest snapshot and t.b the newest one whose source
// claim name differs from t.a's.
func (ix *index) pushSnap(t top2, i int32) top2 {
	s := ix.snaps[i]
	if t.a < 0 {
		t.a = i
		return t
	}
	a := ix.snaps[t.a]
	if s.SourceClaim == a.SourceClaim {
		if newerSnap(s, a) {
			t.a = i
		}
		return t
	}
	if newerSnap(s, a) {
		t.a, t.b = i, t.a
		return t
	}
	if t.b < 0 || newerSnap(s, ix.snaps[t.b]) {
		t.b = i
	}
	return t
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

// secs drops sub-second precision: marks are written as RFC 3339 without
// fractions, and comparing at that precision keeps classification idempotent.
func secs(t time.Time) time.Time { return t.Truncate(time.Second).UTC() }
