//go:build integration

package charttest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var (
	env *testenv.Cluster
	// work holds what the package builds once: helm's home folders and
	// the janitor binary. Removed after the tests.
	work string
)

func TestMain(m *testing.M) {
	var err error
	if work, err = os.MkdirTemp("", "pvc-janitor-charttest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := testenv.RunMain(m, &env)
	_ = os.RemoveAll(work)
	os.Exit(code)
}

// JanitorVersion is linked into the janitor binary the tests build.
const JanitorVersion = "v0.0.0-charttest"

func root(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func chartDir(t testing.TB) string { return filepath.Join(root(t), "charts", "pvc-janitor") }

// ciValues returns every charts/pvc-janitor/ci/*-values.yaml.
func ciValues(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci/*-values.yaml: %v", err)
	}
	sort.Strings(files)
	return files
}

func ciName(file string) string { return strings.TrimSuffix(filepath.Base(file), "-values.yaml") }

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBin returns the pinned Helm, building it into the cache the first
// time (scripts/chart/build-helm.sh; about a minute, then cached).
func helmBin(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(root(t), "scripts", "chart", "build-helm.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("build helm: %w", err)
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// helm runs the pinned Helm with its home folders in the package's work
// folder and no cluster access; it returns stdout and stderr.
func helm(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	home := filepath.Join(work, "helm")
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + home,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
		"KUBECONFIG=" + filepath.Join(home, "no-kubeconfig"),
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// Rendered is the output of helm template.
type Rendered struct {
	YAML    string
	Objects []*unstructured.Unstructured
}

// render runs helm template for release in namespace with the values
// files and --set flags, and fails the test on a render error.
func render(t testing.TB, release, namespace string, values []string, sets ...string) *Rendered {
	t.Helper()
	out, stderr, err := renderErr(t, release, namespace, values, sets...)
	if err != nil {
		t.Fatalf("helm template %s: %v: %s", strings.Join(values, " "), err, stderr)
	}
	return out
}

func renderErr(t testing.TB, release, namespace string, values []string, sets ...string) (*Rendered, string, error) {
	t.Helper()
	args := []string{"template", release, chartDir(t), "--namespace", namespace}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, stderr, err := helm(t, args...)
	if err != nil {
		return nil, stderr, err
	}
	r := &Rendered{YAML: out}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode helm template output: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		r.Objects = append(r.Objects, &unstructured.Unstructured{Object: m})
	}
	return r, stderr, nil
}

// Kind returns the objects of a kind.
func (r *Rendered) Kind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.Objects {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// YAMLOf returns the objects of the kinds as one multi-document YAML.
func (r *Rendered) YAMLOf(t testing.TB, kinds ...string) string {
	t.Helper()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	var b strings.Builder
	for _, o := range r.Objects {
		if !want[o.GetKind()] {
			continue
		}
		data, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.String()
}

func convert[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return &v
}

// CronJob returns the one CronJob.
func (r *Rendered) CronJob(t testing.TB) *batchv1.CronJob {
	t.Helper()
	cjs := r.Kind("CronJob")
	if len(cjs) != 1 {
		t.Fatalf("want one CronJob, got %d", len(cjs))
	}
	return convert[batchv1.CronJob](t, cjs[0])
}

// ConfigFile returns the janitor configuration in the one ConfigMap.
func (r *Rendered) ConfigFile(t testing.TB) string {
	t.Helper()
	var cfgs []string
	for _, o := range r.Kind("ConfigMap") {
		if cfg, ok := convert[corev1.ConfigMap](t, o).Data["config.yaml"]; ok {
			cfgs = append(cfgs, cfg)
		}
	}
	if len(cfgs) != 1 {
		t.Fatalf("want one ConfigMap with a config.yaml, got %d", len(cfgs))
	}
	return cfgs[0]
}

// Roles returns every rule-holding object: ClusterRoles and Roles.
func (r *Rendered) Roles(t testing.TB) (cluster []*rbacv1.ClusterRole, ns []*rbacv1.Role) {
	t.Helper()
	for _, o := range r.Kind("ClusterRole") {
		cluster = append(cluster, convert[rbacv1.ClusterRole](t, o))
	}
	for _, o := range r.Kind("Role") {
		ns = append(ns, convert[rbacv1.Role](t, o))
	}
	return cluster, ns
}

// kubectl runs the local cluster's kubectl with a kubeconfig, stdin and
// arguments.
func kubectl(t testing.TB, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Bin.Kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(work, "kubectl-home")}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	janitorOnce sync.Once
	janitorPath string
	janitorErr  error
)

// janitorBin builds the janitor once for the package, with JanitorVersion
// linked in.
func janitorBin(t testing.TB) string {
	t.Helper()
	janitorOnce.Do(func() {
		dir := filepath.Join(work, "bin")
		janitorPath = filepath.Join(dir, "janitor")
		cmd := exec.Command("go", "build", "-trimpath", "-o", janitorPath,
			"-ldflags", "-X github.com/pvc-janitor/pvc-janitor/internal/version.Version="+JanitorVersion,
			"./cmd/janitor")
		cmd.Dir = root(t)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			janitorErr = fmt.Errorf("build janitor: %w: %s", err, out)
		}
	})
	if janitorErr != nil {
		t.Fatal(janitorErr)
	}
	return janitorPath
}

// runJanitor runs the janitor binary with a clean environment (no
// KUBECONFIG, no JANITOR_*, a HOME without a kubeconfig) and returns its
// exit code, stdout and stderr.
func runJanitor(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, janitorBin(t), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	default:
		t.Fatalf("run janitor %s: %v", strings.Join(args, " "), err)
		return -1, "", ""
	}
}
