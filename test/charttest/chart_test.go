//go:build integration

package charttest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

func TestLint(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(ciName(f), func(t *testing.T) {
			out, stderr, err := helm(t, "lint", chartDir(t), "--strict", "--values", f)
			if err != nil || strings.Contains(out, "[ERROR]") || strings.Contains(out, "[WARNING]") {
				t.Fatalf("helm lint --strict: %v\n%s%s", err, out, stderr)
			}
		})
	}
}

// The defaults lack the one setting nobody can guess: the selector of the
// workspace claims. Rendering them fails with a message that says what to
// set, instead of a CronJob that exits 2 on every schedule.
func TestDefaultsRefuseWithoutSelector(t *testing.T) {
	_, stderr, err := renderErr(t, "r", "janitor", nil)
	if err == nil || !strings.Contains(stderr, "config.selector is required") {
		t.Fatalf("want the selector error, got %v: %s", err, stderr)
	}
	_, stderr, err = renderErr(t, "r", "janitor", nil, "config.all-claims=true")
	if err != nil {
		t.Fatalf("all-claims without a selector: %v: %s", err, stderr)
	}
}

func TestValuesRefusedAtInstallTime(t *testing.T) {
	base := []string{"config.selector=app=ide"}
	for _, tc := range []struct {
		name, set, want string
	}{
		{"misspelt config key", "config.exclude-namespaces={a}", "exclude-namespaces"},
		{"bad duration", "config.min-age=10x", "min-age"},
		{"bad superseded", "config.superseded=maybe", "superseded"},
		{"kubeconfig is not settable", "config.kubeconfig=/x", "kubeconfig"},
		{"dry-run only through dryRun", "config.dry-run=false", "dry-run"},
		{"marks-only only through marksOnly", "config.marks-only=true", "marks-only"},
		{"marksOnly not a boolean", "marksOnly=sometimes", "marksOnly"},
		{"unknown top-level value", "dryrun=false", "dryrun"},
		{"namespaced RBAC needs namespaces", "rbac.namespaced=true", "rbac.namespaced=true needs the namespaces"},
		{"both scopes", "config.namespace={a}", "not both"},
		{"no scope", "config.all-namespaces=false", "config.all-namespaces=true or list"},
		{"keep-for only through retention", "config.keep-for=720h", "keep-for"},
		{"keep-last only through retention", "config.keep-last=3", "keep-last"},
		{"delete-contents only through contents", "config.delete-contents=true", "delete-contents"},
		{"price only through prices", "config.price=gp3=1", "price"},
		{"snapshot-price only through snapshotPrice", "config.snapshot-price=1", "snapshot-price"},
		{"keepFor in days", "retention.keepFor=30d", "keepFor"},
		{"negative keepLast", "retention.keepLast=-1", "keepLast"},
		{"keepLast not a number", "retention.keepLast=three", "keepLast"},
		{"unknown retention key", "retention.keepForever=true", "keepForever"},
		{"contents.delete not a boolean", "contents.delete=yes please", "delete"},
		{"negative price", "prices.gp3=-0.1", "gp3"},
		{"price not a number", "prices.gp3=cheap", "gp3"},
		{"price of a bad class name", "prices.GP3=1", "GP3"},
		{"negative snapshot price", "snapshotPrice=-1", "snapshotPrice"},
		// Every run would refuse these (issue 39 item 11):
		{"clock-skew over 5m", "config.clock-skew=10m", "clock-skew"},
		{"request-timeout 0", "config.request-timeout=0s", "request-timeout"},
		// Alerts on metrics that never reach Prometheus (item 10).
		{"alerts without published metrics", "metrics.prometheusRule.enabled=true", "needs the metrics to reach Prometheus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := renderErr(t, "r", "janitor", nil, append(base, tc.set)...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Fatalf("--set %s: want an error naming %q, got %v: %s", tc.set, tc.want, err, stderr)
			}
		})
	}
}

