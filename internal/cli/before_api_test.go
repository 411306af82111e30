package cli_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// countingServer is an API server on loopback that answers nothing useful
// and counts the requests it got; kubeconfig is a file pointing at it.
func countingServer(t *testing.T) (kubeconfig string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "not a real API server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["x"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["x"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "x", AuthInfo: "x", Namespace: "ws"}
	cfg.CurrentContext = "x"
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, requests
}

// TestRefusedBeforeAnyRequest (issue 39 items 8 and 12;
// docs/spec.md#rule-bad-input): input that no cluster could make right is
// refused with exit 2 and one line before the first request, and a
// setting that came from the config file is named with the file.
func TestRefusedBeforeAnyRequest(t *testing.T) {
	kc, requests := countingServer(t)
	file := filepath.Join(t.TempDir(), "janitor.yaml")
	if err := os.WriteFile(file, []byte("all-namespaces: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the one line
	}{
		{"explain a/b/c", []string{"explain", "a/b/c"}, []string{"explain a/b/c", "more than one /"}},
		{"explain a bad namespace", []string{"explain", "Team_A/ws-1"}, []string{`invalid namespace "Team_A"`}},
		{"restore a bad claim name", []string{"restore", "a/B_bad"}, []string{"restore a/B_bad", `invalid claim name "B_bad"`}},
		{"restore a bad claim name with -n", []string{"restore", "-n", "a", "B_bad"}, []string{`invalid claim name "B_bad"`}},
		{"restore -A from the config file", []string{"restore", "ws/ws-1", "--config", file},
			[]string{"all-namespaces (from config file " + file + ") is not allowed", "-n NAMESPACE overrides it"}},
		{"prune without retention", []string{"prune", "--dry-run"}, []string{"prune needs a retention: --keep-for DURATION, --keep-last N", "nothing was read"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := requests.Load()
			code, out, stderr := runBare(t, append(tc.args, "--kubeconfig", kc))
			if code != 2 || strings.Count(stderr, "\n") != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2, one line, no report", code, out, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if n := requests.Load() - before; n != 0 {
				t.Errorf("%d requests reached the API server before the refusal, want 0", n)
			}
		})
	}
	// -n narrows the file's all-namespaces (flags over the file, as
	// kubectl's): restore goes on to the cluster, which this server
	// refuses, so the run fails later, not on its input.
	before := requests.Load()
	code, _, stderr := runBare(t, []string{"restore", "ws-1", "-n", "ws", "--config", file, "--kubeconfig", kc, "--api-timeout", "1s"})
	if code == 2 || requests.Load() == before {
		t.Errorf("restore -n ws with all-namespaces in the file: exit %d (%q), %d requests; want -n to narrow the file's scope", code, stderr, requests.Load()-before)
	}
}
