package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

func newSnapshotCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "snapshot",
		Short: "Scan, then rescue every Orphaned claim into a VolumeSnapshot",
		Long: `snapshot scans (and marks), then creates a VolumeSnapshot of every Orphaned claim
(and of Superseded ones under --superseded=archive), waits until each is
intact (ready, no error, bound to its content; bounded by --snapshot-timeout),
and reports. Just before each create the claim is re-checked on a fresh read of
its namespace: a claim used again, or superseded since the scan, is skipped.
A snapshot whose status.error persists for --snapshot-error-grace is deleted and
recreated, at most --snapshot-attempts times; then it is deleted, and the claim
records the failed attempts and when the next run may try again
(--snapshot-retry-backoff, doubled per failed run, at most 24h). Superseded
claims never get an ordinary snapshot: it could be restored over the user's
newer work. --dry-run creates nothing.`,
		Example: `  janitor snapshot -n workspaces -l app=ide --workspace-label workspace-id
  janitor snapshot -A -l app=ide --superseded archive --snapshot-class csi-retain`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, sess, release, err := begin(cmd, s, "snapshot", writes, nil)
			defer release()
			if err != nil {
				return err
			}
			cfg := sess.cfg
			r := sess.newReport("snapshot", cfg.DryRun)
			res, err := sess.snapshot(ctx, r, s.ErrOut)
			if err != nil && res == nil {
				return sess.failed(ctx, "snapshot", err)
			}
			return sess.finish(ctx, s.Out, r, err)
		},
	}
}

// snapshot is the scan-then-rescue step shared by snapshot, run and guard
// --rescue. It fills r and returns the scan result; the error is the
// command's (exit 4 for failed rescues).
func (sess *session) snapshot(ctx context.Context, r *report.Report, progressOut io.Writer) (*janitor.ScanResult, error) {
	cfg := sess.cfg
	ropts := rescue.Options{Class: cfg.SnapshotClass, Superseded: cfg.Superseded, Policy: sess.policy(),
		WorkspaceLabel: cfg.WorkspaceLabel, Selector: sess.scope.Selector,
		Timeout: cfg.SnapshotTimeout, ErrorGrace: cfg.SnapshotErrorGrace, Attempts: cfg.SnapshotAttempts,
		RetryBackoff: cfg.SnapshotRetryBackoff, Concurrency: cfg.Concurrency, DryRun: cfg.DryRun, Retry: sess.retry}
	// An unknown class is bad input: refused before anything is written.
	if err := rescue.ValidateClass(ctx, sess.clients, ropts); err != nil {
		return nil, exitcode.New(exitcode.Usage, err)
	}
	res, err := sess.scan(ctx, cfg.DryRun)
	if err != nil {
		return nil, err
	}
	r.AddDecisions(res.Decisions)
	addMarks(r, res)
	targets := rescue.Targets(res.Decisions, cfg.Superseded)
	if len(targets) == 0 {
		return res, failuresError("marks", res.Marks.Errors)
	}
	prog := newProgress(progressOut, zerolog.Ctx(ctx))
	ropts.Progress = prog.update
	outcomes, err := rescue.Rescue(ctx, sess.clients, res.Inventory, res.Decisions, targets, ropts)
	prog.done()
	if err != nil {
		return res, err
	}
	var failed []error
	for _, o := range outcomes {
		d := &res.Decisions[o.Index]
		e := r.Entry(d.Claim.Namespace, d.Claim.Name)
		if e == nil {
			continue
		}
		e.Action = o.Action
		if o.State != d.State && o.Action != rescue.ActionWould {
			e.State = string(o.State)
		}
		if o.Message != "" {
			e.Reason = o.Message
		}
		if o.Snapshot != "" {
			e.Snapshot = &report.SnapshotRef{Name: o.Snapshot, ReadyToUse: o.Ready}
			if o.Failed() {
				e.Snapshot.Error = o.Message
			}
		}
		// A claim skipped by rule (used again, superseded, next attempt
		// not due) is reported, not a failure of the run.
		if o.Failed() {
			failed = append(failed, fmt.Errorf("%s/%s: %s", d.Claim.Namespace, d.Claim.Name, o.Message))
		}
	}
	return res, failuresError("rescues", append(failed, res.Marks.Errors...))
}

// progress shows the rescue's counters: a live line on a terminal, a log
// line every 10 s otherwise.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	log      *zerolog.Logger
	last     rescue.Counts
	lastLog  time.Time
	stop     chan struct{}
	stopOnce sync.Once
}

func newProgress(w io.Writer, log *zerolog.Logger) *progress {
	p := &progress{w: w, log: log, stop: make(chan struct{}), lastLog: time.Now()}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		p.tty = true
	}
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.render(false)
			}
		}
	}()
	return p
}

func (p *progress) update(c rescue.Counts) {
	p.mu.Lock()
	p.last = c
	p.mu.Unlock()
	p.render(false)
}

func (p *progress) render(final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.last
	if c.Total == 0 {
		return
	}
	el := time.Since(c.Started).Truncate(time.Second)
	if p.tty {
		fmt.Fprintf(p.w, "\rrescue: %d/%d created, %d ready, %d failed, %d pending, %s elapsed ", c.Created, c.Total, c.Ready, c.Failed, c.Pending, el)
		if final {
			fmt.Fprintln(p.w)
		}
		return
	}
	if final || time.Since(p.lastLog) >= 10*time.Second {
		p.lastLog = time.Now()
		p.log.Info().Int("total", c.Total).Int("created", c.Created).Int("ready", c.Ready).Int("failed", c.Failed).
			Int("pending", c.Pending).Dur("elapsed", el).Msg("rescue progress")
	}
}

func (p *progress) done() {
	p.stopOnce.Do(func() { close(p.stop) })
	p.render(true)
}
