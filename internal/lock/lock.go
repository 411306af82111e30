// Package lock holds the janitor's coordination.k8s.io/v1 Lease (docs/spec.md#runs)
// for the length of a mutating run: two janitors never act on the same
// cluster at once. Expiry is judged on the API server's clock, so a skewed
// host can neither steal a live lease nor keep a dead one.
package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// Name is the Lease's name.
const Name = "pvc-janitor"

// HeldError says another live run holds the lease.
type HeldError struct {
	Holder    string
	Namespace string
	RenewTime time.Time
	Expires   time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("lease %s/%s is held by %q (renewed %s, expires %s): another janitor run is active",
		e.Namespace, Name, e.Holder, e.RenewTime.UTC().Format(time.RFC3339), e.Expires.UTC().Format(time.RFC3339))
}

// Lease is a held lease. Release it when the run ends.
type Lease struct {
	c        *kube.Clients
	ns       string
	identity string
	duration time.Duration

	mu    sync.Mutex
	lease *coordv1.Lease
	// stop ends the renewal's context (Release): the renewal's waits are
	// bound to it, not to the caller's context, so that a run cancelled
	// by SIGTERM keeps its lease until it releases it.
	stop   context.CancelFunc
	done   chan struct{}
	lost   chan struct{}
	closed bool
	// lastOK is the local (monotonic) time the last successful write of
	// the lease was sent: the server stamped its renewTime no earlier, so
	// others judge its expiry from no earlier than this.
	lastOK time.Time
	// okMu guards lastOK's writes and Check's reads (the renewal writes
	// it; every write of the run checks it).
	okMu sync.Mutex
	// err says why the lease was lost, once lost is closed.
	err error
}

// RenewDeadline is how long after its last successful renewal a run stops
// acting: two thirds of the lease's duration (docs/spec.md#runs), as client-go's
// leader election does with its renew deadline. The last third is the
// margin for the clocks: another run may take the lease over once the
// whole duration has passed on the server's clock.
func RenewDeadline(duration time.Duration) time.Duration { return duration * 2 / 3 }

// Expired reports whether a lease last renewed successfully at lastRenew (a
// renewal sent then and accepted) must count as lost at now: the run can no
// longer be sure it is alone.
func Expired(lastRenew, now time.Time, duration time.Duration) bool {
	return !now.Before(lastRenew.Add(RenewDeadline(duration)))
}

// renewTimeout bounds one renewal call: a quarter of the duration, so that
// a stalled call leaves room for another before the deadline, and never
// past the deadline itself.
func renewTimeout(duration time.Duration) time.Duration { return max(duration/4, 50*time.Millisecond) }

// retryPeriod is the pause after a failed renewal before the next try.
func retryPeriod(duration time.Duration) time.Duration {
	return max(duration/15, 50*time.Millisecond)
}

// Identity names this process in the lease: host, pid and a random suffix
// (two runs on one host are still told apart).
func Identity() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Acquire takes the lease in ns, or takes over an expired one. A live lease
// of another holder is a *HeldError. The lease is renewed every third of
// its duration until Release; if it is lost (taken over after we failed to
// renew), Lost() is closed and the caller must stop.
func Acquire(ctx context.Context, c *kube.Clients, ns string, duration time.Duration) (*Lease, error) {
	l := &Lease{c: c, ns: ns, identity: Identity(), duration: duration,
		done: make(chan struct{}), lost: make(chan struct{})}
	leases := c.Kube.CoordinationV1().Leases(ns)
	for attempt := 0; attempt < 5; attempt++ {
		var cur *coordv1.Lease
		err := c.Retry.Do(ctx, "get lease "+ns+"/"+Name, func(ctx context.Context) error {
			var err error
			cur, err = leases.Get(ctx, Name, metav1.GetOptions{})
			return err
		})
		now := l.now() // after the Get: its Date header set the server clock
		switch {
		case apierrors.IsNotFound(err):
			again, err := l.create(ctx, now)
			if err != nil {
				return nil, err
			}
			if again {
				continue // somebody was faster: look again
			}
		case err != nil:
			return nil, err
		case str(cur.Spec.HolderIdentity) == l.identity:
			// Our own create or take-over, applied by the server but its
			// response lost (the retry then met AlreadyExists or a
			// Conflict): the lease is ours, renewed no later than it was
			// written: judged from now on, the deadline only comes sooner
			// than on the server.
			l.lease = cur
			if l.lastOK.IsZero() {
				l.setOK(time.Now())
			}
		default:
			if held := l.heldByOther(cur, now); held != nil {
				return nil, held
			}
			again, err := l.takeOver(ctx, cur, now)
			if err != nil {
				return nil, err
			}
			if again {
				continue // changed under us: look again
			}
		}
		stopped, stop := context.WithCancel(context.WithoutCancel(ctx))
		l.stop = stop
		go l.renew(stopped, zerolog.Ctx(ctx))
		return l, nil
	}
	return nil, fmt.Errorf("lease %s/%s: too many concurrent changes", ns, Name)
}

