package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

var finished = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func sampleRun() metrics.Run {
	return metrics.Run{
		Command:          "run",
		ClaimsByState:    map[string]int{"InUse": 7, "Orphaned": 2, "Rescued": 1},
		SnapshotsCreated: 2,
		SnapshotsFailed:  1,
		ClaimsDeleted:    1,
		Duration:         1500 * time.Millisecond,
		Success:          true,
		Finished:         finished,
	}
}

// The exact text of sampleRun without the command label: what the
// Pushgateway receives.
const wantPushedTemplate = `# HELP pvc_janitor_claim_bytes Capacity of the claims in scope per state at the last run, in bytes.
# TYPE pvc_janitor_claim_bytes gauge
{{claim_bytes}}# HELP pvc_janitor_claims Claims in scope per state at the last run.
# TYPE pvc_janitor_claims gauge
{{claims}}# HELP pvc_janitor_claims_deleted Claims the last run deleted.
# TYPE pvc_janitor_claims_deleted gauge
pvc_janitor_claims_deleted 1
# HELP pvc_janitor_dry_run 1 when the last run was a dry run.
# TYPE pvc_janitor_dry_run gauge
pvc_janitor_dry_run 0
# HELP pvc_janitor_freed_bytes Capacity of the claims the last run deleted whose volume is Delete, in bytes.
# TYPE pvc_janitor_freed_bytes gauge
pvc_janitor_freed_bytes 0
# HELP pvc_janitor_last_run_timestamp_seconds When the last run ended, in seconds since the epoch.
# TYPE pvc_janitor_last_run_timestamp_seconds gauge
pvc_janitor_last_run_timestamp_seconds 1.767323045e+09
# HELP pvc_janitor_last_success_timestamp_seconds When the last successful run ended, in seconds since the epoch.
# TYPE pvc_janitor_last_success_timestamp_seconds gauge
pvc_janitor_last_success_timestamp_seconds 1.767323045e+09
# HELP pvc_janitor_leaked_contents VolumeSnapshotContents the last run's snapshot deletions left behind.
# TYPE pvc_janitor_leaked_contents gauge
pvc_janitor_leaked_contents 0
# HELP pvc_janitor_run_duration_seconds Duration of the last run.
# TYPE pvc_janitor_run_duration_seconds gauge
pvc_janitor_run_duration_seconds 1.5
# HELP pvc_janitor_run_success 1 when the last run exited 0, else 0.
# TYPE pvc_janitor_run_success gauge
pvc_janitor_run_success 1
# HELP pvc_janitor_snapshots_created VolumeSnapshots the last run created and saw ready.
# TYPE pvc_janitor_snapshots_created gauge
pvc_janitor_snapshots_created 2
# HELP pvc_janitor_snapshots_failed Rescues of the last run that failed (snapshot error, attempts or time ran out, name conflict).
# TYPE pvc_janitor_snapshots_failed gauge
pvc_janitor_snapshots_failed 1
# HELP pvc_janitor_snapshots_pruned Rescues the last run pruned by retention.
# TYPE pvc_janitor_snapshots_pruned gauge
pvc_janitor_snapshots_pruned 0
# HELP pvc_janitor_unfreed_bytes Capacity of the claims the last run deleted whose volume is Retain (left Released), in bytes.
# TYPE pvc_janitor_unfreed_bytes gauge
pvc_janitor_unfreed_bytes 0
`

// wantPushed is the body sampleRun pushes: one series per state of
// classify.States (sorted by name), so that a new state rule needs no
// change here.
var wantPushed = func() string {
	counts := map[classify.State]int{classify.InUse: 7, classify.Orphaned: 2, classify.Rescued: 1}
	states := slices.Clone(classify.States)
	slices.Sort(states)
	var bytes, claims strings.Builder
	for _, st := range states {
		fmt.Fprintf(&bytes, "pvc_janitor_claim_bytes{state=%q} 0\n", st)
		fmt.Fprintf(&claims, "pvc_janitor_claims{state=%q} %d\n", st, counts[st])
	}
	return strings.NewReplacer("{{claim_bytes}}", bytes.String(), "{{claims}}", claims.String()).Replace(wantPushedTemplate)
}()

// withCommand adds command="run" to every sample line of text.
func withCommand(text string) string {
	var out []string
	for _, l := range strings.SplitAfter(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			out = append(out, l)
			continue
		}
		name, rest, _ := strings.Cut(l, " ")
		if i := strings.Index(name, "{"); i >= 0 {
			name = name[:i] + `{command="run",` + name[i+1:]
		} else {
			name += `{command="run"}`
		}
		out = append(out, name+" "+rest)
	}
	return strings.Join(out, "")
}