// TestTemplate renders every ci/*-values.yaml and checks the CronJob and
// its configuration as the janitor itself will read it.
func TestTemplate(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(ciName(f), func(t *testing.T) {
			r := render(t, "ci", "janitor", []string{f})
			cj := r.CronJob(t)
			if cj.Spec.ConcurrencyPolicy != "Forbid" {
				t.Errorf("concurrencyPolicy %q", cj.Spec.ConcurrencyPolicy)
			}
			if cj.Spec.StartingDeadlineSeconds == nil || cj.Spec.SuccessfulJobsHistoryLimit == nil ||
				cj.Spec.FailedJobsHistoryLimit == nil || cj.Spec.JobTemplate.Spec.BackoffLimit == nil {
				t.Error("startingDeadlineSeconds, history limits and backoffLimit must be set")
			}
			pod := cj.Spec.JobTemplate.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("want one container, got %d", len(pod.Containers))
			}
			c := pod.Containers[0]
			checkSecurity(t, pod, c)
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources: %+v", c.Resources)
			}
			sas := r.Kind("ServiceAccount")
			if len(sas) != 1 || sas[0].GetName() != pod.ServiceAccountName {
				t.Errorf("the pod runs as %q, the chart creates %d ServiceAccounts", pod.ServiceAccountName, len(sas))
			}

			cfgText := r.ConfigFile(t)
			var cfgMap map[string]any
			if err := yaml.Unmarshal([]byte(cfgText), &cfgMap); err != nil {
				t.Fatal(err)
			}
			dryRun, _ := cfgMap["dry-run"].(bool)
			preview, marksOnly := ciMode(t, f)
			if dryRun != (preview && !marksOnly) {
				t.Errorf("config dry-run %t for dryRun %t marksOnly %t: only a plain dry run sets it", dryRun, preview, marksOnly)
			}
			deleteContents := ciDeleteContents(t, f)
			wantArgs := []string{"run", "--config", "/etc/pvc-janitor/config.yaml"}
			switch {
			case !preview:
				wantArgs = append(wantArgs, "--yes")
			case marksOnly:
				wantArgs = append(wantArgs, "--marks-only")
			}
			if deleteContents {
				wantArgs = append(wantArgs, "--delete-contents")
			}
			if !slices.Equal(c.Args, wantArgs) {
				t.Errorf("args %q, want %q (dry-run %t)", c.Args, wantArgs, dryRun)
			}
			if cfgMap["lock-namespace"] == nil {
				t.Error("lock-namespace is not set")
			}
			mounted := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/etc/pvc-janitor" && m.ReadOnly {
					mounted = true
				}
			}
			if !mounted {
				t.Error("the configuration is not mounted read-only at /etc/pvc-janitor")
			}

			cfg := loadConfig(t, cfgText, c.Args[1:])
			if cfg.DryRun != preview || cfg.Yes == preview || cfg.MarksOnly != (preview && marksOnly) {
				t.Errorf("loaded dry-run %t marks-only %t yes %t, want dry-run %t marks-only %t", cfg.DryRun, cfg.MarksOnly, cfg.Yes, preview, preview && marksOnly)
			}
			if cfg.DeleteContents != deleteContents {
				t.Errorf("loaded delete-contents %t, want %t (contents.delete)", cfg.DeleteContents, deleteContents)
			}
		})
	}
}

// checkSecurity asserts the security context: non-root, read-only
// root filesystem, every capability dropped, seccomp RuntimeDefault.
func checkSecurity(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("pod and container security contexts must be set")
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("the pod must run as a non-root user")
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("the pod's seccomp profile must be RuntimeDefault")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the root filesystem must be read-only")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("privilege escalation must be off")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities: %+v", sc.Capabilities)
	}
}

