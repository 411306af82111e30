//go:build integration

package examplestest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// access is one verb on one resource, in the namespace or cluster-wide
// (ns == "").
type access struct {
	verb, group, resource string
	namespaced            bool
}

func (a access) String() string {
	g := a.group
	if g == "" {
		g = "core"
	}
	where := "cluster-wide"
	if a.namespaced {
		where = "in the namespace"
	}
	return fmt.Sprintf("%s %s/%s %s", a.verb, g, a.resource, where)
}

// restoreNeeds are the API calls `janitor restore` makes (internal/restore
// run.go, and internal/kube's read of one namespace): the namespace read as
// scan reads it, the snapshots listed again with their templates, the
// claim created and read until Bound, its StorageClass read, the Restored
// Event created and Events listed for a provisioning failure, and the
// source snapshot patched with its restoring mark.
var restoreNeeds = func() []access {
	var out []access
	add := func(namespaced bool, group string, resources []string, verbs ...string) {
		for _, r := range resources {
			for _, v := range verbs {
				out = append(out, access{v, group, r, namespaced})
			}
		}
	}
	add(true, "", []string{"persistentvolumeclaims"}, "list", "create", "get")
	add(true, "", []string{"pods"}, "list")
	add(true, "apps", []string{"deployments", "replicasets", "daemonsets", "statefulsets"}, "list")
	add(true, "batch", []string{"jobs", "cronjobs"}, "list")
	add(true, "snapshot.storage.k8s.io", []string{"volumesnapshots"}, "list", "patch")
	add(true, "", []string{"events"}, "create", "list")
	add(false, "", []string{"persistentvolumes"}, "list")
	add(false, "storage.k8s.io", []string{"volumeattachments"}, "list")
	add(false, "snapshot.storage.k8s.io", []string{"volumesnapshotcontents"}, "list")
	add(false, "storage.k8s.io", []string{"storageclasses"}, "get")
	return out
}()

// restoreRBAC reads examples/restore-role.yaml: its one Role, RoleBinding,
// ClusterRole and ClusterRoleBinding.
func restoreRBAC(t *testing.T) (*rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	t.Helper()
	objs := readObjects(t, example(t, "restore-role.yaml"))
	if len(objs) != 4 {
		t.Fatalf("restore-role.yaml: want a Role, a RoleBinding, a ClusterRole and a ClusterRoleBinding, got %d objects", len(objs))
	}
	return one[rbacv1.Role](t, objs, "Role"), one[rbacv1.RoleBinding](t, objs, "RoleBinding"),
		one[rbacv1.ClusterRole](t, objs, "ClusterRole"), one[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
}

// TestRestoreRoleGrantsOnlyWhatRestoreUses checks restore-role.yaml rule by
// rule: it grants every call `janitor restore` makes and nothing else (no
// wildcard, no delete, no patch but of VolumeSnapshots (the restoring
// mark), no Secrets, namespaced kinds only in the
// Role), and each binding binds the file's own role.
func TestRestoreRoleGrantsOnlyWhatRestoreUses(t *testing.T) {
	role, rb, cr, crb := restoreRBAC(t)
	var got []access
	flat := func(where string, namespaced bool, rules []rbacv1.PolicyRule) {
		for i, r := range rules {
			if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
				t.Errorf("%s rule %d: resourceNames or nonResourceURLs", where, i)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if strings.Contains(g+res+v, "*") {
							t.Errorf("%s rule %d: wildcard", where, i)
						}
						got = append(got, access{v, g, res, namespaced})
					}
				}
			}
		}
	}
	flat("Role", true, role.Rules)
	flat("ClusterRole", false, cr.Rules)
	for _, g := range got {
		if !slices.Contains(restoreNeeds, g) {
			t.Errorf("restore-role.yaml grants %s, which janitor restore does not use", g)
		}
	}
	var missing []string
	for _, n := range restoreNeeds {
		if !slices.Contains(got, n) {
			missing = append(missing, n.String())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("restore-role.yaml lacks what janitor restore needs: %s", strings.Join(missing, ", "))
	}
	if rb.Namespace != role.Namespace || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name {
		t.Errorf("the RoleBinding %s/%s binds %s %s, want the Role %s/%s", rb.Namespace, rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name, role.Namespace, role.Name)
	}
	if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != cr.Name {
		t.Errorf("the ClusterRoleBinding %s binds %s %s, want the ClusterRole %s", crb.Name, crb.RoleRef.Kind, crb.RoleRef.Name, cr.Name)
	}
	if fmt.Sprint(rb.Subjects) != fmt.Sprint(crb.Subjects) {
		t.Errorf("the bindings bind different subjects: %v and %v", rb.Subjects, crb.Subjects)
	}
}

