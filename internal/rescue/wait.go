package rescue

import (
	"context"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// waitResult is how a wait for a snapshot ends.
type waitResult int

const (
	// waitPending: not decided yet, keep waiting.
	waitPending waitResult = iota
	// waitReady: the snapshot is intact (docs/spec.md#evidence): a rescue.
	waitReady
	// waitError: its status.error outlasted --snapshot-error-grace.
	waitError
	// waitTimeout: not intact when --snapshot-timeout ended (only slow,
	// or an error still within its grace).
	waitTimeout
	// waitDeleting: the snapshot is being deleted, or is gone.
	waitDeleting
	// waitInterrupted: the run's context ended.
	waitInterrupted
)

func (w waitResult) String() string {
	return [...]string{"pending", "ready", "error", "timeout", "deleting", "interrupted"}[w]
}

// observation is what one look at a snapshot found.
type observation struct {
	// Snapshot is nil when it was not found.
	Snapshot *inventory.Snapshot
	// Content is its bound VolumeSnapshotContent, nil when it does not
	// exist or the snapshot is bound to none yet.
	Content *inventory.Content
	// ReadErr is set when the snapshot or its content could not be read:
	// the look found nothing to decide on.
	ReadErr error
}

// waitOptions are the bounds of a wait.
type waitOptions struct {
	Timeout    time.Duration // --snapshot-timeout
	ErrorGrace time.Duration // --snapshot-error-grace
}

// waitState is what the wait carries from one decision to the next, on the
// API server's clock (the one status.error's time is on).
type waitState struct {
	// Started is when the wait began: it ends at Started + Timeout.
	Started time.Time
	// ErrorSeen is since when the current status.error has been seen;
	// zero when none was seen at the last decision.
	ErrorSeen time.Time
}

// verdict is decide's answer.
type verdict struct {
	Result waitResult
	// Message is the driver's error, or why a ready snapshot is not intact,
	// or why the snapshot is going.
	Message string
	// ErrorSeen is since when the current error has been seen (its own
	// time when it carries one): the next decision's waitState.ErrorSeen.
	// Zero when there is no error.
	ErrorSeen time.Time
	// Next is when to decide again if nothing changes: the end of the
	// error's grace or of the wait, whichever comes first.
	Next time.Duration
	// Cut is the ready snapshot's cut time (waitReady only).
	Cut time.Time
	// Source is the volume the ready snapshot was cut from, its content's
	// spec.source.volumeHandle ("" when it names none; waitReady only).
	Source string
}

// readRetry is how soon a snapshot that could not be read is read again.
const readRetry = time.Second

// notIntactPoll is how often a ready snapshot whose content is not (yet)
// intact is looked at again: a content changes without its snapshot
// changing, so no snapshot event announces it.
const notIntactPoll = 2 * time.Second

// decide is the wait's rule (docs/spec.md#rescue), on what one look at the snapshot
// found, what the wait carries, and now (the API server's clock):
//   - nothing could be read: it decides nothing (waitPending, read again
//     after readRetry, the error's count kept), except that the wait still
//     ends on time (waitTimeout);
//   - gone or being deleted: waitDeleting (never reported as ready);
//   - intact: waitReady; ready but not intact is at most "not ready yet";
//   - a status.error seen for ErrorGrace (counted from the error's own time
//     when it has one, so an error older than this run counts whole):
//     waitError; an error that clears resets the count;
//   - Timeout after it started: waitTimeout, with the error if one is pending;
//   - otherwise waitPending.
func decide(ob observation, st waitState, now time.Time, o waitOptions) verdict {
	if ob.ReadErr != nil {
		if !now.Before(st.Started.Add(o.Timeout)) {
			return verdict{Result: waitTimeout, Message: "could not read the snapshot: " + ob.ReadErr.Error()}
		}
		return verdict{Result: waitPending, ErrorSeen: st.ErrorSeen, Next: readRetry}
	}
	s := ob.Snapshot
	if s == nil {
		return verdict{Result: waitDeleting, Message: "the snapshot was deleted while waiting for it"}
	}
	if s.DeletionTimestamp != nil {
		return verdict{Result: waitDeleting, Message: "the snapshot is being deleted"}
	}
	ok, why := intact(s, ob.Content)
	if ok {
		return verdict{Result: waitReady, Cut: classify.CutTime(s), Source: ob.Content.SourceVolume}
	}
	var v verdict
	deadline := st.Started.Add(o.Timeout)
	next := deadline
	if e := s.Error; e != nil {
		seen := st.ErrorSeen
		if seen.IsZero() {
			seen = now
			if !e.Time.IsZero() && e.Time.Before(now) {
				seen = e.Time
			}
		}
		v.ErrorSeen = seen
		v.Message = e.Message
		if v.Message == "" {
			v.Message = "status.error without a message"
		}
		graceEnd := seen.Add(o.ErrorGrace)
		if !now.Before(graceEnd) {
			v.Result = waitError
			return v
		}
		next = minTime(next, graceEnd)
	} else if s.ReadyToUse {
		v.Message = "ready but not intact: " + why
		next = minTime(next, now.Add(notIntactPoll))
	}
	if !now.Before(deadline) {
		v.Result = waitTimeout
		return v
	}
	v.Next = next.Sub(now)
	return v
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// wait follows one snapshot (snapshotWatch: the run's watch, no tight
// polling) and asks decide after every change, until it answers or ctx
// ends. A ready snapshot is looked at with its content: only an intact one
// is a rescue. readAt is when the request that read (or created) vs was
// sent.
func (r *rescuer) wait(ctx context.Context, vs *snapv1.VolumeSnapshot, readAt time.Time) verdict {
	o := waitOptions{Timeout: r.o.Timeout, ErrorGrace: r.o.ErrorGrace}
	// The watch is the run's (snapshotHub): opened, and ended, apart from
	// any one wait, so that a watch request that hangs holds no wait past
	// --snapshot-timeout.
	w := r.watchSnapshot(vs, readAt)
	defer w.stop()
	st := waitState{Started: r.now()}
	// Not retry.Poll: each turn waits for the watch's next event (await),
	// and the deadline is decide's, on the API server's clock.
	for ctx.Err() == nil {
		ob := w.observe(ctx)
		if ob.ReadErr != nil && ctx.Err() != nil {
			break
		}
		v := decide(ob, st, r.now(), o)
		if v.Result != waitPending {
			return v
		}
		if ob.ReadErr != nil {
			zerolog.Ctx(ctx).Debug().Err(ob.ReadErr).Msg("read snapshot; retrying")
		}
		st.ErrorSeen = v.ErrorSeen
		if !w.await(ctx, v.Next) {
			break
		}
	}
	return verdict{Result: waitInterrupted, Message: "interrupted while waiting"}
}