// ciMode reads dryRun and marksOnly from a values file, with the chart's
// defaults (both true).
func ciMode(t *testing.T, file string) (dryRun, marksOnly bool) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		DryRun    *bool `yaml:"dryRun"`
		MarksOnly *bool `yaml:"marksOnly"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	dryRun, marksOnly = true, true
	if v.DryRun != nil {
		dryRun = *v.DryRun
	}
	if v.MarksOnly != nil {
		marksOnly = *v.MarksOnly
	}
	return dryRun, marksOnly
}

// TestDefaultIsThePreviewWithMarks (docs/spec.md#marks-only): the chart's
// default values run `janitor run --marks-only`, the preview whose grace
// periods start on every minor, and say so in NOTES; its configuration is
// no plain dry run (which --marks-only refuses beside it) and never --yes.
func TestDefaultIsThePreviewWithMarks(t *testing.T) {
	r := render(t, "r", "janitor", nil, "config.selector=app=ide")
	args := r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	if want := []string{"run", "--config", "/etc/pvc-janitor/config.yaml", "--marks-only"}; !slices.Equal(args, want) {
		t.Fatalf("the default CronJob runs %q, want %q", args, want)
	}
	cfg := loadConfig(t, r.ConfigFile(t), args[1:])
	if !cfg.MarksOnly || !cfg.DryRun || cfg.Yes {
		t.Errorf("the default run loads marks-only %t dry-run %t yes %t, want the preview with marks", cfg.MarksOnly, cfg.DryRun, cfg.Yes)
	}
}

// loadConfig loads a rendered configuration file with the janitor's own
// loader, for `run`, with the CronJob's extra arguments: an unknown key or
// a bad value fails here exactly as it would fail the CronJob.
func loadConfig(t *testing.T, cfgText string, args []string) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	config.Register(fs)
	var m map[string]any
	if err := yaml.Unmarshal([]byte(cfgText), &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if fs.Lookup(k) == nil {
			t.Errorf("the chart renders key %q, which the janitor does not know", k)
		}
	}
	data, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The CronJob's arguments, with the file where this test wrote it.
	var flags []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--config" {
			flags = append(flags, "--config", path)
			i++
			continue
		}
		flags = append(flags, args[i])
	}
	if err := fs.Parse(flags); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, config.CommandRun, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("the janitor refuses the rendered configuration: %v\n%s", err, cfgText)
	}
	return cfg
}

// TestServerSideDryRun applies every rendering to the local control plane
// with a server-side dry run: real schema validation and admission.
func TestServerSideDryRun(t *testing.T) {
	cs := env.Clientset(t)
	installPrometheusRuleCRD(t) // ci/monitoring-values.yaml renders a PrometheusRule
	for _, f := range ciValues(t) {
		t.Run(ciName(f), func(t *testing.T) {
			ns := env.Namespace(t)
			r := render(t, "ci-"+ciName(f), ns, []string{f})
			// Namespaces the values name must exist (they are the
			// operator's); create them once for the package.
			for _, o := range r.Objects {
				if n := o.GetNamespace(); n != "" && n != ns {
					_, err := cs.CoreV1().Namespaces().Create(context.Background(),
						&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
				}
			}
			// The ServiceAccount for real first: admission checks that a
			// pod's (the helm test pod's) account exists.
			if out, err := kubectl(t, env.Kubeconfig, r.YAMLOf(t, "ServiceAccount"), "apply", "-f", "-"); err != nil {
				t.Fatalf("apply the ServiceAccount: %v: %s", err, out)
			}
			out, err := kubectl(t, env.Kubeconfig, r.YAML, "apply", "--server-side", "--dry-run=server", "--field-manager=charttest", "-f", "-")
			if err != nil {
				t.Fatalf("server-side dry run: %v\n%s", err, out)
			}
			lines := strings.Count(strings.TrimSpace(out), "\n") + 1
			if lines != len(r.Objects) || strings.Count(out, "(server dry run)") != len(r.Objects) {
				t.Errorf("want %d objects applied in a dry run, got:\n%s", len(r.Objects), out)
			}
		})
	}
}

// TestNotes renders NOTES.txt (helm template does not) with a client-side
// dry-run install against the local cluster. Helm maps every kind the
// rendering holds, so the PrometheusRule CRD is installed first, as in
// TestServerSideDryRun: each test stands alone.
func TestNotes(t *testing.T) {
	installPrometheusRuleCRD(t) // ci/monitoring-values.yaml renders a PrometheusRule
	for _, f := range ciValues(t) {
		t.Run(ciName(f), func(t *testing.T) {
			ns := env.Namespace(t)
			out, stderr, err := helm(t, "install", "notes", chartDir(t), "--namespace", ns, "--values", f,
				"--dry-run=client", "--kubeconfig", env.Kubeconfig)
			if err != nil {
				t.Fatalf("helm install --dry-run=client: %v: %s", err, stderr)
			}
			_, notes, ok := strings.Cut(out, "NOTES:\n")
			if !ok {
				t.Fatalf("no NOTES in:\n%s", out)
			}
			t.Log(notes)
			r := render(t, "notes", ns, []string{f})
			dry := strings.Contains(r.ConfigFile(t), "dry-run: true")
			marks := slices.Contains(r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, "--marks-only")
			if marks != strings.Contains(notes, "PREVIEW WITH MARKS (marksOnly)") || marks != strings.Contains(notes, "--marks-only") {
				t.Errorf("--marks-only %t, NOTES:\n%s", marks, notes)
			}
			if preview, _ := ciMode(t, f); preview != strings.Contains(notes, "--set dryRun=false") {
				t.Errorf("dryRun %t, but NOTES say otherwise how to let it act:\n%s", preview, notes)
			}
			for _, want := range []string{"create job --from=cronjob/notes-pvc-janitor", "Lease: "} {
				if !strings.Contains(notes, want) {
					t.Errorf("NOTES lack %q:\n%s", want, notes)
				}
			}
			if dry != strings.Contains(notes, "DRY RUN") {
				t.Errorf("dry run %t, NOTES:\n%s", dry, notes)
			}
			if strings.Contains(notes, "<no value>") || strings.Contains(notes, "%!") {
				t.Errorf("NOTES render a missing value:\n%s", notes)
			}
		})
	}
}

// ciDeleteContents reads contents.delete from a values file.
func ciDeleteContents(t *testing.T, file string) bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Contents struct {
			Delete bool `yaml:"delete"`
		} `yaml:"contents"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Contents.Delete
}

