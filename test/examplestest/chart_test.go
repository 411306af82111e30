//go:build integration

package examplestest

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// normRules sorts every list of every rule and then the rules, so that two
// roles granting the same rules compare equal whatever their order.
func normRules(rules []rbacv1.PolicyRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		for _, l := range [][]string{r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, r.NonResourceURLs} {
			sort.Strings(l)
		}
		out = append(out, fmt.Sprintf("groups=%q resources=%q names=%q verbs=%q urls=%q",
			r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, r.NonResourceURLs))
	}
	sort.Strings(out)
	return out
}

// rbacObjects reduces the RBAC objects (and ServiceAccounts) among objs to
// "Kind namespace/name" -> what they grant or bind, for comparison.
func rbacObjects(t *testing.T, objs []*unstructured.Unstructured, kinds ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		if !slices.Contains(kinds, o.GetKind()) {
			continue
		}
		key := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		var val string
		switch o.GetKind() {
		case "ClusterRole":
			val = strings.Join(normRules(convert[rbacv1.ClusterRole](t, o).Rules), "\n")
		case "Role":
			val = strings.Join(normRules(convert[rbacv1.Role](t, o).Rules), "\n")
		case "ClusterRoleBinding":
			b := convert[rbacv1.ClusterRoleBinding](t, o)
			val = fmt.Sprintf("%+v %+v", b.RoleRef, b.Subjects)
		case "RoleBinding":
			b := convert[rbacv1.RoleBinding](t, o)
			val = fmt.Sprintf("%+v %+v", b.RoleRef, b.Subjects)
		default:
			val = "exists"
		}
		if _, dup := out[key]; dup {
			t.Fatalf("two objects %s", key)
		}
		out[key] = val
	}
	return out
}

// sameObjects reports every difference between want (the chart) and got
// (the example).
func sameObjects(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: the chart rendered nothing to compare with", what)
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s lacks the chart's %s:\n%s", what, k, w)
		case g != w:
			t.Errorf("%s: %s differs from the chart's:\n%s\nchart:\n%s", what, k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s has %s, which the chart does not render", what, k)
		}
	}
}

var rbacKinds = []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

// TestCronJobMatchesChart renders the chart for release pvc-janitor in the
// namespace pvc-janitor with the settings of cronjob.yaml's ConfigMap, and
// checks that cronjob.yaml is what the chart would install: the same
// ServiceAccount, the same RBAC rules and bindings (the ClusterRole and the
// Lease Role), the same configuration, and the same CronJob (schedule, job
// policy, security context, resources, mounts, image and arguments).
func TestCronJobMatchesChart(t *testing.T) {
	cmFile, text, cj := cronJobConfig(t)
	cfg := yamlMap(t, "cronjob.yaml ConfigMap", text)
	// The chart's mode, from the CronJob's arguments (--marks-only: the
	// preview; --yes: acting) and dry-run in the ConfigMap (a plain dry run).
	args := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
	plainDry, _ := cfg["dry-run"].(bool)
	marksOnly := slices.Contains(args, "--marks-only")
	delete(cfg, "dry-run")
	chart := helmTemplate(t, map[string]any{"dryRun": plainDry || marksOnly, "marksOnly": marksOnly, "config": cfg})
	exampleObjs := readObjects(t, example(t, "cronjob.yaml"))

	t.Run("RBAC", func(t *testing.T) {
		kinds := append([]string{"ServiceAccount"}, rbacKinds...)
		sameObjects(t, "cronjob.yaml", rbacObjects(t, exampleObjs, kinds...), rbacObjects(t, chart, kinds...))
		// The ClusterRole's rules, named, for the report of a failure.
		got := one[rbacv1.ClusterRole](t, exampleObjs, "ClusterRole")
		want := one[rbacv1.ClusterRole](t, chart, "ClusterRole")
		if !slices.Equal(normRules(got.Rules), normRules(want.Rules)) {
			t.Errorf("ClusterRole rules:\n%s\nchart:\n%s", strings.Join(normRules(got.Rules), "\n"), strings.Join(normRules(want.Rules), "\n"))
		}
	})

	t.Run("configuration", func(t *testing.T) {
		// The chart adds its defaults (all-claims: false, ...): the two
		// files must mean the same to the janitor, key for key.
		var chartCfg string
		for _, o := range ofKind(chart, "ConfigMap") {
			chartCfg, _, _ = unstructured.NestedString(o.Object, "data", "config.yaml")
		}
		chartFile := filepath.Join(t.TempDir(), "chart-config.yaml")
		if err := os.WriteFile(chartFile, []byte(chartCfg), 0o600); err != nil {
			t.Fatal(err)
		}
		want, err := loadConfig(t, chartFile, config.CommandRun)
		if err != nil {
			t.Fatalf("the chart's configuration: %v", err)
		}
		got, err := loadConfig(t, cmFile, config.CommandRun)
		if err != nil {
			t.Fatalf("cronjob.yaml's configuration: %v", err)
		}
		want.ConfigFile, got.ConfigFile = "", ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("configuration:\n%s\nthe chart renders:\n%s", text, chartCfg)
		}
	})

	t.Run("CronJob", func(t *testing.T) {
		want := one[batchv1.CronJob](t, chart, "CronJob")
		got := cj.DeepCopy()
		// Labels and annotations differ on purpose (Helm's labels, the
		// chart's config checksum); everything else must be the same.
		for _, c := range []*batchv1.CronJob{got, want} {
			c.ObjectMeta = metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace}
			c.Spec.JobTemplate.ObjectMeta = metav1.ObjectMeta{}
			c.Spec.JobTemplate.Spec.Template.ObjectMeta = metav1.ObjectMeta{}
		}
		if !apiequality.Semantic.DeepEqual(got, want) {
			g, _ := sigsyaml.Marshal(got)
			w, _ := sigsyaml.Marshal(want)
			t.Errorf("cronjob.yaml's CronJob differs from the chart's (labels and annotations aside):\n%s\nchart:\n%s", g, w)
		}
	})

	t.Run("image version", func(t *testing.T) {
		app := chartAppVersion(t)
		img := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
		if want := "ghcr.io/pvc-janitor/pvc-janitor:" + app; img != want {
			t.Errorf("image %s, want %s (the chart's appVersion)", img, want)
		}
		raw, _ := readFileString(example(t, "cronjob.yaml"))
		if !strings.Contains(raw, `app.kubernetes.io/version: "`+app+`"`) {
			t.Errorf("the version label is not %q", app)
		}
	})
}

