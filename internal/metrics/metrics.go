// Package metrics publishes the outcome of one janitor run in the Prometheus
// text format, for a CronJob whose process ends with the run: written
// atomically to a file for node-exporter's textfile collector
// (--metrics-file) and pushed to a Pushgateway (--pushgateway).
//
// Every metric is a gauge describing the last run (a counter makes no sense
// across processes that each run once). The file carries the command as a
// label, so that several commands writing files on one node never produce
// duplicate series; the Pushgateway gets the same metrics with the command
// in the grouping key instead (job="pvc-janitor", command="run"), which the
// Pushgateway turns into the same labels.
//
// pvc_janitor_last_success_timestamp_seconds survives failed runs: a failed
// run carries the previous file's value forward, and pushes with POST, which
// replaces only the metric families it sends, so the Pushgateway keeps the
// last success it was given.
//
// The text format is written here (text.go), not by Prometheus' client
// library: the janitor publishes a few gauges once per process, and the
// library (with the protobuf runtime it needs) was 4.5 MB of the binary
// and 2 MiB of every run's memory.
//
// A Pushgateway URL may carry credentials (https://user:pass@host). They are
// taken out of the URL and sent as basic auth, and never appear in an error
// or a log line: use RedactURL to show the URL.
package metrics

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/endpoint"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// Job is the Pushgateway job name of every push.
const Job = "pvc-janitor"

// Metric names, part of the public interface (dashboards, alerts).
const (
	NameClaims           = "pvc_janitor_claims"
	NameSnapshotsCreated = "pvc_janitor_snapshots_created"
	NameSnapshotsFailed  = "pvc_janitor_snapshots_failed"
	NameClaimsDeleted    = "pvc_janitor_claims_deleted"
	NameRunDuration      = "pvc_janitor_run_duration_seconds"
	NameRunSuccess       = "pvc_janitor_run_success"
	NameDryRun           = "pvc_janitor_dry_run"
	NameLastRun          = "pvc_janitor_last_run_timestamp_seconds"
	NameLastSuccess      = "pvc_janitor_last_success_timestamp_seconds"
	NameClaimBytes       = "pvc_janitor_claim_bytes"
	NameFreedBytes       = "pvc_janitor_freed_bytes"
	NameUnfreedBytes     = "pvc_janitor_unfreed_bytes"
	NameSnapshotsPruned  = "pvc_janitor_snapshots_pruned"
	NameLeakedContents   = "pvc_janitor_leaked_contents"
	NameMonthlyCost      = "pvc_janitor_monthly_cost"
	NameRescues          = "pvc_janitor_rescues"
	NameRescueBytes      = "pvc_janitor_rescue_bytes"
	NameUnusedCondition  = "pvc_janitor_unused_condition"
)

// Names lists every metric the janitor exports (dashboards and alerts may
// use these and no other).
var Names = []string{NameClaims, NameSnapshotsCreated, NameSnapshotsFailed, NameClaimsDeleted, NameRunDuration,
	NameRunSuccess, NameDryRun, NameLastRun, NameLastSuccess, NameClaimBytes, NameFreedBytes, NameUnfreedBytes,
	NameSnapshotsPruned, NameLeakedContents, NameMonthlyCost, NameRescues, NameRescueBytes, NameUnusedCondition}

// DefaultTimeout bounds one push when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Run is what one janitor run reports.
type Run struct {
	// Command is the janitor command, e.g. "run".
	Command string
	// Cluster is the kubeconfig context in a fleet run (several
	// contexts): a "cluster" label on every series of the file, and a
	// "cluster" key in the Pushgateway's grouping. Empty otherwise: no
	// label, as before fleets.
	Cluster string
	// DryRun is true when the run changed nothing by request.
	DryRun bool
	// ClaimsByState counts the claims in scope per state. Every known state
	// is published, with 0 when absent, so that an alert on a state does
	// not depend on the series existing.
	ClaimsByState map[string]int
	// SnapshotsCreated, SnapshotsFailed and ClaimsDeleted count this run's
	// actions.
	SnapshotsCreated int
	SnapshotsFailed  int
	ClaimsDeleted    int
	// Duration is how long the run took.
	Duration time.Duration
	// Success is true when the run exited 0.
	Success bool
	// Finished is when the run ended; zero means now.
	Finished time.Time
	// BytesByState sums the claims' capacity per state; FreedBytes and
	// UnfreedBytes are what the run's deletions freed and did not (Retain).
	BytesByState map[string]int64
	FreedBytes   int64
	UnfreedBytes int64
	// SnapshotsPruned and LeakedContents count the run's retention and the
	// contents its snapshot deletions left behind.
	SnapshotsPruned int
	LeakedContents  int
	// MonthlyCost is by kind (orphaned, superseded, rescues, saved), only
	// when prices were given.
	MonthlyCost map[string]float64
	// Rescues are the janitor's ready rescues in scope by age bucket
	// (report.AgeBuckets) and RescueBytes their restoreSize, when the run
	// read them (nil otherwise: no series).
	Rescues     map[string]int
	RescueBytes int64
	// UnusedCondition is the report's: trusted, ignored or absent ("" when
	// the run did not classify: no series).
	UnusedCondition string
}