// create writes a new lease held by l. again: another run created one
// first; look again.
func (l *Lease) create(ctx context.Context, now time.Time) (again bool, err error) {
	fresh := l.acquired(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: Name}}, now)
	var got *coordv1.Lease
	err = l.c.Retry.Do(ctx, "create lease", func(ctx context.Context) error {
		var err error
		l.setOK(time.Now())
		got, err = l.c.Kube.CoordinationV1().Leases(l.ns).Create(ctx, fresh, metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	l.lease = got
	return false, nil
}

// takeOver writes l as the holder of cur, an expired lease of another
// run, at cur's resourceVersion. again: it changed since it was read; look
// again.
func (l *Lease) takeOver(ctx context.Context, cur *coordv1.Lease, now time.Time) (again bool, err error) {
	next := l.acquired(cur.DeepCopy(), now)
	if next.Spec.LeaseTransitions == nil {
		next.Spec.LeaseTransitions = new(int32)
	}
	*next.Spec.LeaseTransitions++
	var got *coordv1.Lease
	err = l.c.Retry.Do(ctx, "take over lease", func(ctx context.Context) error {
		var err error
		l.setOK(time.Now())
		got, err = l.c.Kube.CoordinationV1().Leases(l.ns).Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsConflict(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	zerolog.Ctx(ctx).Info().Str("previous_holder", str(cur.Spec.HolderIdentity)).Msg("took over an expired lease")
	l.lease = got
	return false, nil
}

func (l *Lease) now() time.Time {
	if t := l.c.Clock.Now(); !t.IsZero() {
		return t
	}
	// Before the first response the server's clock is unknown; the Get
	// that follows gives it, and judging expiry waits for that.
	return time.Now()
}

// acquired is le held by l from now: renewed, and acquired now.
func (l *Lease) acquired(le *coordv1.Lease, now time.Time) *coordv1.Lease {
	le = l.renewed(le, now)
	t := metav1.NewMicroTime(now)
	le.Spec.AcquireTime = &t
	return le
}

// renewed is le held by l and renewed now.
func (l *Lease) renewed(le *coordv1.Lease, now time.Time) *coordv1.Lease {
	secs := int32(l.duration / time.Second)
	if secs < 1 {
		secs = 1
	}
	id := l.identity
	t := metav1.NewMicroTime(now)
	le.Spec.HolderIdentity = &id
	le.Spec.LeaseDurationSeconds = &secs
	le.Spec.RenewTime = &t
	return le
}

// heldByOther returns a *HeldError when cur is a live lease of someone else.
func (l *Lease) heldByOther(cur *coordv1.Lease, now time.Time) *HeldError {
	holder := str(cur.Spec.HolderIdentity)
	if holder == "" || cur.Spec.RenewTime == nil || cur.Spec.LeaseDurationSeconds == nil {
		return nil // released
	}
	expires := cur.Spec.RenewTime.Add(time.Duration(*cur.Spec.LeaseDurationSeconds) * time.Second)
	if !now.Before(expires) {
		return nil
	}
	return &HeldError{Holder: holder, Namespace: l.ns, RenewTime: cur.Spec.RenewTime.Time, Expires: expires}
}

// renew keeps the lease until Release, every third of its duration, and
// retries a failed renewal every retryPeriod. Each call is bounded by
// renewTimeout and by the renew deadline, so that a stalled API server
// cannot keep the run believing it holds the lease: once the deadline
// passes without a successful renewal, or a renewal finds another holder,
// the lease is lost and Lost() is closed.
func (l *Lease) renew(stopped context.Context, log *zerolog.Logger) {
	defer close(l.done)
	wait := l.duration / 3
	var lastErr error
	for {
		deadline := l.lastOK.Add(RenewDeadline(l.duration))
		if !retry.Sleep(stopped, max(min(wait, time.Until(deadline)), 0)) {
			return
		}
		if Expired(l.lastOK, time.Now(), l.duration) {
			l.lose(log, fmt.Errorf("lease %s/%s not renewed for %s (two thirds of --lock-duration %s): last error: %v",
				l.ns, Name, RenewDeadline(l.duration), l.duration, lastErr))
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), earliest(sent.Add(renewTimeout(l.duration)), deadline))
		err := l.renewOnce(ctx)
		cancel()
		var taken *takenError
		switch {
		case errors.As(err, &taken):
			l.lose(log, err)
			return
		case err != nil:
			lastErr = err
			wait = retryPeriod(l.duration)
			log.Warn().Err(err).Msg("renew lease")
		default:
			l.setOK(sent)
			lastErr, wait = nil, l.duration/3
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// takenError says a renewal found the lease held by another run, or gone.
type takenError struct{ holder, ns string }

func (e *takenError) Error() string {
	if e.holder == "" {
		return fmt.Sprintf("lease %s/%s was deleted or released by someone else", e.ns, Name)
	}
	return fmt.Sprintf("lease %s/%s was taken over by %q", e.ns, Name, e.holder)
}

// renewOnce writes one renewal. A conflict is settled by a re-read: a
// renewal applied by the server whose response was lost moves the
// resourceVersion under us, and the lease is still ours if we hold it.
func (l *Lease) renewOnce(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	leases := l.c.Kube.CoordinationV1().Leases(l.ns)
	next := l.renewed(l.lease.DeepCopy(), l.now())
	got, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return &takenError{ns: l.ns}
	}
	if apierrors.IsConflict(err) {
		cur, gerr := leases.Get(ctx, Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return &takenError{ns: l.ns}
		case gerr != nil:
			return gerr // cannot tell: retried until the deadline
		case str(cur.Spec.HolderIdentity) != l.identity:
			return &takenError{holder: str(cur.Spec.HolderIdentity), ns: l.ns}
		}
		// Ours: renew on top of the version just read.
		next = l.renewed(cur.DeepCopy(), l.now())
		got, err = leases.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			return err // a conflict again is settled at the next try
		}
	}
	if err != nil {
		return err
	}
	l.lease = got
	return nil
}

func (l *Lease) lose(log *zerolog.Logger, err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	log.Error().Err(err).Msg("lease lost: stopping")
	close(l.lost)
}

// setOK records that a write of the lease sent at t succeeded.
func (l *Lease) setOK(t time.Time) {
	l.okMu.Lock()
	l.lastOK = t
	l.okMu.Unlock()
}

// Check says whether the run may still act: nil while the lease is held
// and its last successful write was sent less than RenewDeadline ago on
// the local monotonic clock. Every write of the run asks it right before
// it is sent (kube.WriteGuard), so that no write begins once the deadline
// has passed, however late the renewal notices (a process stopped past
// its deadline and let go on, docs/spec.md#run-lease).
func (l *Lease) Check() error {
	select {
	case <-l.lost:
		return l.Err()
	default:
	}
	l.okMu.Lock()
	last := l.lastOK
	l.okMu.Unlock()
	if Expired(last, time.Now(), l.duration) {
		return fmt.Errorf("lease %s/%s not renewed for %s (two thirds of --lock-duration %s)", l.ns, Name, RenewDeadline(l.duration), l.duration)
	}
	return nil
}

// Err says why the lease was lost; nil while it is held.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Lost is closed when the lease was lost; the run must stop acting.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Holder is this run's identity in the lease.
func (l *Lease) Holder() string { return l.identity }

// Release stops renewing and deletes the lease (only if it is still ours,
// by UID and resourceVersion). It uses its own short deadline so that a run
// cancelled by SIGTERM still releases.
func (l *Lease) Release() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.stop()
	<-l.done
	select {
	case <-l.lost:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uid, rv := l.lease.UID, l.lease.ResourceVersion
	err := l.c.Kube.CoordinationV1().Leases(l.ns).Delete(ctx, Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("release lease %s/%s: %w", l.ns, Name, err)
	}
	return nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// IsHeld reports whether err says the lease is held by another run.
func IsHeld(err error) bool {
	var h *HeldError
	return errors.As(err, &h)
}
