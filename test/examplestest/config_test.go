//go:build integration

package examplestest

import (
	"slices"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestCronJobActSwitch checks the comment on how to make the CronJob act:
// it starts in the preview (--marks-only, docs/spec.md#marks-only), and
// --yes in its place acts; both together, or neither without a terminal,
// are refused with exit 2 before anything is read or written.
func TestCronJobActSwitch(t *testing.T) {
	cmFile, _, cj := cronJobConfig(t)
	raw, _ := readFileString(example(t, "cronjob.yaml"))
	if !strings.Contains(raw, "TO ACT: replace it by --yes") {
		t.Error("the CronJob's args must say how to act")
	}
	args := withoutConfig(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[1:])
	if !slices.Equal(args, []string{"--marks-only"}) {
		t.Fatalf("the CronJob runs with %q, want the preview (--marks-only) alone", args)
	}
	// The preview.
	cfg, err := loadConfig(t, cmFile, config.CommandRun, args...)
	if err != nil || !cfg.DryRun || !cfg.MarksOnly || cfg.Yes {
		t.Fatalf("--marks-only: %v (dry-run %t marks-only %t yes %t)", err, cfg != nil && cfg.DryRun, cfg != nil && cfg.MarksOnly, cfg != nil && cfg.Yes)
	}
	// --yes in its place: the janitor acts.
	cfg, err = loadConfig(t, cmFile, config.CommandRun, "--yes")
	if err != nil || cfg.DryRun || cfg.MarksOnly || !cfg.Yes {
		t.Fatalf("--yes: %v (dry-run %t marks-only %t yes %t)", err, cfg != nil && cfg.DryRun, cfg != nil && cfg.MarksOnly, cfg != nil && cfg.Yes)
	}
	// --yes beside it: refused by the loader.
	if _, err := loadConfig(t, cmFile, config.CommandRun, append(args, "--yes")...); err == nil || !strings.Contains(err.Error(), "mutually exclusive") {
		t.Errorf("--yes with --marks-only: want a refusal, got %v", err)
	}
	// Neither: the janitor refuses without a terminal, exit 2.
	r := run(t, []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, janitorBin(t),
		"run", "--config", cmFile, "--kubeconfig", env.Kubeconfig)
	if r.code != 2 {
		t.Errorf("neither --marks-only nor --yes: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
}
