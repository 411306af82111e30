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
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

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

func repoRoot(t testing.TB) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func examplesDir(t testing.TB) string { return filepath.Join(repoRoot(t), "examples") }

func example(t testing.TB, name string) string { return filepath.Join(examplesDir(t), name) }

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "pvc-janitor") }

// ---------------------------------------------------------------------------
// The example files, by kind.

// fileKind is what an examples/*.yaml file is.
type fileKind int

const (
	// kindManifests: every document is a Kubernetes object.
	kindManifests fileKind = iota
	// kindConfig: a janitor configuration (keys are flag names).
	kindConfig
	// kindWorkflow: a GitHub Actions workflow.
	kindWorkflow
)

func (k fileKind) String() string {
	return [...]string{"manifests", "janitor config", "GitHub workflow"}[k]
}

// exampleYAML returns every examples/*.yaml by kind. A file that is none of
// the three fails the test: a new example must be covered by these tests.
func exampleYAML(t testing.TB) map[fileKind][]string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(examplesDir(t), pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	out := map[fileKind][]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := yamlDocs(t, f, data)
		switch {
		case len(docs) == 0:
			t.Fatalf("%s: no YAML document", f)
		case allObjects(docs):
			out[kindManifests] = append(out[kindManifests], f)
		case len(docs) == 1 && docs[0]["jobs"] != nil && docs[0]["on"] != nil:
			out[kindWorkflow] = append(out[kindWorkflow], f)
		case len(docs) == 1 && docs[0]["apiVersion"] == nil && docs[0]["kind"] == nil:
			out[kindConfig] = append(out[kindConfig], f)
		default:
			t.Fatalf("%s: neither Kubernetes manifests, a janitor configuration nor a GitHub workflow", f)
		}
	}
	return out
}

// yamlDocs decodes every document of a multi-document YAML file (YAML 1.2,
// as the janitor reads its configuration), skipping empty ones.
func yamlDocs(t testing.TB, name string, data []byte) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(m) > 0 {
			docs = append(docs, m)
		}
	}
}

func allObjects(docs []map[string]any) bool {
	for _, d := range docs {
		if _, ok := d["apiVersion"].(string); !ok {
			return false
		}
		if _, ok := d["kind"].(string); !ok {
			return false
		}
	}
	return true
}

// objects decodes a manifest file (or helm output) into objects, as kubectl
// does.
func objects(t testing.TB, name string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", name, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func readObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return objects(t, path, data)
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the one object of a kind, converted to its typed form.
func one[T any](t testing.TB, objs []*unstructured.Unstructured, kind string) *T {
	t.Helper()
	found := ofKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("want one %s, got %d", kind, len(found))
	}
	return convert[T](t, found[0])
}

// convert turns an object into its typed form, refusing unknown fields.
func convert[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &v, true); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return &v
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

func readFileString(path string) (string, error) {
	data, err := os.ReadFile(path)
	return string(data), err
}
