// Package lock holds the janitor's coordination.k8s.io/v1 Lease (SPEC §7)
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
	retry    kube.RetryPolicy

	mu     sync.Mutex
	lease  *coordv1.Lease
	stop   chan struct{}
	done   chan struct{}
	lost   chan struct{}
	closed bool
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
func Acquire(ctx context.Context, c *kube.Clients, ns string, duration time.Duration, retry kube.RetryPolicy) (*Lease, error) {
	l := &Lease{c: c, ns: ns, identity: Identity(), duration: duration, retry: retry,
		stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	leases := c.Kube.CoordinationV1().Leases(ns)
	for attempt := 0; attempt < 5; attempt++ {
		var cur *coordv1.Lease
		err := retry.Do(ctx, "get lease "+ns+"/"+Name, func(ctx context.Context) error {
			var err error
			cur, err = leases.Get(ctx, Name, metav1.GetOptions{})
			return err
		})
		now := l.now() // after the Get: its Date header set the server clock
		switch {
		case apierrors.IsNotFound(err):
			fresh := l.spec(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name}}, now, true)
			var got *coordv1.Lease
			err := retry.Do(ctx, "create lease", func(ctx context.Context) error {
				var err error
				got, err = leases.Create(ctx, fresh, metav1.CreateOptions{})
				return err
			})
			if apierrors.IsAlreadyExists(err) {
				continue // somebody was faster: look again
			}
			if err != nil {
				return nil, err
			}
			l.lease = got
		case err != nil:
			return nil, err
		case str(cur.Spec.HolderIdentity) == l.identity:
			// Our own create or take-over, applied by the server but its
			// response lost (the retry then met AlreadyExists or a
			// Conflict): the lease is ours.
			l.lease = cur
		default:
			if held := l.heldByOther(cur, now); held != nil {
				return nil, held
			}
			next := l.spec(cur.DeepCopy(), now, true)
			if next.Spec.LeaseTransitions == nil {
				next.Spec.LeaseTransitions = new(int32)
			}
			*next.Spec.LeaseTransitions++
			var got *coordv1.Lease
			err := retry.Do(ctx, "take over lease", func(ctx context.Context) error {
				var err error
				got, err = leases.Update(ctx, next, metav1.UpdateOptions{})
				return err
			})
			if apierrors.IsConflict(err) {
				continue // changed under us: look again
			}
			if err != nil {
				return nil, err
			}
			zerolog.Ctx(ctx).Info().Str("previous_holder", str(cur.Spec.HolderIdentity)).Msg("took over an expired lease")
			l.lease = got
		}
		go l.renew(zerolog.Ctx(ctx))
		return l, nil
	}
	return nil, fmt.Errorf("lease %s/%s: too many concurrent changes", ns, Name)
}

func (l *Lease) now() time.Time {
	if t := l.c.Clock.Now(); !t.IsZero() {
		return t
	}
	// Before the first response the server's clock is unknown; the Get
	// that follows gives it, and judging expiry waits for that.
	return time.Now()
}

func (l *Lease) spec(le *coordv1.Lease, now time.Time, acquire bool) *coordv1.Lease {
	secs := int32(l.duration / time.Second)
	if secs < 1 {
		secs = 1
	}
	id := l.identity
	t := metav1.NewMicroTime(now)
	le.Spec.HolderIdentity = &id
	le.Spec.LeaseDurationSeconds = &secs
	le.Spec.RenewTime = &t
	if acquire {
		le.Spec.AcquireTime = &t
	}
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

func (l *Lease) renew(log *zerolog.Logger) {
	defer close(l.done)
	t := time.NewTicker(max(l.duration/3, 200*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(l.duration/3, time.Second))
		l.mu.Lock()
		next := l.spec(l.lease.DeepCopy(), l.now(), false)
		got, err := l.c.Kube.CoordinationV1().Leases(l.ns).Update(ctx, next, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			// A renewal applied by the server whose response was lost moves
			// the resourceVersion under us: the lease is still ours if we
			// hold it. Lost only when a fresh read shows another holder.
			cur, gerr := l.c.Kube.CoordinationV1().Leases(l.ns).Get(ctx, Name, metav1.GetOptions{})
			switch {
			case gerr == nil && str(cur.Spec.HolderIdentity) == l.identity:
				got, err = cur, nil
			case gerr != nil && !apierrors.IsNotFound(gerr):
				err = gerr // cannot tell: retried at the next tick
			}
		}
		if err == nil {
			l.lease = got
		}
		l.mu.Unlock()
		cancel()
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.Error().Err(err).Msg("lease lost: another run took it over")
			close(l.lost)
			return
		}
		if err != nil {
			log.Warn().Err(err).Msg("renew lease")
		}
	}
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
	close(l.stop)
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
