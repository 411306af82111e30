package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// errLeaseLost cancels a run whose lease was lost: taken over by another
// run, or not renewed within its renew deadline (SPEC §7). The context's
// cause wraps it with the lease's own account of why.
var errLeaseLost = errors.New("the run's lease was lost; stopped acting")

// lock takes the run's Lease for a mutating command. The returned context
// is cancelled if the lease is lost; release must be called (it uses its own
// deadline, so it also works after SIGTERM). A live lease of another run is
// exit code 5, naming the holder.
func (sess *session) lock(ctx context.Context) (context.Context, func(), error) {
	// Bad input is refused before the first write, and the lease is one.
	if err := rescue.ValidateClass(ctx, sess.clients, rescue.Options{Class: sess.cfg.SnapshotClass, Retry: sess.retry}); err != nil {
		return nil, nil, exitcode.New(exitcode.Usage, err)
	}
	l, err := lock.Acquire(ctx, sess.clients, sess.cfg.LockNamespace, sess.cfg.LockDuration, sess.retry)
	if err != nil {
		if lock.IsHeld(err) {
			return nil, nil, exitcode.New(exitcode.LockHeld, err)
		}
		return nil, nil, fmt.Errorf("acquire lease: %w", err)
	}
	log := zerolog.Ctx(ctx)
	log.Debug().Str("holder", l.Holder()).Str("namespace", sess.cfg.LockNamespace).Msg("lease acquired")
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-l.Lost():
			// No new create or delete from here: every call of the run
			// takes this context.
			cancel(fmt.Errorf("%w: %w", errLeaseLost, l.Err()))
		case <-ctx.Done():
		}
	}()
	release := func() {
		cancel(nil)
		if err := l.Release(); err != nil {
			log.Warn().Err(err).Msg("release lease")
		} else {
			log.Debug().Msg("lease released")
		}
	}
	return ctx, release, nil
}

// leaseErr returns the lost-lease error when that is why ctx ended.
func leaseErr(ctx context.Context) error {
	if cause := context.Cause(ctx); errors.Is(cause, errLeaseLost) {
		return exitcode.New(exitcode.Runtime, cause)
	}
	return nil
}

// isTerminal reports whether r is an interactive terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// confirmer returns the prompt reap uses before deleting, or nil with
// --yes. Without a terminal and without --yes, deleting is refused up front
// (exit 2) before anything is written.
func confirmer(s Streams, yes, dryRun bool, command string) (func(int) (bool, error), error) {
	if yes || dryRun {
		return nil, nil
	}
	if !isTerminal(s.In) {
		return nil, exitcode.New(exitcode.Usage, fmt.Errorf("%s deletes claims: without a terminal to confirm on, pass --yes (or --dry-run); nothing was changed", command))
	}
	return func(n int) (bool, error) {
		fmt.Fprintf(s.ErrOut, "Delete %d rescued claim(s)? Type yes to confirm: ", n)
		line, err := bufio.NewReader(s.In).ReadString('\n')
		if err != nil && line == "" {
			return false, nil
		}
		return strings.TrimSpace(strings.ToLower(line)) == "yes", nil
	}, nil
}
