//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// writeRecorder is a reverse proxy in front of the test's FaultProxy (no
// faults set: it only authenticates to the real API server) that records
// every request other than a GET, with its body: what the janitor sent,
// while the real API server answers it.
type writeRecorder struct {
	mu     sync.Mutex
	writes []recordedWrite
}

type recordedWrite struct {
	method, path string
	body         []byte
}

func startWriteRecorder(t *testing.T) (*writeRecorder, string) {
	t.Helper()
	p := env.StartFaultProxy(t, 1)
	target, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	rec := &writeRecorder{}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1 // stream watches
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec.mu.Lock()
			rec.writes = append(rec.writes, recordedWrite{r.Method, r.URL.Path, body})
			rec.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: rec, cluster: {server: "`+srv.URL+`"}}]
contexts: [{name: rec, context: {cluster: rec, user: u, namespace: default}}]
current-context: rec
users: [{name: u, user: {}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return rec, kc
}

func (r *writeRecorder) recorded() []recordedWrite {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedWrite(nil), r.writes...)
}

// marksOnlyViolations returns the writes that are neither a merge patch of
// a claim in ns touching only pvc-janitor.io/ annotations (with the uid
// and resourceVersion preconditions) nor a request on the run's Lease.
func marksOnlyViolations(ws []recordedWrite, ns string) (bad []string, patches int) {
	claims := "/api/v1/namespaces/" + ns + "/persistentvolumeclaims/"
	leases := "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases"
	for _, w := range ws {
		line := w.method + " " + w.path + " " + string(w.body)
		switch {
		case strings.HasPrefix(w.path, leases):
		case w.method == http.MethodPatch && strings.HasPrefix(w.path, claims):
			var p struct {
				Metadata map[string]json.RawMessage `json:"metadata"`
			}
			if err := json.Unmarshal(w.body, &p); err != nil || len(p.Metadata) == 0 {
				bad = append(bad, line)
				continue
			}
			var top map[string]any
			_ = json.Unmarshal(w.body, &top)
			ok := len(top) == 1 // metadata alone
			for k, v := range p.Metadata {
				switch k {
				case "uid", "resourceVersion":
				case "annotations":
					var ann map[string]any
					if json.Unmarshal(v, &ann) != nil || len(ann) == 0 {
						ok = false
					}
					for a := range ann {
						if !strings.HasPrefix(a, "pvc-janitor.io/") {
							ok = false
						}
					}
				default: // labels above all
					ok = false
				}
			}
			if !ok {
				bad = append(bad, line)
				continue
			}
			patches++
		default:
			bad = append(bad, line)
		}
	}
	return bad, patches
}

