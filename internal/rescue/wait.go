package rescue

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

type waitResult int

const (
	waitReady waitResult = iota
	waitError
	waitTimeout
	waitInterrupted
)

// wait watches one snapshot (no tight polling) until it is readyToUse, its
// status.error has persisted for ErrorGrace, Timeout has passed, or ctx
// ends. The message is the driver's error, if any.
func (r *rescuer) wait(ctx context.Context, vs *snapv1.VolumeSnapshot) (waitResult, string) {
	log := zerolog.Ctx(ctx)
	deadline := time.NewTimer(r.o.Timeout)
	defer deadline.Stop()
	// Opening a watch has no timeout of its own: a server that accepts the
	// request and never answers would hold the wait (and the run, and its
	// Lease) past --snapshot-timeout. The watches live within the wait.
	wctx, wcancel := context.WithTimeout(ctx, r.o.Timeout)
	defer wcancel()
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	errMsg := ""
	cur := vs
	// evaluate returns true when cur decides the wait.
	evaluate := func() (bool, waitResult) {
		st := cur.Status
		if st != nil && st.ReadyToUse != nil && *st.ReadyToUse {
			return true, waitReady
		}
		if st != nil && st.Error != nil {
			if st.Error.Message != nil {
				errMsg = *st.Error.Message
			}
			if grace == nil {
				// The error may be older than this run (a failed snapshot
				// of an earlier one): count from its own time, on the
				// server's clock.
				left := r.o.ErrorGrace
				if st.Error.Time != nil {
					if now := r.c.Clock.Now(); !now.IsZero() {
						left -= now.Sub(st.Error.Time.Time)
					}
				}
				grace = time.NewTimer(max(left, 0))
			}
			return false, 0
		}
		if grace != nil {
			grace.Stop()
			grace = nil
		}
		return false, 0
	}
	graceC := func() <-chan time.Time {
		if grace == nil {
			return nil
		}
		return grace.C
	}
	for {
		if done, res := evaluate(); done {
			return res, errMsg
		}
		w, err := r.c.Snap.SnapshotV1().VolumeSnapshots(cur.Namespace).Watch(wctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", cur.Name).String(),
			ResourceVersion: cur.ResourceVersion,
		})
		if err != nil {
			log.Debug().Err(err).Msg("watch snapshot; retrying")
		}
		quiet := 30 * time.Second
		if w == nil {
			quiet = time.Second // the watch could not be opened: re-read soon
		}
		closed := false
		for !closed {
			var events <-chan watch.Event
			if w != nil {
				events = w.ResultChan()
			}
			select {
			case <-ctx.Done():
				if w != nil {
					w.Stop()
				}
				return waitInterrupted, errMsg
			case <-deadline.C:
				if w != nil {
					w.Stop()
				}
				return waitTimeout, errMsg
			case <-graceC():
				if w != nil {
					w.Stop()
				}
				return waitError, errMsg
			case ev, ok := <-events:
				if !ok {
					closed = true
					break
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					if s, ok := ev.Object.(*snapv1.VolumeSnapshot); ok {
						cur = s
						if done, res := evaluate(); done {
							w.Stop()
							return res, errMsg
						}
					}
				case watch.Deleted:
					w.Stop()
					return waitError, "the snapshot was deleted while waiting for it"
				case watch.Error:
					closed = true
				}
			case <-time.After(quiet):
				// A watch that went quiet is re-established below, after a
				// fresh read: a lost event never stalls the wait.
				closed = true
			}
		}
		if w != nil {
			w.Stop()
		}
		// Re-read before watching again (the resourceVersion may be too old).
		var fresh *snapv1.VolumeSnapshot
		err = r.o.Retry.Do(ctx, "get VolumeSnapshot "+cur.Namespace+"/"+cur.Name, func(ctx context.Context) error {
			var err error
			fresh, err = r.c.Snap.SnapshotV1().VolumeSnapshots(cur.Namespace).Get(ctx, cur.Name, metav1.GetOptions{})
			return err
		})
		switch {
		case apierrors.IsNotFound(err):
			return waitError, "the snapshot was deleted while waiting for it"
		case err != nil && ctx.Err() != nil:
			return waitInterrupted, errMsg
		case err != nil:
			log.Debug().Err(err).Msg("re-read snapshot")
			select {
			case <-ctx.Done():
				return waitInterrupted, errMsg
			case <-deadline.C:
				return waitTimeout, errMsg
			case <-time.After(time.Second):
			}
		default:
			cur = fresh
		}
	}
}
