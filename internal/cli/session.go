package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
	"github.com/pvc-janitor/pvc-janitor/internal/notify"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
	"github.com/pvc-janitor/pvc-janitor/internal/version"
)

// newLogger builds the one logger of a run from the flags: JSON off a
// terminal, console on one (auto), always on stderr. client-go's klog
// lines go to it too, at debug level (routeKlog).
func newLogger(cfg *config.Config, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	tty := term.IsTerminal(w)
	format := cfg.LogFormat
	if format == config.LogFormatAuto {
		format = config.LogFormatJSON
		if tty {
			format = config.LogFormatConsole
		}
	}
	if format == config.LogFormatConsole {
		// Colours only on a terminal: escape codes in a log file are noise.
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !tty}
	}
	log := zerolog.New(w).Level(level).With().Timestamp().Logger()
	routeKlog(log)
	return log
}

// session is what every command needs once its flags are resolved: the
// configuration, the logger in ctx, the clients and the scope.
type session struct {
	ctx     context.Context
	name    string
	s       Streams
	cfg     *config.Config
	clients *kube.Clients
	scope   kube.Scope
	started time.Time
	release func()
	// fleet, in a run over several clusters, receives this cluster's
	// report instead of stdout; the fleet publishes the metrics and the
	// notification. nil with one cluster.
	fleet *clusterRun
}

// close releases the run's lease, if it took one.
func (sess *session) close() { sess.release() }

// connect builds the clients and the scope; it sends nothing (kube logs
// "connected" at the first answer). A kubeconfig that cannot be loaded is
// a configuration error (exit 2), like kubectl's.
func (sess *session) connect() error {
	cfg := sess.cfg
	rc, cluster, ns, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: cfg.Kubeconfig, Context: cfg.Context})
	if err != nil {
		return exitcode.New(exitcode.Usage, err)
	}
	// Every single API call retries within --api-timeout, each attempt
	// waiting at most --request-timeout for the response.
	retry := kube.NewRetry(cfg.APITimeout, cfg.RequestTimeout)
	c, err := kube.NewClients(rc, kube.ClientOptions{QPS: cfg.QPS, Burst: cfg.Burst, UserAgent: userAgent(), Retry: retry})
	if err != nil {
		return exitcode.New(exitcode.Usage, err)
	}
	c.Cluster, c.Namespace = cluster, ns
	sess.clients = c
	exclude := map[string]bool{}
	for _, n := range cfg.ExcludeNamespaces {
		exclude[n] = true
	}
	sess.scope = kube.Scope{Exclude: exclude, Selector: cfg.Selector, WorkspaceLabel: cfg.WorkspaceLabel,
		PageSize: cfg.PageSize, NotifyLabels: cfg.LabelKeys()}
	switch {
	case cfg.AllNamespaces:
	case len(cfg.Namespaces) > 0:
		sess.scope.Namespaces = cfg.Namespaces
	default:
		sess.scope.Namespaces = []string{ns}
	}
	zerolog.Ctx(sess.ctx).Debug().Str("cluster", cluster).Strs("namespaces", sess.scope.Namespaces).
		Str("selector", cfg.SelectorString).Msg("client configured")
	return nil
}

// lock takes the run's Lease when writes is true, after validate (when
// set) vetted the options against the cluster: bad input is refused before
// the first write, and the lease is one. A live lease of another run is
// exit code 5, naming the holder.
func (sess *session) lock(writes bool, validate func(context.Context, *kube.Clients) error) error {
	if validate != nil {
		if err := validate(sess.ctx, sess.clients); err != nil {
			return exitError(err)
		}
	}
	if !writes {
		return nil
	}
	ctx, release, err := janitor.Lock(sess.ctx, sess.clients, janitor.LockOptions{
		Namespace: sess.cfg.LockNamespace, Duration: sess.cfg.LockDuration})
	if err != nil {
		return exitError(err)
	}
	sess.ctx, sess.release = ctx, release
	return nil
}

