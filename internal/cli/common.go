package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
	"github.com/pvc-janitor/pvc-janitor/internal/notify"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/version"
)

// newLogger builds the one logger of a run from the flags: JSON off a
// terminal, console on one (auto), always on stderr.
func newLogger(cfg *config.Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	f, isFile := w.(*os.File)
	tty := isFile && isatty.IsTerminal(f.Fd())
	format := cfg.LogFormat
	if format == "auto" {
		format = "json"
		if tty {
			format = "console"
		}
	}
	if format == "console" {
		// Colours only on a terminal: escape codes in a log file are noise.
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !tty}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// session is what every command needs once its flags are resolved.
type session struct {
	cfg     *config.Config
	clients *kube.Clients
	scope   kube.Scope
	retry   kube.RetryPolicy
	started time.Time
}

// begin is the prologue of every command: configuration, the logger in the
// context, the clients and, when mutating reports true, the run's lease.
// check, when set, vets the configuration before anything is read or
// written. The release func is never nil.
func begin(cmd *cobra.Command, s Streams, name string, mutating func(*config.Config) bool, check func(*config.Config) error) (context.Context, *session, func(), error) {
	noop := func() {}
	started := time.Now()
	cfg, err := load(cmd, name, s)
	if err != nil {
		return nil, nil, noop, err
	}
	if cfg.Pushgateway != "" {
		if err := metrics.ValidatePushgatewayURL(cfg.Pushgateway); err != nil {
			return nil, nil, noop, exitcode.New(exitcode.Usage, fmt.Errorf("--pushgateway: %w", err))
		}
	}
	if cfg.NotifyWebhook != "" {
		if err := notify.Validate(cfg.NotifyWebhook); err != nil {
			return nil, nil, noop, exitcode.New(exitcode.Usage, fmt.Errorf("--notify-webhook: %w", err))
		}
	}
	if check != nil {
		if err := check(cfg); err != nil {
			return nil, nil, noop, err
		}
	}
	log := newLogger(cfg, s.ErrOut)
	ctx := log.WithContext(cmd.Context())
	sess, err := connect(ctx, cfg)
	if err != nil {
		return nil, nil, noop, err
	}
	sess.started = started
	if !mutating(cfg) {
		return ctx, sess, noop, nil
	}
	ctx, release, err := sess.lock(ctx)
	if err != nil {
		return nil, nil, noop, err
	}
	return ctx, sess, release, nil
}

// writes is the mutating predicate of commands that write unless --dry-run.
func writes(cfg *config.Config) bool { return !cfg.DryRun }

// connect builds the clients and the scope. A kubeconfig that cannot be
// loaded is a configuration error (exit 2), like kubectl's.
func connect(ctx context.Context, cfg *config.Config) (*session, error) {
	rc, cluster, ns, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: cfg.Kubeconfig, Context: cfg.Context})
	if err != nil {
		return nil, exitcode.New(exitcode.Usage, err)
	}
	c, err := kube.NewClients(rc, kube.ClientOptions{QPS: cfg.QPS, Burst: cfg.Burst,
		UserAgent: userAgent()})
	if err != nil {
		return nil, exitcode.New(exitcode.Usage, err)
	}
	c.Cluster, c.Namespace = cluster, ns
	s := &session{cfg: cfg, clients: c}
	s.retry = kube.RetryPolicy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, MaxElapsed: cfg.APITimeout}
	exclude := map[string]bool{}
	for _, n := range cfg.ExcludeNamespaces {
		exclude[n] = true
	}
	s.scope = kube.Scope{Exclude: exclude, Selector: cfg.Selector, WorkspaceLabel: cfg.WorkspaceLabel,
		PageSize: cfg.PageSize, Retry: s.retry}
	switch {
	case cfg.AllNamespaces:
	case len(cfg.Namespaces) > 0:
		s.scope.Namespaces = cfg.Namespaces
	default:
		s.scope.Namespaces = []string{ns}
	}
	zerolog.Ctx(ctx).Debug().Str("cluster", cluster).Strs("namespaces", s.scope.Namespaces).
		Str("selector", cfg.SelectorString).Msg("connected")
	return s, nil
}

func (s *session) policy() classify.Policy {
	return classify.Policy{WorkspaceLabel: s.cfg.WorkspaceLabel, MinAge: s.cfg.MinAge,
		GracePeriod: s.cfg.GracePeriod, TrustExistingSnapshots: s.cfg.TrustExistingSnapshots}
}

func (s *session) scan(ctx context.Context, dryRun bool) (*janitor.ScanResult, error) {
	return janitor.Scan(ctx, s.clients, janitor.ScanOptions{Scope: s.scope, Policy: s.policy(),
		DryRun: dryRun, Concurrency: s.cfg.Concurrency, Retry: s.retry})
}

