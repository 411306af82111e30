package examplestest

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// loadConfig loads a configuration file for command with the janitor's own
// loader, as `janitor <command> --config file args...` would, with an empty
// environment.
func loadConfig(t *testing.T, file, command string, args ...string) (*config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	config.Register(fs)
	if err := fs.Parse(append([]string{"--config", file}, args...)); err != nil {
		t.Fatal(err)
	}
	return config.Load(fs, command, func(string) (string, bool) { return "", false })
}

// cronJobConfig returns the configuration file the example CronJob reads:
// the ConfigMap key that its --config argument names through the volume it
// is mounted from, written to a file; and the CronJob itself.
func cronJobConfig(t *testing.T) (file, text string, cj *batchv1.CronJob) {
	t.Helper()
	objs := readObjects(t, example(t, "cronjob.yaml"))
	cj = one[batchv1.CronJob](t, objs, "CronJob")
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("the CronJob's args %q have no --config FILE", c.Args)
	}
	cfgPath := c.Args[i+1]
	var cmName, key string
	for _, m := range c.VolumeMounts {
		if path.Dir(cfgPath) != path.Clean(m.MountPath) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName, key = v.ConfigMap.Name, path.Base(cfgPath)
			}
		}
	}
	if cmName == "" {
		t.Fatalf("--config %s is not in a mounted ConfigMap", cfgPath)
	}
	var cm *corev1.ConfigMap
	for _, o := range ofKind(objs, "ConfigMap") {
		if o.GetName() == cmName && o.GetNamespace() == cj.Namespace {
			cm = convert[corev1.ConfigMap](t, o)
		}
	}
	if cm == nil {
		t.Fatalf("cronjob.yaml has no ConfigMap %s/%s", cj.Namespace, cmName)
	}
	text, ok := cm.Data[key]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s", cmName, key)
	}
	file = filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, text, cj
}

// TestConfigsLoad loads every janitor configuration of examples/ and the
// one inside cronjob.yaml's ConfigMap with the janitor's loader, for every
// command that takes them: an unknown key, a bad value or a refused
// combination fails here as it would fail the janitor.
func TestConfigsLoad(t *testing.T) {
	files := exampleYAML(t)[kindConfig]
	if len(files) == 0 {
		t.Fatal("no janitor configuration in examples/")
	}
	cmFile, _, cj := cronJobConfig(t)
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, cmd := range []string{config.CommandScan, config.CommandSnapshot, config.CommandReap, config.CommandRun, config.CommandGuard} {
				cfg, err := loadConfig(t, f, cmd)
				if err != nil {
					t.Fatalf("janitor %s --config %s: %v", cmd, f, err)
				}
				if cfg.SelectorString == "" {
					t.Errorf("%s: no selector", cmd)
				}
			}
		})
	}
	t.Run("cronjob.yaml ConfigMap", func(t *testing.T) {
		if args[0] != config.CommandRun {
			t.Fatalf("the CronJob runs %q, want run", args[0])
		}
		cfg, err := loadConfig(t, cmFile, config.CommandRun, withoutConfig(args[1:])...)
		if err != nil {
			t.Fatalf("the CronJob's configuration: %v", err)
		}
		// It starts in the chart's preview (docs/spec.md#marks-only).
		if !cfg.DryRun || !cfg.MarksOnly || cfg.Yes {
			t.Errorf("the CronJob runs with dry-run %t marks-only %t yes %t; it must start in the preview with marks", cfg.DryRun, cfg.MarksOnly, cfg.Yes)
		}
	})
}

// TestExamplesShareTheManualRunsLease (docs/spec.md#run-lease-namespace):
// every configuration of examples/ (and cronjob.yaml's) takes its Lease
// where a manual run with default flags takes it, so that the two exclude
// each other; and the example RBAC grants the Lease there and nowhere else.
func TestExamplesShareTheManualRunsLease(t *testing.T) {
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	config.Register(fs)
	if err := fs.Parse([]string{"-l", "app=ide", "--dry-run"}); err != nil {
		t.Fatal(err)
	}
	manual, err := config.Load(fs, config.CommandRun, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cmFile, _, _ := cronJobConfig(t)
	files := append(exampleYAML(t)[kindConfig], cmFile)
	for _, f := range files {
		cfg, err := loadConfig(t, f, config.CommandRun)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if cfg.LockNamespace != manual.LockNamespace {
			t.Errorf("%s: lock-namespace %q, a manual run's is %q: they would not exclude each other", filepath.Base(f), cfg.LockNamespace, manual.LockNamespace)
		}
	}
	for _, file := range []string{"cronjob.yaml", "rbac-namespaced.yaml"} {
		var where []string
		for _, o := range ofKind(readObjects(t, example(t, file)), "Role") {
			role := convert[rbacv1.Role](t, o)
			for _, rule := range role.Rules {
				if slices.Contains(rule.Resources, "leases") {
					where = append(where, role.Namespace)
					break
				}
			}
		}
		if !slices.Equal(where, []string{manual.LockNamespace}) {
			t.Errorf("%s grants the Lease in %v, want only %q (a manual run's)", file, where, manual.LockNamespace)
		}
	}
}

// withoutConfig drops --config FILE from args (the test passes its own).
func withoutConfig(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--config" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func yamlMap(t *testing.T, name, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestWorkspacePlatformConfig checks what the workspace-platform example is
// for: claims selected by the platform's labels, grouped by the workspace
// id label, and the same settings in the CronJob's ConfigMap.
func TestWorkspacePlatformConfig(t *testing.T) {
	f := example(t, "workspace-platform.yaml")
	cfg, err := loadConfig(t, f, config.CommandRun)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.WorkspaceLabel == "" || !strings.Contains(cfg.SelectorString, "=") {
		t.Errorf("workspace-label %q selector %q: a workspace platform needs both", cfg.WorkspaceLabel, cfg.SelectorString)
	}
	if cfg.DryRun || cfg.Yes {
		t.Error("dry-run and yes belong on the command line (or the CronJob), not in the shared configuration")
	}
	_, text, _ := cronJobConfig(t)
	platform, _ := readFileString(f)
	want := yamlMap(t, "workspace-platform.yaml", platform)
	got := yamlMap(t, "cronjob.yaml ConfigMap", text)
	delete(got, "dry-run")
	if !maps.EqualFunc(got, want, func(a, b any) bool { return yamlString(t, a) == yamlString(t, b) }) {
		t.Errorf("cronjob.yaml's ConfigMap (without dry-run) differs from workspace-platform.yaml:\n%s\nwant:\n%s",
			yamlString(t, got), yamlString(t, want))
	}
}

func yamlString(t *testing.T, v any) string {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