// exitError maps the library's errors to exit codes.
func exitError(err error) error {
	var input *janitor.InputError
	switch {
	case err == nil:
		return nil
	case lock.IsHeld(err):
		return exitcode.New(exitcode.LockHeld, err)
	case errors.As(err, &input):
		return exitcode.New(exitcode.Usage, err)
	}
	return err
}

// leaseErr returns the lost-lease error when that is why the run's
// context ended.
func (sess *session) leaseErr() error {
	if cause := janitor.LeaseLost(sess.ctx); cause != nil {
		return exitcode.New(exitcode.Runtime, cause)
	}
	return nil
}

// outputOf is how cfg asks for the report to be written.
func outputOf(cfg *config.Config) report.Output {
	return report.Output{Format: cfg.Output, NoHeaders: cfg.NoHeaders, SortBy: cfg.SortBy}
}

// readOnlyScanOptions are the options of a scan that writes nothing
// (explain, guard), whatever --dry-run says.
func (sess *session) readOnlyScanOptions() janitor.ScanOptions {
	o := sess.scanOptions(true)
	o.MarksOnly = false
	return o
}

// scanOptions are the options of the scan every pipeline starts with.
func (sess *session) scanOptions(dryRun bool) janitor.ScanOptions {
	return janitor.ScanOptions{Scope: sess.scope, DryRun: dryRun, MarksOnly: dryRun && sess.cfg.MarksOnly,
		Concurrency: sess.cfg.Concurrency, Policy: sess.policy()}
}

// policy is the configuration's classify.Policy: the one mapping of the
// flags that classification reads, for every command.
func (sess *session) policy() classify.Policy {
	cfg := sess.cfg
	return classify.Policy{WorkspaceLabel: cfg.WorkspaceLabel, MinAge: cfg.MinAge,
		GracePeriod: cfg.GracePeriod, TrustExistingSnapshots: cfg.TrustExistingSnapshots, ClockSkew: cfg.ClockSkew,
		NoticePeriod: cfg.NoticePeriod, MaxSnooze: cfg.MaxSnooze, SessionsCarryData: cfg.SessionsCarryData}
}

// snapshotOptions are the options of a rescue; progress shows its counters.
func (sess *session) rescueOptions(p *progress) janitor.RescueOptions {
	cfg := sess.cfg
	o := janitor.RescueOptions{Scan: sess.scanOptions(cfg.DryRun), Rescue: rescue.Options{
		Class: cfg.SnapshotClass, Superseded: cfg.Superseded, Timeout: cfg.SnapshotTimeout,
		ErrorGrace: cfg.SnapshotErrorGrace, Attempts: cfg.SnapshotAttempts, RetryBackoff: cfg.SnapshotRetryBackoff,
		DeleteContents: cfg.DeleteContents}}
	if p != nil {
		o.Rescue.Progress, o.Done = p.update, p.done
	}
	return o
}

// reapOptions are the options of a reap.
func (sess *session) reapOptions(confirm func(int) (bool, error)) janitor.ReapOptions {
	cfg := sess.cfg
	return janitor.ReapOptions{Scan: sess.scanOptions(cfg.DryRun), Superseded: cfg.Superseded,
		MaxDeletions: cfg.MaxDeletions, MaxDeletionPercent: cfg.MaxDeletionPercent, Confirm: confirm}
}

// newReport starts the report of the command.
func (sess *session) newReport(command string, dryRun bool) *report.Report {
	r := report.New(command, dryRun, sess.clients.Cluster, sess.started)
	r.MarksOnly = dryRun && sess.cfg.MarksOnly // docs/spec.md#marks-only
	r.SetPrices(sess.cfg.PriceTable)
	return r
}

