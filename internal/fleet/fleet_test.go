package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
)

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		codes []int
		want  int
	}{
		{nil, 0},
		{[]int{0, 0}, 0},
		{[]int{0, 4}, 4},
		{[]int{4, 3}, 3},
		{[]int{3, 5}, 5},
		{[]int{5, 1}, 1},
		{[]int{1, 2}, 2},
		{[]int{0, 2, 1, 5, 3, 4}, 2},
		{[]int{0, 42}, 1}, // unknown: a runtime error
		{[]int{2, 130}, 130},
		{[]int{143, 0}, 143},
	} {
		if got := ExitCode(c.codes); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.codes, got, c.want)
		}
	}
}

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
- name: b
  cluster: {server: "https://127.0.0.1:2"}
users:
- name: u
  user: {token: x}
contexts:
- name: west
  context: {cluster: a, user: u}
- name: east
  context: {cluster: b, user: u}
current-context: west
`

func TestContexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		names []string
		all   bool
		want  string
		err   string
	}{
		{nil, false, "", ""},
		{[]string{"east"}, false, "east", ""},
		{[]string{"west,east", "east"}, false, "west,east", ""},
		{nil, true, "east,west", ""},
		{[]string{"north"}, false, "", `context "north" not found in the kubeconfig (it has: east, west)`},
		{[]string{"east"}, true, "", "exclusive"},
	} {
		got, err := Contexts(path, c.names, c.all)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || exitcode.Code(err) != exitcode.Usage {
				t.Errorf("Contexts(%v, %v): %v, want usage error %q", c.names, c.all, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != c.want {
			t.Errorf("Contexts(%v, %v) = %v, %v; want %s", c.names, c.all, got, err, c.want)
		}
	}
}

func TestRunBoundsConcurrencyAndKeepsOrder(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	var now, peak atomic.Int32
	var mu sync.Mutex
	release := make(chan struct{})
	started := make(chan struct{}, len(names))
	go func() {
		// Let two start, check the bound holds, then let all finish.
		<-started
		<-started
		time.Sleep(20 * time.Millisecond)
		close(release)
	}()
	res := Run(context.Background(), names, 2, func(_ context.Context, name string) (string, error) {
		n := now.Add(1)
		mu.Lock()
		if n > peak.Load() {
			peak.Store(n)
		}
		mu.Unlock()
		started <- struct{}{}
		<-release
		now.Add(-1)
		if name == "c" {
			return "", errors.New("unreachable")
		}
		return "ok " + name, nil
	})
	if peak.Load() > 2 {
		t.Errorf("%d ran at once, want at most 2", peak.Load())
	}
	for i, r := range res {
		if r.Context != names[i] {
			t.Errorf("result %d is %s, want %s", i, r.Context, names[i])
		}
		if (r.Err != nil) != (names[i] == "c") || (r.Err == nil && r.Value != "ok "+names[i]) {
			t.Errorf("%s: %q, %v", r.Context, r.Value, r.Err)
		}
	}
}