// newReport starts the report of a command.
func (s *session) newReport(command string, dryRun bool) *report.Report {
	return report.New(command, dryRun, s.clients.Cluster, s.started)
}

// addMarks records the marking outcome of each claim as its report action,
// and whether the scan trusted the Unused condition.
func addMarks(r *report.Report, res *janitor.ScanResult) {
	r.UnusedCondition = res.UnusedCondition
	for i, o := range res.Marks.Outcomes {
		cl := res.Decisions[i].Claim
		if e := r.Entry(cl.Namespace, cl.Name); e != nil {
			e.Action = string(o)
		}
	}
}

// finish prints the report and publishes the run's metrics (--metrics-file,
// --pushgateway); a write error becomes the command's error unless it
// already has one. A failure to publish is logged: it never changes what
// the run did.
func (s *session) finish(ctx context.Context, w io.Writer, r *report.Report, err error) error {
	cfg := s.cfg
	// A use this run saw and could not write down is known to nobody
	// after it (SPEC §3 Marks): the run says so and does not end well.
	if lost := s.clients.Uses.Lost(); len(lost) > 0 && exitcode.Code(err) == exitcode.OK {
		err = exitcode.New(exitcode.Partial, fmt.Errorf("%d claims were seen in use and their marks could not be removed (%s): a later run cannot see that use on a cluster without the Unused condition", len(lost), strings.Join(lost, ", ")))
	}
	// A run that lost its lease stopped acting: that is its outcome,
	// whatever else it reports (SPEC §7).
	if lerr := leaseErr(ctx); lerr != nil {
		if c := exitcode.Code(err); c == exitcode.OK || c == exitcode.Partial || c == exitcode.DataAtRisk {
			err = lerr
		}
	}
	r.Finish(time.Now())
	if werr := report.Write(w, r, cfg.Output); werr != nil && err == nil {
		err = fmt.Errorf("write report: %w", werr)
	}
	if cfg.MetricsFile != "" || cfg.Pushgateway != "" {
		run := metrics.FromReport(r, exitcode.Code(err) == exitcode.OK)
		// Published after SIGTERM too: the context may be done.
		pctx := context.WithoutCancel(ctx)
		if perr := metrics.Publish(pctx, metrics.Options{File: cfg.MetricsFile, Pushgateway: cfg.Pushgateway}, run); perr != nil {
			zerolog.Ctx(ctx).Error().Err(perr).Msg("publish metrics")
		}
	}
	if cfg.NotifyWebhook != "" && notify.Due(r, err) {
		if nerr := notify.Post(context.WithoutCancel(ctx), nil, cfg.NotifyWebhook, r, err); nerr != nil {
			zerolog.Ctx(ctx).Error().Err(nerr).Msg("notify")
		}
	}
	return err
}

// failed publishes metrics and a notification for a run that failed before
// it had a report (a read failed, say), so that alerting sees it, and
// returns err unchanged. Nothing is printed on stdout: there is no report.
func (s *session) failed(ctx context.Context, command string, err error) error {
	cfg := s.cfg
	if err == nil || (cfg.MetricsFile == "" && cfg.Pushgateway == "" && cfg.NotifyWebhook == "") {
		return err
	}
	r := s.newReport(command, cfg.DryRun)
	r.Finish(time.Now())
	r.Error = err.Error()
	if cfg.MetricsFile != "" || cfg.Pushgateway != "" {
		if perr := metrics.Publish(context.WithoutCancel(ctx), metrics.Options{File: cfg.MetricsFile, Pushgateway: cfg.Pushgateway}, metrics.FromReport(r, false)); perr != nil {
			zerolog.Ctx(ctx).Error().Err(perr).Msg("publish metrics")
		}
	}
	if cfg.NotifyWebhook != "" {
		if nerr := notify.Post(context.WithoutCancel(ctx), nil, cfg.NotifyWebhook, r, err); nerr != nil {
			zerolog.Ctx(ctx).Error().Err(nerr).Msg("notify")
		}
	}
	return err
}

// failuresError turns action failures into exit code 4.
func failuresError(what string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, 3)
	for i, e := range errs {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		msgs = append(msgs, e.Error())
	}
	return exitcode.New(exitcode.Partial, fmt.Errorf("%d %s failed: %s", len(errs), what, strings.Join(msgs, "; ")))
}

// userAgent names the janitor and this process (host/pid, as the Lease's
// holder does) in every request, so that an audit log tells the requests of
// one run from another's.
func userAgent() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pvc-janitor/%s (%s/%d)", version.Version, host, os.Getpid())
}