// FromReport builds the metrics of a finished report (report.Finish has
// been called). success is whether the command is about to exit 0.
func FromReport(r *report.Report, success bool) Run {
	run := Run{
		Command:          r.Command,
		DryRun:           r.DryRun,
		ClaimsByState:    make(map[string]int, len(r.Summary.States)),
		SnapshotsCreated: r.Summary.SnapshotsCreated,
		ClaimsDeleted:    r.Summary.ClaimsDeleted,
		Success:          success,
		Finished:         r.FinishedAt,
		UnusedCondition:  r.UnusedCondition,
	}
	for k, v := range r.Summary.States {
		run.ClaimsByState[k] = v
	}
	run.Duration = r.Duration()
	run.BytesByState, run.FreedBytes, run.UnfreedBytes = r.Summary.BytesByState, r.Summary.FreedBytes, r.Summary.UnfreedBytes
	run.SnapshotsPruned, run.LeakedContents = r.Summary.SnapshotsPruned, r.Summary.LeakedContents
	if rs := r.Summary.Rescues; rs != nil {
		run.Rescues, run.RescueBytes = rs.ByAge, rs.Bytes
	}
	if c := r.Summary.Cost; c != nil {
		run.MonthlyCost = map[string]float64{"orphaned": c.Orphaned, "superseded": c.Superseded, "rescues": c.Rescues, "saved": c.Saved}
	}
	for _, e := range r.Claims {
		switch e.Action {
		case rescue.ActionFailed, rescue.ActionConflict:
			run.SnapshotsFailed++
		}
	}
	return run
}

// Options say where the metrics of a run go. Empty fields are skipped.
type Options struct {
	// File is the --metrics-file path.
	File string
	// Pushgateway is the --pushgateway URL, possibly with credentials.
	Pushgateway string
	// Client pushes; nil means a plain http.Client.
	Client *http.Client
	// Timeout bounds each push, retries included (retry.Outbound, the one
	// policy of a run's posts); zero means DefaultTimeout.
	Timeout time.Duration
}

