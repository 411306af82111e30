package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/msgtmpl"
	"github.com/pvc-janitor/pvc-janitor/internal/notify/message"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func route(name string, nss []string, sel, format, tmpl string) config.Route {
	r := config.Route{Name: name, Namespaces: nss, Format: format}
	r.Sel, _ = labels.Parse(sel)
	if tmpl != "" {
		var err error
		if r.Tmpl, err = msgtmpl.Parse(name, tmpl, message.Schema); err != nil {
			panic(err)
		}
	}
	return r
}

func testReport() *report.Report {
	r := report.New("run", false, "prod", time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	r.Claims = []*report.ClaimEntry{
		{Namespace: "a", Name: "ws-1", State: "Orphaned", Action: "marked", Labels: map[string]string{"owner": "alice"}},
		{Namespace: "a", Name: "ws-2", State: "Rescued", Action: "deleted", Labels: map[string]string{"owner": "alice", "team": "x"}},
		{Namespace: "a", Name: "ws-3", State: "Rescued", Action: "reap-skipped", Labels: map[string]string{"owner": "alice"}},
		{Namespace: "a", Name: "ws-4", State: "InUse", Labels: map[string]string{"owner": "bob"}},
		{Namespace: "a", Name: "ws-6", State: "InUse", Action: "marked", Labels: map[string]string{"owner": "bob"}}, // used again: marks removed
		{Namespace: "b", Name: "ws-5", State: "Orphaned", Action: "snapshot-created", Labels: map[string]string{"team": "x"}},
	}
	return r
}

// TestMessages: per route, one message per owner (the owner label's value,
// else the namespace) with the claims this run acted on; quiet actions
// and owners with nothing new get none; namespaces and selectors narrow a
// route.
func TestMessages(t *testing.T) {
	routes := []config.Route{route("all", nil, "", "slack", ""), route("team-x", nil, "team=x", "json", ""), route("ns-b", []string{"b"}, "", "slack", "")}
	got := map[string][]string{}
	for _, m := range Messages(testReport(), routes, "owner") {
		for _, c := range m.Claims {
			got[m.Route+"/"+m.Owner] = append(got[m.Route+"/"+m.Owner], c.Name)
		}
	}
	want := map[string][]string{"all/alice": {"ws-1", "ws-2"}, "all/b": {"ws-5"}, "team-x/alice": {"ws-2"}, "team-x/b": {"ws-5"}, "ns-b/b": {"ws-5"}}
	if len(got) != len(want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
	for k, v := range want {
		if strings.Join(got[k], ",") != strings.Join(v, ",") {
			t.Errorf("%s: %v, want %v", k, got[k], v)
		}
	}
	// Without an owner label every claim's owner is its namespace.
	for _, m := range Messages(testReport(), routes[:1], "") {
		if m.Owner != "a" && m.Owner != "b" {
			t.Errorf("owner %q without an owner label, want the namespace", m.Owner)
		}
	}
}

func TestBodies(t *testing.T) {
	m := Messages(testReport(), []config.Route{route("all", nil, "", "", "")}, "owner")[0]
	for _, tc := range []struct {
		r    config.Route
		want string
	}{
		{route("s", nil, "", "slack", ""), `"text":"*pvc-janitor run on prod: 2 of alice's claims*\na/ws-1: Orphaned, marked`},
		{route("t", nil, "", "teams", ""), `"@type":"MessageCard"`},
		{route("j", nil, "", "json", ""), `"owner":"alice","cluster":"prod","command":"run","dryRun":false,"claims":[{"namespace":"a","name":"ws-1"`},
		{route("x", nil, "", "template", "{{.Owner}}:{{range .Claims}} {{.Name}}={{.Action}}{{end}}"), "alice: ws-1=marked ws-2=deleted"},
	} {
		b, err := Body(&tc.r, m)
		if err != nil || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s (%v), want %s", tc.r.Format, b, err, tc.want)
		}
	}
	if _, err := msgtmpl.Parse("x", "{{.Nope}}", message.Schema); err == nil || !strings.Contains(err.Error(), `no field "Nope"`) {
		t.Errorf("template on a missing field: %v", err)
	}
}

// TestSendRoutesRetriesAndReports: a 503 is retried until it succeeds; a
// webhook that keeps failing is reported by route and owner, without its
// URL; a 400 is not retried.
func TestSendRoutesRetriesAndReports(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		var v map[string]any
		if json.Unmarshal(b, &v) != nil {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		switch {
		case r.URL.Path == "/flaky" && n < 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/down":
			w.WriteHeader(http.StatusBadGateway)
		case r.URL.Path == "/bad":
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	routes := []config.Route{route("flaky", nil, "", "slack", ""), route("down", []string{"b"}, "", "slack", ""), route("bad", []string{"b"}, "", "json", "")}
	routes[0].Webhook, routes[1].Webhook, routes[2].Webhook = srv.URL+"/flaky", srv.URL+"/down", srv.URL+"/bad"
	msgs := Messages(testReport(), routes, "owner")
	err := SendRoutes(context.Background(), srv.Client(), routes, msgs, 3*time.Second)
	if err == nil || !strings.Contains(err.Error(), `route "down", owner "b": post to the route's webhook: HTTP 502`) ||
		!strings.Contains(err.Error(), `route "bad", owner "b"`) || strings.Contains(err.Error(), srv.URL) {
		t.Errorf("error %v: want route down and bad named, no URL", err)
	}
	if strings.Contains(err.Error(), `route "flaky"`) || hits["/flaky"] != 4 || hits["/down"] < 2 || hits["/bad"] != 1 {
		t.Errorf("hits %v: want flaky retried to success (3 tries for alice, 1 for b), down retried, bad tried once", hits)
	}
}

// TestTemplatesAgreeWithTextTemplate: a template within msgtmpl's language
// renders as Go's text/template renders it over the Message itself (times
// aside: msgtmpl prints them as RFC 3339), so that route templates written
// for text/template keep working.
func TestTemplatesAgreeWithTextTemplate(t *testing.T) {
	m := Messages(testReport(), []config.Route{route("all", nil, "", "", "")}, "owner")[0]
	m.Claims[0].Capacity, m.Claims[0].Snapshot = 1<<30, "ws-1-rescue-1a2b3c4d5e"
	for _, text := range []string{
		"{{.Owner}}:{{range .Claims}} {{.Name}}={{.Action}}{{end}}",
		`{"owner":"{{.Owner}}","claims":"{{range $i, $c := .Claims}}{{if $i}},{{end}}{{$c.Name}}={{$c.Action}}{{end}}"}`,
		`{"owner":"{{.Owner}}","claims":{{len .Claims}}}`,
		"{{.Route}} {{.Cluster}} {{.Command}} {{if .DryRun}}dry{{else}}real{{end}}",
		"{{range .Claims}}{{.Namespace}}/{{.Name}} {{.State}} {{.Reason}} {{.Capacity}} {{if .Snapshot}}{{.Snapshot}}{{else}}-{{end}}\n{{end}}",
		"{{range $c := .Claims}}{{$.Owner}}:{{$c.Name}} {{end}}",
		"{{- range .Claims }} {{ .Name -}} ! {{ end -}}",
	} {
		want := new(strings.Builder)
		if err := template.Must(template.New("x").Option("missingkey=error").Parse(text)).Execute(want, m); err != nil {
			t.Fatalf("text/template %s: %v", text, err)
		}
		tp, err := msgtmpl.Parse("x", text, message.Schema)
		if err != nil {
			t.Errorf("msgtmpl %s: %v", text, err)
			continue
		}
		got := new(strings.Builder)
		if err := tp.Execute(got, message.Data(m)); err != nil || got.String() != want.String() {
			t.Errorf("%s:\nmsgtmpl       %q (%v)\ntext/template %q", text, got.String(), err, want.String())
		}
	}
}