// finish prints the report and publishes the run's metrics and
// notification; a write error becomes the command's error unless it
// already has one.
func (sess *session) finish(r *report.Report, err error) error {
	// A use this run saw and could not write down is known to nobody
	// after it (docs/spec.md#marks): the run says so and does not end well.
	if lost := sess.clients.Uses.Unrecorded(); len(lost) > 0 && exitcode.Code(err) == exitcode.OK {
		err = exitcode.New(exitcode.Partial, fmt.Errorf("%d claims were seen in use and their marks could not be removed (%s): a later run cannot see that use on a cluster without the Unused condition", len(lost), strings.Join(lost, ", ")))
	}
	// A run that lost its lease stopped acting: that is its outcome,
	// whatever else it reports (docs/spec.md#runs).
	if lerr := sess.leaseErr(); lerr != nil {
		if c := exitcode.Code(err); c == exitcode.OK || c == exitcode.Partial || c == exitcode.DataAtRisk {
			err = lerr
		}
	}
	r.Finish(time.Now())
	if sess.fleet != nil {
		sess.fleet.report = r
		return err
	}
	if werr := report.WriteOutput(sess.s.Out, r, outputOf(sess.cfg)); werr != nil && err == nil {
		err = fmt.Errorf("write report: %w", werr)
	}
	sess.publish(r, err, notify.Due(r, err))
	return err
}

// failed publishes metrics and a notification for a run that failed before
// it had a report (a read failed, say), so that alerting sees it, and
// returns err unchanged. Nothing is printed on stdout: there is no report.
func (sess *session) failed(err error) error {
	if err == nil || sess.fleet != nil {
		return err
	}
	r := sess.newReport(sess.name, sess.cfg.DryRun)
	r.Finish(time.Now())
	r.Error = err.Error()
	const notifyDue = true // a run that failed is always news
	sess.publish(r, err, notifyDue)
	return err
}

// publish writes the run's metrics (--metrics-file, --pushgateway) and,
// when notifyDue, posts the notification (--notify-webhook): one cluster
// is a fleet of one (publishRuns).
func (sess *session) publish(r *report.Report, err error, notifyDue bool) {
	run := metrics.FromReport(r, exitcode.Code(err) == exitcode.OK)
	publishRuns(sess.ctx, sess.cfg, r, []metrics.Run{run}, err, notifyDue)
}

// publishRuns is the one publish path of every command, over one cluster or
// a fleet: the metrics of each cluster's run (one file, a cluster label
// each; one Pushgateway group each) and, when notifyDue, one notification
// of the report r. Both happen after SIGTERM too (the context may be
// done). A failure to publish is logged: it never changes what the run
// did.
func publishRuns(ctx context.Context, cfg *config.Config, r *report.Report, runs []metrics.Run, err error, notifyDue bool) {
	log := zerolog.Ctx(ctx)
	ctx = context.WithoutCancel(ctx)
	if cfg.MetricsFile != "" || cfg.Pushgateway != "" {
		if perr := metrics.Publish(ctx, metrics.Options{File: cfg.MetricsFile, Pushgateway: cfg.Pushgateway}, runs...); perr != nil {
			log.Error().Err(perr).Msg("publish metrics")
		}
	}
	if cfg.NotifyWebhook != "" && notifyDue {
		if nerr := notify.Post(ctx, nil, cfg.NotifyWebhook, r, err); nerr != nil {
			log.Error().Err(nerr).Msg("notify")
		}
	}
	if len(cfg.NotifyRoutes) > 0 {
		// docs/usage.md#notification-routes: one message per owner per
		// route, only about what this run did; a failure is logged.
		msgs := notify.Messages(r, cfg.NotifyRoutes, cfg.OwnerLabel)
		if nerr := notify.SendRoutes(ctx, nil, cfg.NotifyRoutes, msgs, cfg.NotifyRetryTime); nerr != nil {
			log.Error().Err(nerr).Msg("notify routes")
		} else if len(msgs) > 0 {
			log.Info().Int("messages", len(msgs)).Msg("notified owners")
		}
	}
}

// userAgent names the janitor and this process (host/pid, as the Lease's
// holder does) in every request, so that an audit log tells the requests of
// one run from another's.
func userAgent() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pvc-janitor/%s (%s/%d)", version.Version, host, os.Getpid())
}
