package examplestest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
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
