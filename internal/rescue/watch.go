package rescue

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// quiet is how long a watch may stay silent before the snapshot is read
// again: a lost event never stalls the wait.
const quiet = 30 * time.Second

// snapshotWatch follows one snapshot for the wait: its events from the
// run's watch of the namespace (snapshotHub), and a GET whenever that
// cannot be trusted (the hub cannot vouch for the changes since the last
// read, its watch failed, or it stayed quiet). It decides nothing: the
// wait asks decide about each observation.
type snapshotWatch struct {
	r        *rescuer
	ns, name string

	cur    *snapv1.VolumeSnapshot // last seen; nil once deleted
	readAt time.Time              // when the request that read cur was sent
	stale  bool                   // cur must be read again before it is observed
	events <-chan hubEvent        // nil when not subscribed
}

// watchSnapshot follows vs, read (or created) by a request sent at readAt.
func (r *rescuer) watchSnapshot(vs *snapv1.VolumeSnapshot, readAt time.Time) *snapshotWatch {
	return &snapshotWatch{r: r, ns: vs.Namespace, name: vs.Name, cur: vs, readAt: readAt}
}

// observe returns what the snapshot (read again if stale) shows now, with
// its content (GET) when it is ready. A failed read makes it stale.
func (s *snapshotWatch) observe(ctx context.Context) observation {
	var ob observation
	if s.stale {
		at := time.Now()
		fresh, err := s.r.getSnapshot(ctx, s.ns, s.name)
		if err != nil {
			ob.ReadErr = err
			return ob
		}
		// Subscribed anew with this read: the hub vouches for what
		// follows it.
		s.unsubscribe(false)
		s.cur, s.readAt, s.stale = fresh, at, false
	}
	if s.cur == nil {
		return ob
	}
	snap := kube.Snapshot(s.cur, s.r.o.WorkspaceLabel)
	ob.Snapshot = &snap
	if snap.ReadyToUse && snap.Error == nil && snap.DeletionTimestamp == nil && snap.ContentName != "" {
		if ob.Content, ob.ReadErr = s.r.getContent(ctx, snap.ContentName); ob.ReadErr != nil {
			s.stale = true
		}
	}
	return ob
}

// await returns when the snapshot may have changed: on an event of the
// run's watch, or once next (when the rule decides again if nothing
// changes) has passed, at most quiet. It subscribes to the hub if it is
// not subscribed. false: ctx ended.
func (s *snapshotWatch) await(ctx context.Context, next time.Duration) bool {
	if s.events == nil && s.cur != nil {
		events, safe := s.r.hub.subscribe(s.ns, s.name, s.cur.ResourceVersion, s.readAt)
		s.events = events
		if !safe {
			// Changes between the last read and the hub's watch may
			// have gone by: read again before waiting.
			s.stale = true
			return true
		}
	}
	events := s.events
	// The server's clock advances in whole seconds: never spin on it. Not
	// retry.Sleep: the wait ends on the first of an event, next and quiet.
	t := time.NewTimer(min(max(next, 100*time.Millisecond), quiet))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		if next >= quiet {
			s.stale = true
		}
	case ev := <-events:
		s.apply(ev)
	}
	return true
}

// apply takes in one event of the hub.
func (s *snapshotWatch) apply(ev hubEvent) {
	switch {
	case ev.stale:
		s.stale = true
	case ev.deleted:
		s.cur = nil
		s.unsubscribe(false)
	case ev.vs != nil:
		s.cur = ev.vs
	}
}

// unsubscribe leaves the hub; forget when the wait is over.
func (s *snapshotWatch) unsubscribe(forget bool) {
	if s.events != nil || forget {
		s.r.hub.unsubscribe(s.ns, s.name, forget)
		s.events = nil
	}
}

func (s *snapshotWatch) stop() { s.unsubscribe(true) }
