//go:build integration

package examplestest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestCronJobActSwitch checks the comment on how to make the CronJob act:
// dry-run: false in the ConfigMap together with --yes works; either change
// alone is refused with exit 2 before anything is read or written.
func TestCronJobActSwitch(t *testing.T) {
	cmFile, text, cj := cronJobConfig(t)
	if !strings.Contains(text, "dry-run: true") || !strings.Contains(text, "TO ACT") {
		t.Fatal("the ConfigMap must start with dry-run: true and say how to act")
	}
	raw, _ := readFileString(example(t, "cronjob.yaml"))
	if !strings.Contains(raw, "# - --yes") {
		t.Error("the CronJob's args must show the --yes to uncomment")
	}
	args := withoutConfig(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[1:])
	if slices.Contains(args, "--yes") || slices.Contains(args, "-y") {
		t.Fatalf("the CronJob already runs with --yes: %q", args)
	}

	acting := filepath.Join(t.TempDir(), "acting.yaml")
	if err := os.WriteFile(acting, []byte(strings.Replace(text, "dry-run: true", "dry-run: false", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Both changes: the janitor acts.
	cfg, err := loadConfig(t, acting, config.CommandRun, append(args, "--yes")...)
	if err != nil || cfg.DryRun || !cfg.Yes {
		t.Fatalf("dry-run: false with --yes: %v (dry-run %t yes %t)", err, cfg != nil && cfg.DryRun, cfg != nil && cfg.Yes)
	}
	// --yes alone: refused by the loader.
	if _, err := loadConfig(t, cmFile, config.CommandRun, append(args, "--yes")...); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("--yes with dry-run: true: want a refusal, got %v", err)
	}
	// dry-run: false alone: the janitor refuses without a terminal, exit 2.
	r := run(t, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, janitorBin(t),
		append([]string{"run", "--config", acting, "--kubeconfig", env.Kubeconfig}, args...)...)
	if r.code != 2 {
		t.Errorf("dry-run: false without --yes: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
}