type pushed struct {
	method, path, contentType, auth, body string
}

// fakeGateway is a local Pushgateway: it records every request and answers
// with status.
func fakeGateway(t *testing.T, status int) (*httptest.Server, func() []pushed) {
	t.Helper()
	var mu sync.Mutex
	var got []pushed
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, pushed{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(body)})
		mu.Unlock()
		w.WriteHeader(status)
		if status >= 300 {
			_, _ = io.WriteString(w, "pushgateway says no")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []pushed {
		mu.Lock()
		defer mu.Unlock()
		return append([]pushed(nil), got...)
	}
}

func TestPushBody(t *testing.T) {
	srv, got := fakeGateway(t, http.StatusOK)
	if err := metrics.Push(context.Background(), srv.URL+"/", sampleRun(), nil); err != nil {
		t.Fatal(err)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("want one push, got %d", len(reqs))
	}
	r := reqs[0]
	// POST: a failed run's push must not wipe the last success time.
	if r.method != http.MethodPost || r.path != "/metrics/job/pvc-janitor/command/run" {
		t.Errorf("pushed %s %s", r.method, r.path)
	}
	if !strings.HasPrefix(r.contentType, "text/plain") {
		t.Errorf("content type %q", r.contentType)
	}
	if r.auth != "" {
		t.Errorf("unexpected Authorization %q", r.auth)
	}
	if r.body != wantPushed {
		t.Errorf("pushed body:\n%s\nwant:\n%s", r.body, wantPushed)
	}
}

func TestFailedRunPushesNoLastSuccess(t *testing.T) {
	srv, got := fakeGateway(t, http.StatusAccepted)
	run := sampleRun()
	run.Success = false
	if err := metrics.Push(context.Background(), srv.URL, run, nil); err != nil {
		t.Fatal(err)
	}
	body := got()[0].body
	if strings.Contains(body, "pvc_janitor_last_success_timestamp_seconds") {
		t.Error("a failed run pushed a last success time")
	}
	if !strings.Contains(body, "\npvc_janitor_run_success 0\n") {
		t.Errorf("want run_success 0 in:\n%s", body)
	}
}

func TestPushCredentialsAreBasicAuthAndNeverInErrors(t *testing.T) {
	srv, got := fakeGateway(t, http.StatusInternalServerError)
	withCreds := strings.Replace(srv.URL, "http://", "http://pushuser:s3cr3t-pass@", 1) + "/prefix"
	err := metrics.Push(context.Background(), withCreds, sampleRun(), nil)
	if err == nil {
		t.Fatal("want an error from a 500")
	}
	if strings.Contains(err.Error(), "s3cr3t-pass") || strings.Contains(err.Error(), "pushuser") {
		t.Errorf("credentials leaked into the error: %v", err)
	}
	if !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), srv.URL+"/prefix") {
		t.Errorf("the error should name the status and the redacted URL: %v", err)
	}
	r := got()[0]
	if r.path != "/prefix/metrics/job/pvc-janitor/command/run" {
		t.Errorf("path %q", r.path)
	}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Authorization", r.auth)
	if u, p, ok := req.BasicAuth(); !ok || u != "pushuser" || p != "s3cr3t-pass" {
		t.Errorf("want basic auth pushuser, got %q", r.auth)
	}

	// Unreachable: the transport's error must not carry them either.
	srv.Close()
	err = metrics.Push(context.Background(), withCreds, sampleRun(), nil)
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pass") || strings.Contains(err.Error(), "pushuser") {
		t.Errorf("unreachable gateway: %v", err)
	}
}

