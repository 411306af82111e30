package rescue

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// quiet is how long a watch may stay silent before the snapshot is read
// again: a lost event never stalls the wait.
const quiet = 30 * time.Second

// snapshotWatch follows one snapshot for the wait: a watch on its name from
// the last resourceVersion seen, and a GET whenever the watch cannot be
// trusted (it could not be opened, failed, closed, or stayed quiet). It
// decides nothing: the wait asks decide about each observation.
type snapshotWatch struct {
	r        *rescuer
	wctx     context.Context // bounds the watches: the wait's time
	ns, name string

	cur   *snapv1.VolumeSnapshot // last seen; nil once deleted
	stale bool                   // cur must be read again before it is observed
	w     watch.Interface        // nil when no watch is open
}

func (r *rescuer) watchSnapshot(wctx context.Context, vs *snapv1.VolumeSnapshot) *snapshotWatch {
	return &snapshotWatch{r: r, wctx: wctx, ns: vs.Namespace, name: vs.Name, cur: vs}
}

// observe returns what the snapshot (read again if stale) shows now, with
// its content (GET) when it is ready. A failed read makes it stale.
func (s *snapshotWatch) observe(ctx context.Context) observation {
	var ob observation
	if s.stale {
		fresh, err := s.r.getSnapshot(ctx, s.ns, s.name)
		if err != nil {
			ob.ReadErr = err
			return ob
		}
		s.cur, s.stale = fresh, false
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

// await returns when the snapshot may have changed: on a watch event, or
// once next (when the rule decides again if nothing changes) has passed,
// at most quiet. It opens the watch if none is open. false: ctx ended.
func (s *snapshotWatch) await(ctx context.Context, next time.Duration) bool {
	if s.w == nil && s.cur != nil {
		if err := s.open(); err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Msg("watch snapshot; reading it again")
			next = min(next, time.Second)
			s.stale = true
		}
	}
	var events <-chan watch.Event
	if s.w != nil {
		events = s.w.ResultChan()
	}
	// The server's clock advances in whole seconds: never spin on it.
	t := time.NewTimer(min(max(next, 100*time.Millisecond), quiet))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		if next >= quiet {
			s.stop()
			s.stale = true
		}
	case ev, ok := <-events:
		s.apply(ev, ok)
	}
	return true
}

// open watches the snapshot from the resourceVersion last seen.
func (s *snapshotWatch) open() error {
	w, err := s.r.c.Snap.SnapshotV1().VolumeSnapshots(s.ns).Watch(s.wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", s.name).String(),
		ResourceVersion: s.cur.ResourceVersion,
	})
	if err != nil {
		return err
	}
	s.w = w
	return nil
}

// apply takes in one watch event; ok is false when the watch closed.
func (s *snapshotWatch) apply(ev watch.Event, ok bool) {
	switch {
	case !ok || ev.Type == watch.Error:
		s.stop()
		s.stale = true
	case ev.Type == watch.Deleted:
		s.cur = nil
	default:
		if vs, ok := ev.Object.(*snapv1.VolumeSnapshot); ok {
			s.cur = vs
		}
	}
}

func (s *snapshotWatch) stop() {
	if s.w != nil {
		s.w.Stop()
		s.w = nil
	}
}
