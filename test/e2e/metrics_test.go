//go:build integration

package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMetricsFileAndPushgateway: a run writes its metrics for the textfile
// collector and pushes the same to a Pushgateway, without logging the
// Pushgateway's credentials.
func TestMetricsFileAndPushgateway(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	var mu sync.Mutex
	var pushed []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		mu.Lock()
		pushed = append(pushed, r.Method+" "+r.URL.Path+" "+user+":"+pass+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "janitor.prom")
	gw := strings.Replace(srv.URL, "http://", "http://ops:s3cret@", 1)
	code, out, stderr := run(t, snapArgs(ns, "--metrics-file", file, "--pushgateway", gw, "--log-level", "debug")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, want := range []string{`pvc_janitor_claims{command="snapshot",state="Rescued"} 1`, `pvc_janitor_snapshots_created{command="snapshot"} 1`, "pvc_janitor_last_success_timestamp_seconds"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics file lacks %q:\n%s", want, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pushed) != 1 || !strings.Contains(pushed[0], "ops:s3cret") || !strings.Contains(pushed[0], "/job/pvc-janitor") {
		t.Fatalf("pushes: %q", pushed)
	}
	if strings.Contains(out+stderr, "s3cret") {
		t.Error("the Pushgateway password appears in the output")
	}
	if code, _, _ := run(t, snapArgs(ns, "--pushgateway", "ftp://x")...); code != 2 {
		t.Errorf("a bad --pushgateway: exit %d, want 2", code)
	}
}

// TestNotifyWebhook: a run that acted posts one Slack-compatible message; a
// run that did nothing posts none; the URL never shows in the output.
func TestNotifyWebhook(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	var mu sync.Mutex
	var posts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, string(b))
		mu.Unlock()
	}))
	defer srv.Close()
	hook := srv.URL + "/services/T000/B000/SECRETTOKEN"
	code, out, stderr := run(t, snapArgs(ns, "--notify-webhook", hook, "--log-level", "debug")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out+stderr, "SECRETTOKEN") {
		t.Error("the webhook URL appears in the output")
	}
	// Nothing to do the second time: no message.
	if code, _, stderr := run(t, snapArgs(ns, "--notify-webhook", hook)...); code != 0 {
		t.Fatalf("second run exit %d: %s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || !strings.Contains(posts[0], `"text":"*pvc-janitor snapshot*`) || !strings.Contains(posts[0], "1 snapshots created") {
		t.Fatalf("posts: %q", posts)
	}
}
