package janitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
)

// ErrLeaseLost is the cause of a context whose run lost its lease: taken
// over by another run, or not renewed within its renew deadline (docs/spec.md#runs).
// The cause wraps it with the lease's own account of why.
var ErrLeaseLost = errors.New("the run's lease was lost; stopped acting")

// LockOptions configure the run's Lease.
type LockOptions struct {
	Namespace string
	Duration  time.Duration
}

// Lock takes the run's Lease for a mutating pipeline. The returned context
// is cancelled with ErrLeaseLost if the lease is lost, so that no new
// create or delete starts; release must be called (it uses its own
// deadline, so it also works after SIGTERM). A live lease of another run
// is an error that lock.IsHeld recognises, naming the holder.
func Lock(ctx context.Context, c *kube.Clients, o LockOptions) (context.Context, func(), error) {
	l, err := lock.Acquire(ctx, c, o.Namespace, o.Duration)
	if err != nil {
		if lock.IsHeld(err) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("acquire lease: %w", err)
	}
	log := zerolog.Ctx(ctx)
	log.Debug().Str("holder", l.Holder()).Str("namespace", o.Namespace).Msg("lease acquired")
	// Every write of the run from here is checked against the Lease right
	// before it is sent: the watch below cancels the run, but a process
	// stopped past its deadline runs on for a moment before it notices.
	if c.Guard != nil {
		c.Guard.Set(l.Check)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Lost():
			// No new create or delete from here: every call of the run
			// takes this context.
			cancel(fmt.Errorf("%w: %w", ErrLeaseLost, l.Err()))
		case <-ctx.Done():
		}
	}()
	release := func() {
		cancel(nil)
		if c.Guard != nil {
			c.Guard.Set(func() error { return errors.New("the run's lease was released") })
		}
		if err := l.Release(); err != nil {
			log.Warn().Err(err).Msg("release lease")
		} else {
			log.Debug().Msg("lease released")
		}
	}
	return ctx, release, nil
}

// LeaseLost returns the lost-lease cause when that is why ctx ended, else nil.
func LeaseLost(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	return nil
}
