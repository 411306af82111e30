//go:build integration

package charttest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubectlPlugin installs the janitor as kubectl-janitor on PATH and runs
// it through the local cluster's kubectl, as krew users will: `kubectl
// janitor version`, and a read-only scan that finds the cluster through
// KUBECONFIG, which kubectl hands to its plugins.
func TestKubectlPlugin(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "kubectl-janitor")
	data, err := os.ReadFile(janitorBin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plugin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, env.Bin.Kubectl, args...)
		cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "KUBECONFIG=" + env.Kubeconfig}
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok {
			t.Logf("kubectl %s: %s", strings.Join(args, " "), ee.Stderr)
		}
		return string(out), err
	}
	out, err := run("janitor", "version")
	if err != nil || !strings.HasPrefix(out, "janitor "+JanitorVersion) {
		t.Fatalf("kubectl janitor version: %v: %q", err, out)
	}
	out, err = run("plugin", "list", "--name-only")
	if err != nil || !strings.Contains(out, "kubectl-janitor") {
		t.Errorf("kubectl plugin list: %v: %q", err, out)
	}
	ns := env.Namespace(t)
	out, err = run("janitor", "scan", "-n", ns, "-l", "app=none", "--dry-run", "-o", "json", "--log-level", "error")
	if err != nil || !strings.Contains(out, `"kind": "Report"`) {
		t.Errorf("kubectl janitor scan: %v: %q", err, out)
	}
}