// TestRestoreRoleProof applies restore-role.yaml for real, bound to a fresh
// ServiceAccount in a test namespace instead of the example's Group and
// namespace, and runs `janitor restore NS/CLAIM --as NAME` with only that
// account's token: forbidden (exit 1, nothing created) before the roles are
// bound, and with them the claim is restored from the janitor's rescue and
// Bound. Each call the restore makes is also checked with kubectl auth
// can-i, and a few it must not be able to make.
func TestRestoreRoleProof(t *testing.T) {
	ctx := context.Background()
	cs := env.Clientset(t)
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	const account = "restorer"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	clusterScoped := []string{"persistentvolumes", "volumeattachments", "volumesnapshotcontents", "storageclasses"}
	canI := func(a access) bool {
		resource := a.resource
		if a.group != "" {
			resource += "." + a.group
		}
		args := []string{"--kubeconfig", kc, "auth", "can-i", "--quiet", a.verb, resource}
		switch {
		case a.namespaced:
			args = append(args, "-n", ns)
		case !slices.Contains(clusterScoped, a.resource):
			args = append(args, "--all-namespaces")
		}
		return run(t, environ, env.Bin.Kubectl, args...).code == 0
	}

	// Seed: a bound claim of workspace a with a file on it, and a rescue of
	// it as the janitor writes one (its labels and annotations, the claim
	// template pvc-janitor.io/claim), ready.
	if _, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a", Labels: map[string]string{"workspace": "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteVolume(ctx, ns, "ws-a", "notes.txt", []byte("rescued")); err != nil {
		t.Fatal(err)
	}
	src, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _, err := restore.NewTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{inventory.AnnotationSourceUID: string(src.UID), inventory.AnnotationSourceName: src.Name,
		inventory.AnnotationOrphanedSince: time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), restore.AnnotationTemplate: tmpl}
	labels := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": "a"}
	if _, err := f.Snapshot(ctx, ns, "ws-a-rescue-1", "ws-a", testenv.SnapshotClassDelete, labels, ann); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "ws-a-rescue-1", time.Minute, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	restoreArgs := []string{"restore", ns + "/ws-a", "--as", "ws-a-back", "--kubeconfig", kc,
		"-o", "json", "--restore-timeout", "90s", "--log-level", "error"}

	// 1. Without the roles: forbidden, nothing created.
	for _, a := range restoreNeeds {
		if canI(a) {
			t.Errorf("before the roles are bound the account can %s", a)
		}
	}
	res := run(t, environ, janitorBin(t), restoreArgs...)
	if res.code != 1 || !strings.Contains(res.stderr, "forbidden") {
		t.Errorf("restore without the roles: exit %d, want 1 naming the forbidden read:\n%s%s", res.code, res.stderr, res.stdout)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-back", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused restore created the claim (or it cannot be read): %v", err)
	}

	// 2. The example's roles, bound to the account in the test namespace.
	role, rb, cr, crb := restoreRBAC(t)
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}
	role.Namespace, rb.Namespace, rb.Subjects = ns, ns, subjects
	cr.Name = cr.Name + "-" + ns
	crb.Name, crb.RoleRef.Name, crb.Subjects = cr.Name, cr.Name, subjects
	var manifest strings.Builder
	for _, o := range []any{role, rb, cr, crb} {
		data, err := sigsyaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		manifest.WriteString("---\n")
		manifest.Write(data)
	}
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "--ignore-not-found", "clusterrolebinding/"+crb.Name, "clusterrole/"+cr.Name)
	})
	if out, err := kubectl(t, manifest.String(), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply restore-role.yaml for the account: %v\n%s", err, out)
	}
	// RBAC reaches the authorizer through an informer: wait for the last
	// binding to count.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return canI(restoreNeeds[len(restoreNeeds)-1]) && canI(restoreNeeds[0]), nil
	}); err != nil {
		t.Fatal("the roles never took effect")
	}
	for _, a := range restoreNeeds {
		if !canI(a) {
			t.Errorf("with restore-role.yaml the account cannot %s", a)
		}
	}
	for _, a := range []access{
		{"delete", "", "persistentvolumeclaims", true}, {"patch", "", "persistentvolumeclaims", true},
		{"create", "snapshot.storage.k8s.io", "volumesnapshots", true}, {"delete", "snapshot.storage.k8s.io", "volumesnapshots", true},
		{"list", "", "secrets", true}, {"create", "", "pods", true}, {"list", "", "persistentvolumeclaims", false},
		{"patch", "snapshot.storage.k8s.io", "volumesnapshotcontents", false}, {"create", "coordination.k8s.io", "leases", true},
	} {
		if canI(a) {
			t.Errorf("with restore-role.yaml the account can %s", a)
		}
	}

	// 3. The restore, with only the account's token.
	res = run(t, environ, janitorBin(t), restoreArgs...)
	if res.code != 0 {
		t.Fatalf("restore with restore-role.yaml: exit %d:\n%s%s", res.code, res.stderr, res.stdout)
	}
	var rep struct {
		Claims []struct{ Name, Action, Reason string } `json:"claims"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("parse the report: %v\n%s", err, res.stdout)
	}
	if len(rep.Claims) != 1 || rep.Claims[0].Name != "ws-a-back" || rep.Claims[0].Action != "restored" {
		t.Errorf("report claims %+v, want ws-a-back restored", rep.Claims)
	}
	back, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-back", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.Phase != corev1.ClaimBound || back.Annotations[restore.AnnotationRestoredFrom] != "ws-a-rescue-1" {
		t.Errorf("restored claim: phase %s, annotations %v", back.Status.Phase, back.Annotations)
	}
	if got, err := f.ReadVolume(ctx, ns, "ws-a-back", "notes.txt"); err != nil || string(got) != "rescued" {
		t.Errorf("the restored claim holds %q (%v), want the rescue's bytes", got, err)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Restored,involvedObject.name=ws-a-back"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no Restored event on the new claim: %v", err)
	}
}
