package fleet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

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

// TestRunBoundsConcurrencyAndKeepsOrder runs in a synctest bubble: once
// every goroutine of the run is blocked (synctest.Wait), the runs that
// started are all that Run let start while the first ones ran, whatever
// the machine's load. Exactly the bound (2 of 5) must have started; then
// all finish, and the results come back in the contexts' order.
func TestRunBoundsConcurrencyAndKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		names := []string{"a", "b", "c", "d", "e"}
		var mu sync.Mutex
		running, started, peak := 0, 0, 0
		release := make(chan struct{})
		var res []Result[string]
		done := make(chan struct{})
		go func() {
			defer close(done)
			res = Run(context.Background(), names, 2, func(_ context.Context, name string) (string, error) {
				mu.Lock()
				running++
				started++
				peak = max(peak, running)
				mu.Unlock()
				<-release
				mu.Lock()
				running--
				mu.Unlock()
				if name == "c" {
					return "", errors.New("unreachable")
				}
				return "ok " + name, nil
			})
		}()
		synctest.Wait() // the started runs wait on release, Run on a free slot
		mu.Lock()
		if started != 2 {
			t.Errorf("%d of %d runs started while the first ones ran, want exactly 2 (the bound)", started, len(names))
		}
		mu.Unlock()
		close(release)
		<-done
		if peak != 2 || started != len(names) {
			t.Errorf("%d ran at once, %d in all; want 2 at once, %d", peak, started, len(names))
		}
		for i, r := range res {
			if r.Context != names[i] {
				t.Errorf("result %d is %s, want %s", i, r.Context, names[i])
			}
			if (r.Err != nil) != (names[i] == "c") || (r.Err == nil && r.Value != "ok "+names[i]) {
				t.Errorf("%s: %q, %v", r.Context, r.Value, r.Err)
			}
		}
	})
}
