package examplestest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

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

func readFileString(path string) (string, error) {
	data, err := os.ReadFile(path)
	return string(data), err
}
