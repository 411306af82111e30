//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestNotifyRoutes (issue 28): a test webhook on loopback receives one
// templated message per owner with the claims it owns, per route (a
// namespace route with a template, a selector route in JSON); a run where
// nothing changed sends none; a webhook that keeps failing is logged by
// route and owner (never its URL) and leaves the run's result intact.
func TestNotifyRoutes(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	var mu sync.Mutex
	got := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], string(b))
		mu.Unlock()
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	for _, c := range []struct{ name, owner, team string }{{"ws-a1", "alice", ""}, {"ws-a2", "alice", ""}, {"ws-b1", "bob", "b"}} {
		labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": c.name, "owner": c.owner}
		if c.team != "" {
			labels["team"] = c.team
		}
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: c.name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		idle(t, f, ns, c.name)
	}
	cfg := filepath.Join(t.TempDir(), "janitor.yaml")
	routes := `notify-routes:
  - name: all
    namespaces: [` + ns + `]
    webhook-env: HOOK_ALL
    format: template
    template: '{"owner":"{{.Owner}}","claims":"{{range $i, $c := .Claims}}{{if $i}},{{end}}{{$c.Name}}={{$c.Action}}{{end}}"}'
  - name: team-b
    selector: team=b
    webhook-env: HOOK_TEAM_B
    format: json
  - name: down
    webhook-env: HOOK_DOWN
`
	if err := os.WriteFile(cfg, []byte(routes), 0o644); err != nil {
		t.Fatal(err)
	}
	hooks := map[string]string{"HOOK_ALL": srv.URL + "/all", "HOOK_TEAM_B": srv.URL + "/team-b", "HOOK_DOWN": srv.URL + "/down"}
	scan := func() (int, string, string) {
		var out, errOut bytes.Buffer
		args := []string{"scan", "-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s", "--grace-period", "0s",
			"--owner-label", "owner", "--notify-retry-time", "2s", "--config", cfg, "-o", "json", "--kubeconfig", env.Kubeconfig, "--log-format", "json"}
		code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
			LookupEnv: func(k string) (string, bool) { v, ok := hooks[k]; return v, ok }})
		return code, out.String(), errOut.String()
	}
	code, out, stderr := scan()
	if code != 0 || len(parse(t, out).Claims) != 3 {
		t.Fatalf("scan with a failing route: exit %d, want 0 and the whole report\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, `route \"down\", owner \"alice\": post to the route's webhook: HTTP 500`) || strings.Contains(stderr, srv.URL) {
		t.Errorf("the failing route is not logged by route and owner, or its URL leaked:\n%s", stderr)
	}
	mu.Lock()
	var all []string
	for _, b := range got["/all"] {
		var m struct{ Owner, Claims string }
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("templated message %q: %v", b, err)
		}
		all = append(all, m.Owner+":"+m.Claims)
	}
	sort.Strings(all)
	if strings.Join(all, " ") != "alice:ws-a1=marked,ws-a2=marked bob:ws-b1=marked" {
		t.Errorf("route all: %v, want one message per owner with their claims", all)
	}
	if len(got["/team-b"]) != 1 || !strings.Contains(got["/team-b"][0], `"owner":"bob"`) || !strings.Contains(got["/team-b"][0], `"name":"ws-b1"`) ||
		strings.Contains(got["/team-b"][0], "ws-a1") {
		t.Errorf("route team-b: %q, want bob's message about ws-b1 only", got["/team-b"])
	}
	if len(got["/down"]) < 2 {
		t.Errorf("the failing webhook got %d posts, want retries", len(got["/down"]))
	}
	before := len(got["/all"]) + len(got["/team-b"])
	mu.Unlock()

	// Nothing changed: no message.
	if code, out, stderr := scan(); code != 0 {
		t.Fatalf("second scan: exit %d\n%s\n%s", code, out, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if after := len(got["/all"]) + len(got["/team-b"]); after != before {
		t.Errorf("a scan that changed nothing sent %d messages", after-before)
	}
}