// TestNamespacedRBACMatchesChart renders the chart's namespaced mode with
// the namespaces and lock namespace of rbac-namespaced.yaml and checks that
// the example holds exactly the chart's roles and bindings: a Role per
// workspace namespace, a ClusterRole limited to the cluster-scoped kinds,
// and the Lease only in the lock namespace.
func TestNamespacedRBACMatchesChart(t *testing.T) {
	exampleObjs := readObjects(t, example(t, "rbac-namespaced.yaml"))
	var workspaces []string
	lockNS := ""
	for _, r := range ofKind(exampleObjs, "Role") {
		role := convert[rbacv1.Role](t, r)
		leases := false
		for _, rule := range role.Rules {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") {
				leases = true
			}
		}
		if leases {
			if lockNS != "" {
				t.Errorf("Lease rights in %s and %s: only the lock namespace may have them", lockNS, role.Namespace)
			}
			lockNS = role.Namespace
			continue
		}
		workspaces = append(workspaces, role.Namespace)
	}
	if len(workspaces) < 2 || lockNS == "" {
		t.Fatalf("want Roles in a list of workspace namespaces and a Lease Role; got %v and %q", workspaces, lockNS)
	}
	chart := helmTemplate(t, map[string]any{
		"rbac": map[string]any{"namespaced": true},
		"config": map[string]any{
			"all-namespaces": false, "namespace": workspaces,
			"selector": "app=ide", "lock-namespace": lockNS,
		},
	})
	sameObjects(t, "rbac-namespaced.yaml", rbacObjects(t, exampleObjs, rbacKinds...), rbacObjects(t, chart, rbacKinds...))

	// What the chart's namespaced mode promises, spelt out.
	cr := one[rbacv1.ClusterRole](t, exampleObjs, "ClusterRole")
	clusterScoped := []string{"persistentvolumes", "volumeattachments", "volumesnapshotcontents", "volumesnapshotclasses"}
	var got []string
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			if !slices.Contains(clusterScoped, res) {
				t.Errorf("the ClusterRole grants %s: only the cluster-scoped kinds belong there", res)
			}
			got = append(got, res)
		}
		for _, v := range r.Verbs {
			if !slices.Contains([]string{"get", "list", "watch"}, v) {
				t.Errorf("the ClusterRole grants %s on %v: it only reads", v, r.Resources)
			}
		}
	}
	sort.Strings(got)
	sort.Strings(clusterScoped)
	if !slices.Equal(got, clusterScoped) {
		t.Errorf("the ClusterRole covers %v, want %v", got, clusterScoped)
	}
	for _, b := range ofKind(exampleObjs, "RoleBinding") {
		rb := convert[rbacv1.RoleBinding](t, b)
		if len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Namespace != "pvc-janitor" || rb.Subjects[0].Name != "pvc-janitor" {
			t.Errorf("RoleBinding %s/%s binds %+v, want cronjob.yaml's ServiceAccount pvc-janitor/pvc-janitor", rb.Namespace, rb.Name, rb.Subjects)
		}
	}
}
