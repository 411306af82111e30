package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func sample() *report.Report {
	r := &report.Report{Command: "run", Cluster: "prod"}
	r.Summary.Claims, r.Summary.SnapshotsCreated, r.Summary.ClaimsDeleted = 10, 2, 1
	r.Summary.States = map[string]int{"Rescued": 3, "InUse": 7}
	return r
}

func TestPostSendsSlackCompatibleText(t *testing.T) {
	var got map[string]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		_ = json.Unmarshal(b, &got)
	}))
	defer srv.Close()
	if err := Post(context.Background(), nil, srv.URL+"/hooks/T000/B000/XXXX", sample(), nil); err != nil {
		t.Fatal(err)
	}
	text := got["text"]
	for _, want := range []string{"*pvc-janitor run* on `prod` acted", "2 snapshots created, 1 claims deleted, 0 failures, 10 claims in scope", "states: InUse 7, Rescued 3"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestErrorsNeverCarryTheURL(t *testing.T) {
	secret := "http://127.0.0.1:1/hooks/T000/B000/SECRET"
	err := Post(context.Background(), nil, secret, sample(), nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "127.0.0.1:1/hooks") {
		t.Fatalf("error %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	err = Post(context.Background(), nil, srv.URL+"/SECRET", sample(), nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("error %v", err)
	}
	if err := Validate("ftp://x/SECRET"); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("validate: %v", err)
	}
}

func TestDue(t *testing.T) {
	quiet := &report.Report{}
	if Due(quiet, nil) {
		t.Error("a run that did nothing is not worth a message")
	}
	if !Due(quiet, errors.New("boom")) || !Due(sample(), nil) {
		t.Error("failed or acting runs must notify")
	}
	failed := &report.Report{}
	failed.Summary.Failures = 1
	if !Due(failed, nil) {
		t.Error("failures must notify")
	}
}

// TestTextFleetNamesEachCluster: a fleet run's message has a line per
// cluster, its context, exit code and error.
func TestTextFleetNamesEachCluster(t *testing.T) {
	r := sample()
	r.Cluster = "west,east"
	west := r.Summary
	r.Clusters = []report.ClusterBlock{{Name: "west", Summary: &west}, {Name: "east", ExitCode: 1, Error: "connection refused"}}
	text := Text(r, errors.New("1 of 2 clusters failed"))
	for _, want := range []string{"on `west,east` needs attention", "cluster `west`: exit 0, 2 snapshots created",
		"cluster `east`: exit 1, error: connection refused"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}
