//go:build integration

package charttest_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestLeaseIsAManualRunsLease (docs/spec.md#run-lease): with the chart's
// default values and a manual run's default flags, the CronJob and the
// manual run take the same Lease, so that one of them exits 5 while the
// other acts: the rendered configuration's lock-namespace is the one the
// janitor takes without --lock-namespace, whatever the release namespace,
// and the chart's Lease Role grants the Lease there. (Exclusion itself,
// two runs with one Lease, is TestLease* in internal/lock and the runs
// test of docs/operations.md.)
func TestLeaseIsAManualRunsLease(t *testing.T) {
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	config.Register(fs)
	if err := fs.Parse([]string{"--selector", "app=ide", "--dry-run"}); err != nil {
		t.Fatal(err)
	}
	manual, err := config.Load(fs, config.CommandRun, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for _, releaseNS := range []string{"pvc-janitor", "platform-tools"} {
		r := render(t, "pvc-janitor", releaseNS, nil, "config.selector=app=ide")
		cj := r.CronJob(t)
		chart := loadConfig(t, r.ConfigFile(t), cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args)
		if chart.LockNamespace != manual.LockNamespace {
			t.Errorf("release in %s: the CronJob's Lease is in %q, a manual run's in %q: they would not exclude each other",
				releaseNS, chart.LockNamespace, manual.LockNamespace)
		}
		_, roles := r.Roles(t)
		granted := false
		for _, role := range roles {
			if strings.HasSuffix(role.Name, "-lock") && role.Namespace == chart.LockNamespace {
				granted = true
			}
		}
		if !granted {
			t.Errorf("release in %s: no Lease Role pvc-janitor-lock in the lock namespace %q", releaseNS, chart.LockNamespace)
		}
	}
}