// TestMarksOnlyPreviewShowsWhatRunWouldDo is docs/spec.md#marks-only on the
// stack it runs on (the contract suite runs it on v1.35.4, which has no
// Unused condition, and on the default one): a claim nobody uses, never
// marked, is Grace on the first `run --marks-only`; that run writes its
// orphaned-since mark, so once --grace-period has passed the next one
// lists it as what `run` would rescue, beside the rescued claim it would
// reap. Every request either run sent, recorded with its body on its way
// to the real API server, is a merge patch of pvc-janitor.io/ annotations
// on a claim or a request on the Lease: no label, Event, snapshot or
// delete.
func TestMarksOnlyPreviewShowsWhatRunWouldDo(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	labels := func(ws string) map[string]string {
		return map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": ws}
	}
	// ws-r: rescued by an acting snapshot of it alone, before the preview.
	orphan(t, f, ns, "ws-r", "r", "")
	if code, out, stderr := run(t, "snapshot", "-n", ns, "-l", wsSel+",workspace=r", "--workspace-label", "workspace",
		"--min-age", "0s", "--grace-period", "0s", "-o", "json", "--lock-namespace", ns); code != 0 {
		t.Fatalf("snapshot of ws-r: exit %d: %s\n%s", code, out, lastLines(stderr, 10))
	}
	// ws-a: nobody uses it and no run has marked it.
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a", Labels: labels("a")}); err != nil {
		t.Fatal(err)
	}
	// ws-b: in use.
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-b", Labels: labels("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}}); err != nil {
		t.Fatal(err)
	}
	snapsBefore := len(snapshots(t, f, ns))
	eventsBefore := janitorEvents(t, f, ns)

	rec, kc := startWriteRecorder(t)
	const grace = 3 * time.Second
	preview := func(command string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		args := []string{command, "--marks-only", "-n", ns, "-l", wsSel, "--workspace-label", "workspace",
			"--min-age", "0s", "--grace-period", grace.String(), "-o", "json",
			"--lock-namespace", ns, "--kubeconfig", kc, "--log-format", "json"}
		if command == "run" {
			args = append(args, "--max-deletion-percent", "100") // one claim of three
		}
		code := runWith(args, &out, &errOut)
		if code != 0 {
			t.Fatalf("%s --marks-only: exit %d: %s\n%s", command, code, out.String(), lastLines(errOut.String(), 10))
		}
		var r map[string]any
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("report is not JSON: %v\n%s", err, out.String())
		}
		if r["dryRun"] != true || r["marksOnly"] != true {
			t.Errorf("report dryRun %v marksOnly %v, want both true", r["dryRun"], r["marksOnly"])
		}
		return r
	}
	claimOf := func(r map[string]any, name string) (state, action string) {
		t.Helper()
		cs, _ := r["claims"].([]any)
		for _, c := range cs {
			m, _ := c.(map[string]any)
			if m["name"] == name {
				s, _ := m["state"].(string)
				a, _ := m["action"].(string)
				return s, a
			}
		}
		t.Fatalf("claim %s not in the report", name)
		return "", ""
	}

	first := preview("run")
	cl, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, marked := cl.Annotations[inventory.AnnotationOrphanedSince]
	if !marked {
		t.Fatalf("ws-a has no %s after run --marks-only: its grace period never starts without the Unused condition (state %v)",
			inventory.AnnotationOrphanedSince, first["claims"])
	}
	if _, ok := cl.Labels[inventory.LabelPhase]; ok {
		t.Errorf("run --marks-only labelled ws-a %s=%s", inventory.LabelPhase, cl.Labels[inventory.LabelPhase])
	}
	since, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		t.Fatal(err)
	}
	if !env.UnusedCondition() {
		if st, _ := claimOf(first, "ws-a"); st != "Grace" {
			t.Errorf("ws-a on the first preview: %s, want Grace (just marked)", st)
		}
	}
	// The grace period passes on the API server's clock (this host's).
	time.Sleep(time.Until(since.Add(grace + time.Second)))

	second := preview("run")
	if st, act := claimOf(second, "ws-a"); st != "Orphaned" || act != rescue.ActionWould {
		t.Errorf("ws-a on the second preview: %s %q, want Orphaned %q (run would rescue it)", st, act, rescue.ActionWould)
	}
	if st, act := claimOf(second, "ws-r"); st != "Rescued" || act != reap.ActionWould {
		t.Errorf("ws-r: %s %q, want Rescued %q (run would reap it)", st, act, reap.ActionWould)
	}
	if st, act := claimOf(second, "ws-b"); st != "InUse" || act != "" {
		t.Errorf("ws-b: %s %q, want InUse and no action", st, act)
	}

	// scan --marks-only writes no more than run's.
	if st, _ := claimOf(preview("scan"), "ws-a"); st != "Orphaned" {
		t.Errorf("ws-a on scan --marks-only: %s, want Orphaned", st)
	}

	bad, patches := marksOnlyViolations(rec.recorded(), ns)
	for _, b := range bad {
		t.Errorf("run --marks-only sent a write beyond its marks and Lease: %s", b)
	}
	if patches == 0 {
		t.Errorf("no mark was patched: the check above proved nothing")
	}
	if n := len(snapshots(t, f, ns)); n != snapsBefore {
		t.Errorf("%d snapshots after the previews, %d before", n, snapsBefore)
	}
	if ev := janitorEvents(t, f, ns); !maps.Equal(ev, eventsBefore) {
		t.Errorf("the janitor's Events after the previews %v, before %v", ev, eventsBefore)
	}
	for _, name := range []string{"ws-a", "ws-b", "ws-r"} {
		if !exists(t, f, ns, name) {
			t.Errorf("%s is gone after the previews", name)
		}
	}
}

// lastLines is the tail of a command's log, for a failure message.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