// Publish writes the file and pushes, as configured, and returns the
// failures joined. A push that fails is tried again by retry.Outbound
// within Options.Timeout, but not one the Pushgateway refused with a 4xx
// other than 408, 425 and 429. No failure stops the others. A fleet run passes one Run
// per cluster: one file holds them all, each cluster is its own push.
func Publish(ctx context.Context, o Options, runs ...Run) error {
	var errs []error
	if o.File != "" {
		if err := WriteFile(o.File, runs...); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Pushgateway != "" {
		timeout := o.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		for _, r := range runs {
			err := retry.Outbound(timeout).Do(ctx, func(ctx context.Context) error {
				return Push(ctx, o.Pushgateway, r, o.Client)
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// CommandLabel says whether the samples of a run carry its command as a
// label: the file holds every command's runs, a Pushgateway group is one
// command's already.
type CommandLabel uint8

// The two CommandLabel values.
const (
	NoCommand CommandLabel = iota
	WithCommand
)

// Text returns the metrics of r in the Prometheus text format, with the
// command as a label under WithCommand (the file) and without it under
// NoCommand (the push, whose grouping key carries it). lastSuccess, when
// not zero, is published for a failed run.
func Text(r Run, cmd CommandLabel, lastSuccess time.Time) ([]byte, error) {
	fs := families{}
	if err := fs.addRun(r, cmd, lastSuccess); err != nil {
		return nil, err
	}
	return fs.text(), nil
}

// WriteFile writes the metrics of r to path atomically: to a hidden
// temporary file in the same folder (the textfile collector reads only
// *.prom files), synced, then renamed over path. A failed run keeps the last
// success time found in the previous file.
//
// Several runs (a fleet's clusters, each with its Cluster) share the file,
// told apart by their cluster label.
func WriteFile(path string, runs ...Run) error {
	if len(runs) == 0 {
		return errors.New("metrics: no run to write")
	}
	fs := families{}
	for _, r := range runs {
		var last time.Time
		if !r.Success {
			last = lastSuccessIn(path, r.Command, r.Cluster)
		}
		if err := fs.addRun(r, WithCommand, last); err != nil {
			return err
		}
	}
	data := fs.text()
	dir, base := filepath.Dir(path), filepath.Base(path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write metrics file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write metrics file %s: %w", path, err)
	}
	return nil
}

// Push sends the metrics of r to the Pushgateway at rawURL, grouped by job
// and command (and cluster, in a fleet run), with POST: a failed run (which
// sends no last-success metric) leaves the last success already there.
// Credentials in the URL become basic auth; errors show the URL without
// them.
func Push(ctx context.Context, rawURL string, r Run, client *http.Client) error {
	u, user, pass, err := endpoint.Pushgateway(rawURL)
	if err != nil {
		return err
	}
	body, err := Text(r, NoCommand, time.Time{})
	if err != nil {
		return err
	}
	if client == nil {
		client = http.DefaultClient
	}
	target := u + "/metrics" + group("job", Job) + group("command", r.Command)
	if r.Cluster != "" {
		target += group("cluster", r.Cluster)
	}
	code, err := post(ctx, client, target, body, user, pass)
	if err != nil {
		// Scrub: a transport error may quote the URL it was given.
		msg := strings.ReplaceAll(err.Error(), rawURL, u)
		if pass != "" {
			msg = strings.ReplaceAll(msg, pass, "REDACTED")
		}
		err = &pushError{msg: fmt.Sprintf("push metrics to %s: %s", u, msg), err: err}
		if code != 0 && !retry.TransientStatus(code) {
			err = retry.Permanent(err) // another try would be refused again
		}
	}
	return err
}

// pushError is a failed push, its message scrubbed of credentials; it
// unwraps to what the transport said, by which retry.Do tells an address
// that refuses every connection.
type pushError struct {
	msg string
	err error
}

func (e *pushError) Error() string { return e.msg }
func (e *pushError) Unwrap() error { return e.err }

// post sends one push; any answer but 200 or 202 is an error that quotes
// the start of the Pushgateway's answer. code is the answer's status, 0
// when there was none.
func post(ctx context.Context, client *http.Client, target string, body []byte, user, pass string) (code int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", ContentType)
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		return resp.StatusCode, fmt.Errorf("the Pushgateway answered %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	return resp.StatusCode, nil
}

// group is one grouping key of a push's path, as the Pushgateway reads it:
// /name/value escaped, or /name@base64/value in base64 (RFC 4648, URL
// alphabet) when the value holds a slash, which no escaping carries
// through the Pushgateway's router, or is empty.
func group(name, value string) string {
	switch {
	case value == "":
		return "/" + name + "@base64/="
	case strings.Contains(value, "/"):
		return "/" + name + "@base64/" + base64.RawURLEncoding.EncodeToString([]byte(value))
	}
	return "/" + name + "/" + url.PathEscape(value)
}

// ValidatePushgatewayURL checks a --pushgateway value
// (endpoint.Pushgateway).
func ValidatePushgatewayURL(raw string) error { return endpoint.ValidatePushgateway(raw) }

// RedactURL returns the URL without its credentials, query and fragment
// (endpoint.Redact).
func RedactURL(raw string) string { return endpoint.Redact(raw) }

// addRun adds the gauges of one run, with the command (and cluster) as
// labels with WithCommand.
func (fs families) addRun(r Run, cmd CommandLabel, lastSuccess time.Time) error {
	withCommand := cmd == WithCommand
	if r.Command == "" {
		return errors.New("metrics: the run has no command")
	}
	finished := r.Finished
	if finished.IsZero() {
		finished = time.Now()
	}
	g := gauges{fs: fs}
	if withCommand {
		g.constLabels = []label{{"command", r.Command}}
		if r.Cluster != "" {
			g.constLabels = append(g.constLabels, label{"cluster", r.Cluster})
		}
	}
	const claimsHelp = "Claims in scope per state at the last run."
	for _, s := range stateNames(r.ClaimsByState) {
		g.set(NameClaims, claimsHelp, float64(r.ClaimsByState[s]), label{"state", s})
	}
	g.set(NameSnapshotsCreated, "VolumeSnapshots the last run created and saw ready.", float64(r.SnapshotsCreated))
	g.set(NameSnapshotsFailed, "Rescues of the last run that failed (snapshot error, attempts or time ran out, name conflict).", float64(r.SnapshotsFailed))
	g.set(NameClaimsDeleted, "Claims the last run deleted.", float64(r.ClaimsDeleted))
	g.set(NameRunDuration, "Duration of the last run.", r.Duration.Seconds())
	g.sizes(r)
	g.set(NameRunSuccess, "1 when the last run exited 0, else 0.", boolFloat(r.Success))
	g.set(NameDryRun, "1 when the last run was a dry run.", boolFloat(r.DryRun))
	if r.UnusedCondition != "" {
		const help = "1 for how the last run took the claims' Unused condition (trusted, ignored, absent), 0 for the others."
		for _, c := range []string{classify.ConditionTrusted, classify.ConditionIgnored, classify.ConditionAbsent} {
			g.set(NameUnusedCondition, help, boolFloat(c == r.UnusedCondition), label{"condition", c})
		}
	}
	const lastHelp = "When the last successful run ended, in seconds since the epoch."
	g.set(NameLastRun, "When the last run ended, in seconds since the epoch.", unix(finished))
	switch {
	case r.Success:
		g.set(NameLastSuccess, lastHelp, unix(finished))
	case !lastSuccess.IsZero():
		g.set(NameLastSuccess, lastHelp, unix(lastSuccess))
	}
	return g.err
}

// sizes sets the bytes, retention and money of the run.
func (g *gauges) sizes(r Run) {
	const bytesHelp = "Capacity of the claims in scope per state at the last run, in bytes."
	for _, s := range classify.States {
		g.set(NameClaimBytes, bytesHelp, float64(r.BytesByState[string(s)]), label{"state", string(s)})
	}
	g.set(NameFreedBytes, "Capacity of the claims the last run deleted whose volume is Delete, in bytes.", float64(r.FreedBytes))
	g.set(NameUnfreedBytes, "Capacity of the claims the last run deleted whose volume is Retain (left Released), in bytes.", float64(r.UnfreedBytes))
	g.set(NameSnapshotsPruned, "Rescues the last run pruned by retention.", float64(r.SnapshotsPruned))
	g.set(NameLeakedContents, "VolumeSnapshotContents the last run's snapshot deletions left behind.", float64(r.LeakedContents))
	if r.Rescues != nil {
		const help = "The janitor's ready rescues in scope at the last run, by age (from the moment the storage system cut them)."
		for _, b := range report.AgeBuckets {
			g.set(NameRescues, help, float64(r.Rescues[b.Label]), label{"age", b.Label})
		}
		g.set(NameRescueBytes, "Bytes the janitor's ready rescues in scope hold at the last run (their restoreSize).", float64(r.RescueBytes))
	}
	const costHelp = "Monthly cost at the given prices: of unused (orphaned) and superseded claims, of rescues, and what the last run saved."
	for k, v := range r.MonthlyCost {
		g.set(NameMonthlyCost, costHelp, v, label{"kind", k})
	}
}

// stateNames returns every known state and any other key of m, sorted.
func stateNames(m map[string]int) []string {
	seen := make(map[string]bool, len(classify.States)+len(m))
	var out []string
	for _, s := range classify.States {
		seen[string(s)] = true
		out = append(out, string(s))
	}
	for s := range m {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// lastSuccessIn reads the last success time of command (on cluster, in a
// fleet run) from a metrics file written earlier; zero when there is none.
func lastSuccessIn(path, command, cluster string) time.Time {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}
	}
	defer func() { _ = f.Close() }()
	// The series as the writer wrote it: labels sorted by name, values
	// escaped (a context name may hold " or \), by the same labelText.
	labels := []label{{"command", command}}
	if cluster != "" {
		labels = []label{{"cluster", cluster}, {"command", command}}
	}
	prefix := NameLastSuccess + labelText(labels) + " "
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, prefix)), 64)
		if err != nil || v <= 0 {
			return time.Time{}
		}
		return time.Unix(int64(v), 0).UTC()
	}
	return time.Time{}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// unix is t in whole seconds: the report's resolution.
func unix(t time.Time) float64 { return float64(t.Unix()) }
