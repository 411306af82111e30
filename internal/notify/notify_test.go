package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
	err := postWithin(context.Background(), nil, secret, sample(), nil, 0)
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "127.0.0.1:1/hooks") {
		t.Fatalf("error %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	defer srv.Close()
	err = postWithin(context.Background(), nil, srv.URL+"/SECRET", sample(), nil, 0)
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

// TestPostRetriesATransientFailure: the summary is posted by the one retry
// policy of a run's posts (retry.Outbound), as the routes' messages are: a
// 503 is tried again until the webhook takes it, a 400 is not (another try
// would only repeat it). The webhook is an httptest stub on loopback that
// answers each path's first tries with the path's status and counts them.
func TestPostRetriesATransientFailure(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		n := hits[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/flaky" && n < 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path == "/bad":
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	if err := postWithin(context.Background(), srv.Client(), srv.URL+"/flaky", sample(), nil, 10*time.Second); err != nil {
		t.Errorf("503 twice, then 200: %v", err)
	}
	err := postWithin(context.Background(), srv.Client(), srv.URL+"/bad", sample(), nil, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "post to the notify webhook: HTTP 400") {
		t.Errorf("400: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits["/flaky"] != 3 || hits["/bad"] != 1 {
		t.Errorf("tries %v: want flaky 3 (two 503s, then taken), bad 1", hits)
	}
}
