package rescue

import (
	"context"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// snapshotHub is the run's one watch of the VolumeSnapshots of each
// namespace it rescues in, shared by every wait (issue 43: one watch per
// run and namespace, not one per snapshot). It decides nothing: it hands
// each wait the events of its snapshot, and tells it to read the snapshot
// again whenever it cannot vouch that no event was missed.
//
// What it vouches for: a wait that subscribes with a snapshot read (or
// created) at resourceVersion rv gets every later change of it when the
// namespace's watch began at or before rv (events after the watch's start
// are all delivered, in order), or when the read was sent after the watch
// was opened (the read then saw every change up to the watch's start). In
// any other case, and whenever the watch fails, the wait reads the
// snapshot again (a GET) and subscribes anew; the wait's own quiet timer
// still reads it again after a silence, so a lost event never stalls it.
type snapshotHub struct {
	c   *kube.Clients
	ctx context.Context // the run's: the watches end with it

	mu sync.Mutex
	ns map[string]*nsWatch
}

// nsWatch is the state of one namespace's watch.
type nsWatch struct {
	running bool
	start   string    // the resourceVersion the watch began after
	began   time.Time // when the request that opened it was sent
	subs    map[string]chan hubEvent
	// latest is the last event of each snapshot of the janitor's, kept
	// until its wait ends: a wait that subscribes after an event of its
	// snapshot went by still gets it.
	latest map[string]hubEvent
}

// hubEvent is what a wait is told: the snapshot now (nil once deleted), or
// stale: read it again.
type hubEvent struct {
	vs      *snapv1.VolumeSnapshot
	deleted bool
	stale   bool
	rv      string
}

func newSnapshotHub(ctx context.Context, c *kube.Clients) *snapshotHub {
	return &snapshotHub{c: c, ctx: ctx, ns: map[string]*nsWatch{}}
}

// subscribe registers the wait of snapshot ns/name, last read at
// resourceVersion rv by a request sent at readAt. safe is false when the
// hub cannot vouch for the changes between that read and its watch: the
// wait must read the snapshot again first.
func (h *snapshotHub) subscribe(ns, name, rv string, readAt time.Time) (<-chan hubEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.ns[ns]
	if w == nil {
		w = &nsWatch{subs: map[string]chan hubEvent{}, latest: map[string]hubEvent{}}
		h.ns[ns] = w
	}
	ch := make(chan hubEvent, 1)
	w.subs[name] = ch
	if !w.running {
		w.running, w.start, w.began = true, rv, time.Now()
		go h.run(ns, w, rv)
		return ch, true
	}
	safe := !readAt.Before(w.began) || later(rv, w.start) >= 0
	if ev, ok := w.latest[name]; ok && later(ev.rv, rv) > 0 {
		ch <- ev
	}
	return ch, safe
}

// unsubscribe ends a subscription; forget also drops what the hub kept of
// the snapshot (its wait is over).
func (h *snapshotHub) unsubscribe(ns, name string, forget bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w := h.ns[ns]; w != nil {
		delete(w.subs, name)
		if forget {
			delete(w.latest, name)
		}
	}
}

// later compares two resourceVersions of VolumeSnapshots: 1 when a is
// later, 0 when equal, -1 when earlier or when either cannot be compared
// (the caller then reads again: the safe side).
func later(a, b string) int {
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return -1
	}
	return c
}

// run follows the namespace from rv until the run ends or the watch fails;
// a watch the server closes (its timeout) is opened again where it left.
func (h *snapshotHub) run(ns string, w *nsWatch, rv string) {
	log := zerolog.Ctx(h.ctx)
	for h.ctx.Err() == nil {
		wi, err := h.c.Snap.SnapshotV1().VolumeSnapshots(ns).Watch(h.ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			log.Debug().Err(err).Str("namespace", ns).Msg("watch snapshots; each wait reads its own again")
			break
		}
		ok := true
		for ev := range wi.ResultChan() {
			if rv, ok = h.apply(ns, w, ev, rv); !ok {
				break
			}
		}
		wi.Stop()
		if !ok {
			break
		}
	}
	h.broken(w)
}

// apply takes in one event; it returns the resourceVersion to resume
// from, false when the watch must be given up (an error: 410 Gone, say).
func (h *snapshotHub) apply(ns string, w *nsWatch, ev watch.Event, rv string) (string, bool) {
	if ev.Type == watch.Error {
		zerolog.Ctx(h.ctx).Debug().Str("namespace", ns).Msg("watch of snapshots failed; each wait reads its own again")
		return rv, false
	}
	vs, ok := ev.Object.(*snapv1.VolumeSnapshot)
	if !ok {
		return rv, true
	}
	if ev.Type == watch.Bookmark {
		return vs.ResourceVersion, true
	}
	he := hubEvent{vs: vs, rv: vs.ResourceVersion, deleted: ev.Type == watch.Deleted}
	if he.deleted {
		he.vs = nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, sub := w.subs[vs.Name]
	if sub || vs.Labels[inventory.LabelManagedBy] == inventory.ManagedByValue {
		w.latest[vs.Name] = he
	}
	if sub {
		send(ch, he)
	}
	return vs.ResourceVersion, true
}

// broken tells every wait to read its snapshot again; the next subscriber
// opens the namespace's watch anew.
func (h *snapshotHub) broken(w *nsWatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.running = false
	clear(w.latest)
	for _, ch := range w.subs {
		send(ch, hubEvent{stale: true})
	}
}

// send puts ev in ch, in place of an event not taken yet: the latest
// supersedes it (and a stale one makes the wait read the latest).
func send(ch chan hubEvent, ev hubEvent) {
	select {
	case ch <- ev:
		return
	default:
	}
	select {
	case <-ch:
	default:
	}
	ch <- ev
}