// TestRetentionAndPrices: the retention, contents and price values reach
// the janitor as its own loader reads them (keep-for, keep-last,
// --delete-contents, price, snapshot-price), and the defaults set none of
// them: no pruning, no content deleted, no money.
func TestRetentionAndPrices(t *testing.T) {
	load := func(t *testing.T, sets ...string) *config.Config {
		r := render(t, "r", "janitor", nil, append([]string{"config.selector=app=ide"}, sets...)...)
		return loadConfig(t, r.ConfigFile(t), r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[1:])
	}
	t.Run("defaults", func(t *testing.T) {
		cfg := load(t)
		if cfg.KeepFor != 0 || cfg.KeepLast != 0 || cfg.DeleteContents || len(cfg.Prices) != 0 || cfg.SnapshotPrice != "" {
			t.Errorf("keep-for %s keep-last %d delete-contents %t price %q snapshot-price %q, want none set",
				cfg.KeepFor, cfg.KeepLast, cfg.DeleteContents, cfg.Prices, cfg.SnapshotPrice)
		}
		cfg = load(t, "retention.keepFor=0s")
		if cfg.KeepFor != 0 {
			t.Errorf("keepFor 0s: keep-for %s", cfg.KeepFor)
		}
	})
	t.Run("set", func(t *testing.T) {
		cfg := load(t, "retention.keepFor=720h", "retention.keepLast=3", "contents.delete=true",
			"prices.csi-hostpath=0.1", "prices.*=0.08", "snapshotPrice=0.05")
		if cfg.KeepFor != 720*time.Hour || cfg.KeepLast != 3 || !cfg.DeleteContents {
			t.Errorf("keep-for %s keep-last %d delete-contents %t", cfg.KeepFor, cfg.KeepLast, cfg.DeleteContents)
		}
		if !slices.Equal(cfg.Prices, []string{"*=0.08", "csi-hostpath=0.1"}) || cfg.SnapshotPrice != "0.05" {
			t.Errorf("price %q snapshot-price %q", cfg.Prices, cfg.SnapshotPrice)
		}
	})
	t.Run("ci", func(t *testing.T) {
		f := filepath.Join(chartDir(t), "ci", "retention-values.yaml")
		r := render(t, "r", "janitor", []string{f})
		cfg := loadConfig(t, r.ConfigFile(t), r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args[1:])
		if cfg.KeepFor != 720*time.Hour || cfg.KeepLast != 3 || !cfg.DeleteContents || cfg.SnapshotPrice != "0.05" ||
			!slices.Equal(cfg.Prices, []string{"*=0.08", "csi-hostpath=0.1", "fast.ssd.example.com=0.17"}) {
			t.Errorf("keep-for %s keep-last %d delete-contents %t price %q snapshot-price %q",
				cfg.KeepFor, cfg.KeepLast, cfg.DeleteContents, cfg.Prices, cfg.SnapshotPrice)
		}
	})
}

// TestKubeVersions renders the chart for every Kubernetes minor the
// janitor supports (KUBE_VERSIONS in scripts/cluster/versions.sh) and
// checks that the chart's kubeVersion refuses an older one.
func TestKubeVersions(t *testing.T) {
	versions := supportedKubeVersions(t)
	for _, v := range versions {
		for _, f := range ciValues(t) {
			t.Run(v+"/"+ciName(f), func(t *testing.T) {
				out, stderr, err := helm(t, "template", "pvc-janitor", chartDir(t), "--namespace", "pvc-janitor", "--values", f, "--kube-version", v)
				if err != nil {
					t.Fatalf("helm template --kube-version %s: %v: %s", v, err, stderr)
				}
				if !strings.Contains(out, "kind: CronJob") {
					t.Errorf("helm template --kube-version %s rendered no CronJob", v)
				}
			})
		}
	}
	_, stderr, err := helm(t, "template", "pvc-janitor", chartDir(t), "--namespace", "pvc-janitor", "--values", ciValues(t)[0], "--kube-version", "v1.34.9")
	if err == nil || !strings.Contains(stderr, "kubeVersion") {
		t.Errorf("helm template --kube-version v1.34.9 (older than the oldest supported %s): err %v, stderr %q; want a kubeVersion refusal", versions[0], err, stderr)
	}
}

// supportedKubeVersions reads KUBE_VERSIONS from scripts/cluster/versions.sh.
func supportedKubeVersions(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "scripts", "cluster", "versions.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "KUBE_VERSIONS="); ok {
			if f := strings.Fields(strings.Trim(v, `"`)); len(f) > 0 {
				return f
			}
		}
	}
	t.Fatal(`scripts/cluster/versions.sh has no KUBE_VERSIONS="..." line`)
	return nil
}