func TestValidateAndRedact(t *testing.T) {
	for _, ok := range []string{"http://pg:9091", "https://u:p@pg.example/base/", "http://127.0.0.1:9091"} {
		if err := metrics.ValidatePushgatewayURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"pg:9091", "ftp://pg", "http://", "https://u:secret@pg/?token=secret", "http://pg/#secret", "::"} {
		err := metrics.ValidatePushgatewayURL(bad)
		if err == nil {
			t.Errorf("%s: want an error", bad)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows a secret: %v", bad, err)
		}
	}
	if got := metrics.RedactURL("https://user:secret@pg.example:9091/x?token=secret#frag"); got != "https://pg.example:9091/x" {
		t.Errorf("RedactURL = %q", got)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pvc-janitor.prom")
	if err := metrics.WriteFile(path, sampleRun()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := withCommand(wantPushed); string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the collector runs as another user)", st.Mode().Perm())
	}

	// A failed run later keeps the last success of the file it replaces.
	failed := sampleRun()
	failed.Success = false
	failed.Finished = finished.Add(time.Hour)
	if err := metrics.WriteFile(path, failed); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	text := string(data)
	for _, want := range []string{
		`pvc_janitor_last_success_timestamp_seconds{command="run"} 1.767323045e+09`,
		`pvc_janitor_last_run_timestamp_seconds{command="run"} 1.767326645e+09`,
		`pvc_janitor_run_success{command="run"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("want %q in:\n%s", want, text)
		}
	}
	// Nothing but the file is left in the folder (no temporary files).
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("folder holds %d entries, want 1", len(entries))
	}

	// A first run that fails has no last success to publish.
	fresh := filepath.Join(dir, "fresh.prom")
	if err := metrics.WriteFile(fresh, failed); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(fresh)
	if strings.Contains(string(data), metrics.NameLastSuccess) {
		t.Errorf("a failing first run published a last success:\n%s", data)
	}
}

func TestWriteFileIntoMissingFolderFails(t *testing.T) {
	err := metrics.WriteFile(filepath.Join(t.TempDir(), "nope", "x.prom"), sampleRun())
	if err == nil {
		t.Fatal("want an error")
	}
}

func TestPublishBothAndJoinErrors(t *testing.T) {
	srv, got := fakeGateway(t, http.StatusOK)
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := metrics.Publish(context.Background(), metrics.Options{File: path, Pushgateway: srv.URL}, sampleRun()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if len(got()) != 1 || got()[0].body != wantPushed || string(data) != withCommand(wantPushed) {
		t.Error("the file and the push do not hold the same metrics")
	}

	// A broken file does not stop the push, and both errors are returned.
	bad, _ := fakeGateway(t, http.StatusBadRequest)
	err := metrics.Publish(context.Background(), metrics.Options{File: filepath.Join(t.TempDir(), "no", "m.prom"), Pushgateway: bad.URL}, sampleRun())
	if err == nil || !strings.Contains(err.Error(), "metrics file") || !strings.Contains(err.Error(), "400") {
		t.Errorf("want both errors, got %v", err)
	}
	if err := metrics.Publish(context.Background(), metrics.Options{}, sampleRun()); err != nil {
		t.Errorf("nothing configured: %v", err)
	}
}

func TestPushTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	t.Cleanup(func() { close(block); srv.Close() })
	start := time.Now()
	err := metrics.Publish(context.Background(), metrics.Options{Pushgateway: srv.URL, Timeout: 200 * time.Millisecond}, sampleRun())
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("want a timeout error within the bound, got %v after %s", err, time.Since(start))
	}
}

func TestFromReport(t *testing.T) {
	started := finished.Add(-90 * time.Second)
	r := report.New("run", true, "c", started)
	r.Claims = []*report.ClaimEntry{
		{Namespace: "a", Name: "1", State: "Orphaned", Action: report.ActionSnapshotCreated},
		{Namespace: "a", Name: "2", State: "SnapshotFailed", Action: rescue.ActionFailed},
		{Namespace: "a", Name: "3", State: "Orphaned", Action: rescue.ActionConflict},
		{Namespace: "a", Name: "4", State: "Rescued", Action: report.ActionDeleted},
		{Namespace: "a", Name: "5", State: "InUse"},
	}
	r.Finish(finished)
	m := metrics.FromReport(r, false)
	if m.Command != "run" || !m.DryRun || m.Success || m.Duration != 90*time.Second || !m.Finished.Equal(finished) {
		t.Errorf("run fields: %+v", m)
	}
	if m.SnapshotsCreated != 1 || m.SnapshotsFailed != 2 || m.ClaimsDeleted != 1 {
		t.Errorf("counts: %+v", m)
	}
	if m.ClaimsByState["Orphaned"] != 2 || m.ClaimsByState["InUse"] != 1 || len(m.ClaimsByState) != 4 {
		t.Errorf("states: %v", m.ClaimsByState)
	}
}

// TestUnusedConditionSeries: how the run took the Unused condition is one
// series per value, 1 for the report's and 0 for the others, so that an
// alert on "ignored" does not depend on a series appearing; a run that did
// not classify publishes none.
func TestUnusedConditionSeries(t *testing.T) {
	r := report.New("run", false, "c", finished.Add(-time.Second))
	r.UnusedCondition = classify.ConditionIgnored
	r.Finish(finished)
	b, err := metrics.Text(metrics.FromReport(r, true), metrics.WithCommand, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pvc_janitor_unused_condition{command="run",condition="ignored"} 1`,
		`pvc_janitor_unused_condition{command="run",condition="trusted"} 0`, `pvc_janitor_unused_condition{command="run",condition="absent"} 0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in\n%s", want, b)
		}
	}
	r.UnusedCondition = ""
	if b, _ := metrics.Text(metrics.FromReport(r, true), metrics.WithCommand, time.Time{}); strings.Contains(string(b), metrics.NameUnusedCondition) {
		t.Error("a run without the condition's verdict published its series")
	}
}

// TestFromReportSizesMoneyAndFractionalDuration: the run's duration is
// exact (a 0.55 s scan is not 0), and the report's bytes, retention and
// money reach the metrics.
func TestFromReportSizesMoneyAndFractionalDuration(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := report.New("run", false, "dev", start)
	r.Claims = append(r.Claims, &report.ClaimEntry{Namespace: "ws", Name: "a", State: "Rescued", Capacity: 1 << 30,
		StorageClass: "fast", ReclaimPolicy: "Delete", Action: report.ActionDeleted})
	p, err := cost.Parse([]string{"fast=0.5"}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.SetPrices(p)
	r.SetRescues(map[string][]inventory.Snapshot{"ws": {{Namespace: "ws", Name: "r", ManagedByJanitor: true, ReadyToUse: true,
		CreationTimestamp: start.Add(-48 * time.Hour), RestoreSize: 1 << 30}}}, start)
	r.Finish(start.Add(550 * time.Millisecond))
	run := metrics.FromReport(r, true)
	if run.Duration != 550*time.Millisecond || run.BytesByState["Rescued"] != 1<<30 || run.FreedBytes != 1<<30 ||
		run.MonthlyCost["saved"] != 0.5 || run.Rescues["1d-7d"] != 1 || run.RescueBytes != 1<<30 {
		t.Errorf("run %+v", run)
	}
}

// TestWriteFileFleet: a fleet run's clusters share one file, each series
// labelled with its cluster; a failed cluster keeps its own last success.
func TestWriteFileFleet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pvc-janitor.prom")
	west, east := sampleRun(), sampleRun()
	west.Cluster, east.Cluster = "west", "east"
	east.ClaimsDeleted = 3
	if err := metrics.WriteFile(path, west, east); err != nil {
		t.Fatal(err)
	}
	east.Success, east.Finished = false, finished.Add(time.Hour)
	west.Finished = finished.Add(time.Hour)
	if err := metrics.WriteFile(path, west, east); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	text := string(data)
	for _, want := range []string{
		`pvc_janitor_claims_deleted{cluster="west",command="run"} 1`,
		`pvc_janitor_claims_deleted{cluster="east",command="run"} 3`,
		`pvc_janitor_claims{cluster="east",command="run",state="Orphaned"} 2`,
		`pvc_janitor_run_success{cluster="east",command="run"} 0`,
		`pvc_janitor_last_success_timestamp_seconds{cluster="east",command="run"} 1.767323045e+09`,
		`pvc_janitor_last_success_timestamp_seconds{cluster="west",command="run"} 1.767326645e+09`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("want %q in:\n%s", want, text)
		}
	}
}

// TestPushFleetGroupsByCluster: each cluster is its own Pushgateway group.
func TestPushFleetGroupsByCluster(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	west, east := sampleRun(), sampleRun()
	west.Cluster, east.Cluster = "west", "east"
	if err := metrics.Publish(context.Background(), metrics.Options{Pushgateway: srv.URL}, west, east); err != nil {
		t.Fatal(err)
	}
	// The Pushgateway's grouping keys are a map: their order in the path
	// is not fixed.
	groups := map[string]bool{}
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, "/metrics/job/pvc-janitor/")
		parts := strings.Split(rest, "/")
		if !ok || len(parts)%2 != 0 {
			t.Fatalf("pushed to %s", p)
		}
		kv := map[string]string{}
		for i := 0; i < len(parts); i += 2 {
			kv[parts[i]] = parts[i+1]
		}
		groups[kv["command"]+"/"+kv["cluster"]] = len(kv) == 2
	}
	for _, want := range []string{"run/west", "run/east"} {
		if !groups[want] {
			t.Errorf("pushed to %v, want the group command=run, cluster=%s", paths, strings.TrimPrefix(want, "run/"))
		}
	}
}

// TestRescueSeries: the report's rescues reach the metrics as one series
// per age bucket (every bucket, 0 when empty) and their bytes; a run that
// read no rescues publishes neither.
func TestRescueSeries(t *testing.T) {
	run := sampleRun()
	run.Rescues = map[string]int{"under-1d": 2, "over-90d": 1}
	run.RescueBytes = 3 << 30
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := metrics.WriteFile(path, run); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{
		`pvc_janitor_rescues{age="under-1d",command="run"} 2`,
		`pvc_janitor_rescues{age="1d-7d",command="run"} 0`,
		`pvc_janitor_rescues{age="7d-30d",command="run"} 0`,
		`pvc_janitor_rescues{age="30d-90d",command="run"} 0`,
		`pvc_janitor_rescues{age="over-90d",command="run"} 1`,
		`pvc_janitor_rescue_bytes{command="run"} 3.221225472e+09`,
	} {
		if !strings.Contains(string(data), want+"\n") {
			t.Errorf("want %q in:\n%s", want, data)
		}
	}
	if err := metrics.WriteFile(path, sampleRun()); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if strings.Contains(string(data), metrics.NameRescues) {
		t.Errorf("a run without rescues read publishes them:\n%s", data)
	}
}

// TestPushGroupWithSlash: a grouping value with a slash (a GKE context's
// name, say) cannot be a path segment; the Pushgateway reads it in base64
// after a name marked @base64.
func TestPushGroupWithSlash(t *testing.T) {
	srv, got := fakeGateway(t, http.StatusOK)
	run := sampleRun()
	run.Cluster = "gke_proj/europe-west1 b"
	if err := metrics.Push(context.Background(), srv.URL, run, nil); err != nil {
		t.Fatal(err)
	}
	// base64url("gke_proj/europe-west1 b"), unpadded.
	want := "/metrics/job/pvc-janitor/command/run/cluster@base64/Z2tlX3Byb2ovZXVyb3BlLXdlc3QxIGI"
	if p := got()[0].path; p != want {
		t.Errorf("pushed to %s, want %s", p, want)
	}
	run.Cluster = "east 1"
	if err := metrics.Push(context.Background(), srv.URL, run, nil); err != nil {
		t.Fatal(err)
	}
	if p := got()[1].path; p != "/metrics/job/pvc-janitor/command/run/cluster/east 1" {
		t.Errorf("pushed to %s", p)
	}
}

// TestPublishRetriesATransientFailure: a push is tried again by the one
// retry policy of a run's posts (retry.Outbound), as the notifications are:
// a 503 until the Pushgateway takes it, never a 400 (another try would only
// be refused again). The Pushgateway is an httptest stub on loopback that
// counts the pushes of each path and answers the first ones with the
// path's status.
func TestPublishRetriesATransientFailure(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries[r.URL.Path]++
		n := tries[r.URL.Path]
		mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/flaky/") && n < 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		case strings.HasPrefix(r.URL.Path, "/bad/"):
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	if err := metrics.Publish(context.Background(), metrics.Options{Pushgateway: srv.URL + "/flaky", Timeout: 10 * time.Second}, sampleRun()); err != nil {
		t.Errorf("503 twice, then 200: %v", err)
	}
	err := metrics.Publish(context.Background(), metrics.Options{Pushgateway: srv.URL + "/bad", Timeout: 10 * time.Second}, sampleRun())
	if err == nil || !strings.Contains(err.Error(), "the Pushgateway answered 400") {
		t.Errorf("400: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	flaky, bad := tries["/flaky/metrics/job/pvc-janitor/command/run"], tries["/bad/metrics/job/pvc-janitor/command/run"]
	if flaky != 3 || bad != 1 {
		t.Errorf("pushes %v: want flaky 3 (two 503s, then taken), bad 1", tries)
	}
}

// TestPublishToAnAddressThatRefuses: a push to an address that refuses
// every connection fails with the transport's error kept (retry.Do stops
// trying it after retry.NeverAnsweredFor, not Options.Timeout, by that
// error), and without the credentials of the URL.
func TestPublishToAnAddressThatRefuses(t *testing.T) {
	err := metrics.Publish(context.Background(), metrics.Options{Pushgateway: "http://janitor:pushpass-5ecret@127.0.0.1:1/", Timeout: time.Hour}, sampleRun())
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || strings.Contains(err.Error(), "pushpass-5ecret") {
		t.Errorf("refused push: %v (%T)", err, errors.Unwrap(err))
	}
}
