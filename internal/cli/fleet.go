package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/fleet"
	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
	"github.com/pvc-janitor/pvc-janitor/internal/notify"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

// This file runs a command over a fleet: with several contexts (repeated
// --context, or --all-contexts), the command's body runs once per cluster,
// each on a session of its own (clients, rate limiter, server clock, Lease,
// retries: connect builds them all from the context), at most
// --cluster-concurrency at once. Each cluster's report is kept, not
// printed; the reports merge into one (report.Merge), printed once, and the
// exit code is the most serious of the clusters' (fleet.ExitCode). Nothing
// a cluster's run decides depends on another cluster: the blast radius,
// the lease and the retries are each cluster's own.

// command runs body on the session of each cluster the configuration
// names: one session, as before fleets, with none or one context; one per
// cluster otherwise. check (when set) vets the configuration before
// anything is read.
func command(cmd *cobra.Command, s Streams, name string, check func(*config.Config) error, body func(*session) error) error {
	started := time.Now()
	cfg, err := load(cmd, name, s)
	if err != nil {
		return err
	}
	if check != nil {
		if err := check(cfg); err != nil {
			return err
		}
	}
	var contexts []string
	if cfg.Fleet() {
		if contexts, err = fleet.Contexts(cfg.Kubeconfig, cfg.Contexts, cfg.AllContexts); err != nil {
			return err
		}
	}
	base := session{name: name, s: s, cfg: cfg, started: started, release: func() {}}
	if len(contexts) <= 1 {
		if len(contexts) == 1 {
			cfg.Context = contexts[0]
		}
		sess := base
		sess.ctx = newLogger(cfg, s.ErrOut).WithContext(cmd.Context())
		if err := sess.connect(); err != nil {
			return err
		}
		defer sess.close()
		return body(&sess)
	}
	return runFleet(cmd.Context(), &base, contexts, body)
}

// clusterRun is what one cluster's session left: its report (nil when it
// failed before it had one) and its explanation (explain).
type clusterRun struct {
	context   string
	report    *report.Report
	explained *report.Explanation
}

// runFleet runs body on one session per context and prints one report.
// base is the session every cluster's starts from (its configuration, the
// command's streams and start).
func runFleet(ctx context.Context, base *session, contexts []string, body func(*session) error) error {
	name, s, cfg, started := base.name, base.s, base.cfg, base.started
	// Several clusters log (and show progress) at once on one stream.
	s.ErrOut = &syncWriter{w: s.ErrOut}
	log := newLogger(cfg, s.ErrOut)
	ctx = log.WithContext(ctx)
	results := fleet.Run(ctx, contexts, cfg.ClusterConcurrency, func(ctx context.Context, context string) (*clusterRun, error) {
		c := *cfg
		c.Context, c.Contexts, c.AllContexts = context, []string{context}, false
		clog := log.With().Str("cluster", context).Logger()
		out := &clusterRun{context: context}
		sess := *base
		sess.ctx, sess.s, sess.cfg, sess.fleet = clog.WithContext(ctx), s, &c, out
		if err := sess.connect(); err != nil {
			return out, err
		}
		defer sess.close()
		err := body(&sess)
		return out, err
	})
	parts := make([]report.Part, len(results))
	codes := make([]int, len(results))
	var failed []string
	for i, res := range results {
		parts[i] = report.Part{Context: res.Context, Err: res.Err, Code: exitcode.Code(res.Err)}
		if res.Value != nil {
			parts[i].Report = res.Value.report
		}
		codes[i] = parts[i].Code
		if res.Err != nil {
			failed = append(failed, res.Context+": "+res.Err.Error())
			zerolog.Ctx(ctx).Error().Str("cluster", res.Context).Int("exit_code", codes[i]).Err(res.Err).Msg("cluster done")
		}
	}
	code := fleet.ExitCode(codes)
	var err error
	if code != exitcode.OK {
		err = exitcode.New(code, fmt.Errorf("%d of %d clusters did not end well (exit %d, the most serious): %s",
			len(failed), len(results), code, strings.Join(failed, "; ")))
	}
	if name == config.CommandExplain {
		return writeExplanations(s.Out, outputOf(cfg), results)
	}
	r := report.Merge(name, cfg.DryRun, started, cfg.PriceTable, parts)
	r.MarksOnly = cfg.MarksOnly // docs/spec.md#marks-only
	r.Finish(time.Now())
	if werr := report.WriteOutput(s.Out, r, outputOf(cfg)); werr != nil && err == nil {
		err = fmt.Errorf("write report: %w", werr)
	}
	publishFleet(ctx, cfg, r, parts, err)
	return err
}

// publishFleet publishes a fleet's report (publishRuns): the metrics of
// every cluster, and one notification when any cluster acted or failed.
func publishFleet(ctx context.Context, cfg *config.Config, r *report.Report, parts []report.Part, err error) {
	runs := make([]metrics.Run, 0, len(parts))
	for _, p := range parts {
		pr := p.Report
		if pr == nil {
			// The cluster failed before it had a report: its metrics say
			// so (run_success 0), so that alerting sees it.
			pr = report.New(r.Command, cfg.DryRun, p.Context, r.StartedAt)
			pr.Finish(time.Now())
		}
		run := metrics.FromReport(pr, p.Code == exitcode.OK)
		run.Cluster = p.Context
		runs = append(runs, run)
	}
	publishRuns(ctx, cfg, r, runs, err, notify.Due(r, err))
}

// syncWriter serialises writes from several goroutines: each Write (one
// log event) lands whole.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
