//go:build integration

package examplestest

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// createNamespaces creates, for real, every namespace the manifests name:
// the examples do not create namespaces themselves.
func createNamespaces(t *testing.T, files []string) {
	t.Helper()
	cs := env.Clientset(t)
	seen := map[string]bool{}
	for _, f := range files {
		for _, o := range readObjects(t, f) {
			ns := o.GetNamespace()
			if ns == "" || seen[ns] {
				continue
			}
			seen[ns] = true
			_, err := cs.CoreV1().Namespaces().Create(context.Background(),
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create namespace %s: %v", ns, err)
			}
		}
	}
}

// applied returns the "kind/name" lines of kubectl apply -o name.
func applied(out string) []string {
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			names = append(names, l)
		}
	}
	sort.Strings(names)
	return names
}

// TestManifestsServerSideDryRun applies every manifest file of examples/
// with a server-side dry run and strict field validation: the API server
// checks every object against its real schema, admission included, and
// stores nothing.
func TestManifestsServerSideDryRun(t *testing.T) {
	files := exampleYAML(t)[kindManifests]
	if len(files) == 0 {
		t.Fatal("no manifests in examples/")
	}
	createNamespaces(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			objs := readObjects(t, f)
			out, err := kubectl(t, "", "apply", "--server-side", "--dry-run=server",
				"--field-manager=examplestest", "--validate=strict", "-o", "name", "-f", f)
			if err != nil {
				t.Fatalf("kubectl apply --server-side --dry-run=server -f %s: %v\n%s", f, err, out)
			}
			if got := applied(out); len(got) != len(objs) {
				t.Fatalf("applied %d objects, the file has %d:\n%s", len(got), len(objs), out)
			}
			for _, o := range objs {
				if o.GetNamespace() == "" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
					t.Errorf("%s %s has no namespace: the examples name theirs explicitly", o.GetKind(), o.GetName())
				}
			}
		})
	}
}

// TestNamespacedInstallCommand runs the commands the examples document for
// a namespaced janitor (cronjob.yaml without its cluster-wide RBAC, then
// rbac-namespaced.yaml): the label selector leaves out exactly the
// cluster-wide ClusterRole and its binding, which rbac-namespaced.yaml
// replaces with objects of the same names.
func TestNamespacedInstallCommand(t *testing.T) {
	cron, nsRBAC := example(t, "cronjob.yaml"), example(t, "rbac-namespaced.yaml")
	createNamespaces(t, []string{cron, nsRBAC})
	full, err := kubectl(t, "", "apply", "--server-side", "--dry-run=server", "--field-manager=examplestest", "-o", "name", "-f", cron)
	if err != nil {
		t.Fatalf("%v\n%s", err, full)
	}
	sel := "examples.pvc-janitor.io/rbac!=all-namespaces"
	for _, f := range []string{cron, nsRBAC} {
		data, err := readFileString(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(data, "-l '"+sel+"'") {
			t.Errorf("%s does not document `kubectl apply -f examples/cronjob.yaml -l '%s'`", filepath.Base(f), sel)
		}
	}
	part, err := kubectl(t, "", "apply", "--server-side", "--dry-run=server", "--field-manager=examplestest", "-o", "name", "-f", cron, "-l", sel)
	if err != nil {
		t.Fatalf("%v\n%s", err, part)
	}
	var left []string
	for _, n := range applied(full) {
		if !slices.Contains(applied(part), n) {
			left = append(left, n)
		}
	}
	want := []string{"clusterrole.rbac.authorization.k8s.io/pvc-janitor", "clusterrolebinding.rbac.authorization.k8s.io/pvc-janitor"}
	if !slices.Equal(left, want) {
		t.Errorf("-l %s leaves out %v, want %v", sel, left, want)
	}
	// rbac-namespaced.yaml brings back a ClusterRole and binding of those
	// names (the small one), and relies on cronjob.yaml's ServiceAccount.
	nsOut, err := kubectl(t, "", "apply", "--server-side", "--dry-run=server", "--field-manager=examplestest", "-o", "name", "-f", nsRBAC)
	if err != nil {
		t.Fatalf("%v\n%s", err, nsOut)
	}
	for _, n := range want {
		if !slices.Contains(applied(nsOut), n) {
			t.Errorf("rbac-namespaced.yaml has no %s", n)
		}
	}
	if !slices.Contains(applied(part), "serviceaccount/pvc-janitor") {
		t.Error("the namespaced install has no ServiceAccount")
	}
}
