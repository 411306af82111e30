//go:build integration

// Package examplestest tests the files in examples/ (it has no code of its
// own) with the tools an operator would use on them: every Kubernetes
// manifest is applied with a server-side dry run to the local control plane
// (real schema validation), every janitor configuration is loaded by the
// janitor's own loader, the plain manifests are compared with what the Helm
// chart renders (RBAC rules, security context, job policy, image version),
// the teardown gate script is linted and run end to end against seeded
// claims, the CI workflow is checked to destroy only after the gate, and
// restore-role.yaml is checked rule by rule and proven: `janitor restore`
// with only the token of an account it binds.
package examplestest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var (
	env *testenv.Cluster
	// work holds what the package builds once (the janitor binary, helm's
	// home folders); removed after the tests.
	work string
)

func TestMain(m *testing.M) {
	var err error
	if work, err = os.MkdirTemp("", "pvc-janitor-examplestest-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The janitor builds while the local cluster starts.
	go buildJanitor()
	code := testenv.RunMain(m, &env)
	<-janitorDone
	_ = os.RemoveAll(work)
	os.Exit(code)
}

// ---------------------------------------------------------------------------
// Tools.

// kubectl runs the local cluster's kubectl against it.
func kubectl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Bin.Kubectl, append([]string{"--kubeconfig", env.Kubeconfig}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Join(work, "kubectl-home")}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helmBin returns the pinned Helm, building it into the cache the first
// time (scripts/chart/build-helm.sh; a cached binary is reused at once).
func helmBin(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(repoRoot(t), "scripts", "chart", "build-helm.sh"))
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

// helmTemplate renders the chart for release pvc-janitor in the namespace
// pvc-janitor (what the plain examples correspond to) with a values file
// holding values, without any cluster access.
func helmTemplate(t testing.TB, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	vf := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(vf, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helmBin(t), "template", "pvc-janitor", chartDir(t),
		"--namespace", "pvc-janitor", "--values", vf)
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
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template with %s: %v: %s", data, err, errOut.String())
	}
	var objs []*unstructured.Unstructured
	for _, o := range objects(t, "helm template", out.Bytes()) {
		// The chart's helm test pod is not part of a release's objects.
		if _, isTest := o.GetAnnotations()["helm.sh/hook"]; isTest {
			continue
		}
		objs = append(objs, o)
	}
	return objs
}

// chartAppVersion returns charts/pvc-janitor/Chart.yaml's appVersion.
func chartAppVersion(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil || c.AppVersion == "" {
		t.Fatalf("Chart.yaml appVersion: %q %v", c.AppVersion, err)
	}
	return c.AppVersion
}

var (
	janitorDone = make(chan struct{})
	janitorPath string
	janitorErr  error
)

// buildJanitor builds ./cmd/janitor into the work folder, once, from
// TestMain (in parallel with the cluster's start).
func buildJanitor() {
	defer close(janitorDone)
	root, err := testenv.RepoRoot()
	if err != nil {
		janitorErr = err
		return
	}
	janitorPath = filepath.Join(work, "bin", "janitor")
	cmd := exec.Command("go", "build", "-o", janitorPath, "./cmd/janitor")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		janitorErr = fmt.Errorf("go build ./cmd/janitor: %w: %s", err, out)
	}
}

// janitorBin waits for the build and returns the binary's path.
func janitorBin(t testing.TB) string {
	t.Helper()
	<-janitorDone
	if janitorErr != nil {
		t.Fatal(janitorErr)
	}
	return janitorPath
}

// result is a finished process.
type result struct {
	code           int
	stdout, stderr string
}

// run runs a command with exactly the environment given (plus nothing of
// the test process: no KUBECONFIG, no JANITOR_* leaks in) and returns its
// exit code and output.
func run(t testing.TB, environ []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = environ
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return result{0, out.String(), errOut.String()}
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return result{ee.ExitCode(), out.String(), errOut.String()}
	default:
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errOut.String())
		return result{}
	}
}
