//go:build integration

package charttest_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// grant is one API group, resource and verb.
type grant struct{ group, resource, verb string }

func (g grant) String() string {
	group := g.group
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s/%s", g.verb, group, g.resource)
}

func grants(group string, resources []string, verbs ...string) []grant {
	var out []grant
	for _, r := range resources {
		for _, v := range verbs {
			out = append(out, grant{group, r, v})
		}
	}
	return out
}

// The API calls the janitor makes (internal/kube, internal/mark,
// internal/rescue, internal/reap, internal/lock); the chart must grant
// these and nothing else. Reads are list (and get where named); watch
// only on VolumeSnapshots, which the janitor watches while waiting for
// them (rescue/watch.go: its one Watch call).
var (
	// namespacedNeeds are granted by the ClusterRole, or in namespaced mode
	// by a Role in every namespace looked at.
	namespacedNeeds = slices.Concat(
		grants("", []string{"persistentvolumeclaims"}, "get", "list", "patch", "delete"),
		grants("", []string{"pods"}, "list"),
		grants("", []string{"events"}, "create"),
		grants("snapshot.storage.k8s.io", []string{"volumesnapshots"}, "get", "list", "watch", "create", "patch", "delete"),
		grants("apps", []string{"deployments", "replicasets", "daemonsets", "statefulsets"}, "list"),
		grants("batch", []string{"jobs", "cronjobs"}, "list"),
	)
	// clusterNeeds are cluster-scoped: always in a ClusterRole. get on
	// classes validates --snapshot-class before anything is written.
	clusterNeeds = slices.Concat(
		grants("", []string{"persistentvolumes"}, "list"),
		grants("storage.k8s.io", []string{"volumeattachments"}, "list"),
		// get reads a rescue's content by name (the rescue's wait, the
		// reap's re-read right before each delete: kube.GetContent).
		grants("snapshot.storage.k8s.io", []string{"volumesnapshotcontents"}, "get", "list"),
		grants("snapshot.storage.k8s.io", []string{"volumesnapshotclasses"}, "get", "list"),
	)
	// leaseNeeds are in the lock namespace only; all but create are limited
	// to the one Lease, named pvc-janitor.
	leaseNeeds = grants("coordination.k8s.io", []string{"leases"}, "get", "create", "update", "delete")
	// contentsNeeds are added to the ClusterRole by contents.delete only
	// (--delete-contents): the JSON patch that sets a Retain content of the
	// janitor's own rescue to Delete (docs/spec.md#retention).
	contentsNeeds = grants("snapshot.storage.k8s.io", []string{"volumesnapshotcontents"}, "patch")
)

// flatten turns rules into grants; it fails on anything a grant cannot
// say: wildcards, non-resource URLs, and (outside leases) resourceNames.
func flatten(t *testing.T, where string, rules []rbacv1.PolicyRule) []grant {
	t.Helper()
	var out []grant
	for i, r := range rules {
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames) {
			if strings.Contains(s, "*") {
				t.Errorf("%s rule %d: wildcard %q", where, i, s)
			}
		}
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s rule %d: non-resource URLs %v", where, i, r.NonResourceURLs)
		}
		for _, res := range r.Resources {
			if strings.Contains(res, "/") {
				t.Errorf("%s rule %d: subresource %q", where, i, res)
			}
		}
		if len(r.ResourceNames) > 0 && (!slices.Equal(r.ResourceNames, []string{"pvc-janitor"}) || !slices.Equal(r.Resources, []string{"leases"})) {
			t.Errorf("%s rule %d: unexpected resourceNames %v on %v", where, i, r.ResourceNames, r.Resources)
		}
		for _, g := range r.APIGroups {
			out = append(out, grants(g, r.Resources, r.Verbs...)...)
		}
	}
	return out
}

// neverGranted is what no rendering may ever grant, whatever the allowed
// lists above say: a second line of defence against a careless edit of both.
func neverGranted(t *testing.T, where string, gs []grant) {
	t.Helper()
	for _, g := range gs {
		switch {
		case g.resource == "secrets" || g.resource == "configmaps" || g.resource == "serviceaccounts":
			t.Errorf("%s grants %s", where, g)
		case g.resource == "pods" && g.verb != "list" && g.verb != "watch":
			t.Errorf("%s grants %s: the janitor never touches pods", where, g)
		case slices.Contains([]string{"escalate", "bind", "impersonate", "deletecollection", "approve", "sign"}, g.verb):
			t.Errorf("%s grants %s", where, g)
		case g.resource == "namespaces" || g.resource == "nodes" || strings.HasPrefix(g.group, "rbac.") || g.group == "admissionregistration.k8s.io":
			t.Errorf("%s grants %s", where, g)
		case (g.resource == "volumesnapshotcontents" || g.resource == "persistentvolumes") &&
			!slices.Contains([]string{"get", "list", "watch", "patch"}, g.verb):
			t.Errorf("%s grants %s: the janitor never creates, updates or deletes it", where, g)
		case g.resource == "persistentvolumes" && g.verb == "patch":
			t.Errorf("%s grants %s", where, g)
		}
	}
}

func within(t *testing.T, where string, got, allowed []grant) {
	t.Helper()
	for _, g := range got {
		if !slices.Contains(allowed, g) {
			t.Errorf("%s grants %s, which the janitor does not use", where, g)
		}
	}
}

func covers(t *testing.T, where string, got, need []grant) {
	t.Helper()
	var missing []string
	for _, g := range need {
		if !slices.Contains(got, g) {
			missing = append(missing, g.String())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%s lacks what the janitor needs: %s", where, strings.Join(missing, ", "))
	}
}

// TestRBACGrantsOnlyWhatTheJanitorUses parses the rendered roles of every
// ci/*-values.yaml: nothing beyond the janitor's API calls (no Secrets, no
// pod deletion, no wildcard), and everything the janitor needs.
func TestRBACGrantsOnlyWhatTheJanitorUses(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(ciName(f), func(t *testing.T) {
			r := render(t, "ci", "janitor", []string{f})
			clusterRoles, roles := r.Roles(t)
			if len(clusterRoles) != 1 {
				t.Fatalf("want one ClusterRole, got %d", len(clusterRoles))
			}
			cr := clusterRoles[0]
			if cr.AggregationRule != nil {
				t.Error("the ClusterRole must not aggregate")
			}
			for k := range cr.Labels {
				if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to") {
					t.Errorf("the ClusterRole aggregates into %s", k)
				}
			}
			crGrants := flatten(t, "ClusterRole", cr.Rules)
			neverGranted(t, "ClusterRole", crGrants)
			// contents.delete (the CronJob's --delete-contents) adds
			// contentsNeeds to the cluster-scoped grants.
			cluster := clusterNeeds
			if slices.Contains(r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, "--delete-contents") {
				cluster = slices.Concat(clusterNeeds, contentsNeeds)
			}
			namespaced := len(roles) > 1
			var perNamespace []string
			var lease []grant
			leaseRoles := 0
			for _, role := range roles {
				where := "Role " + role.Namespace + "/" + role.Name
				gs := flatten(t, where, role.Rules)
				neverGranted(t, where, gs)
				if strings.HasSuffix(role.Name, "-lock") {
					leaseRoles++
					within(t, where, gs, leaseNeeds)
					covers(t, where, gs, leaseNeeds)
					lease = gs
					for _, rule := range role.Rules {
						for _, v := range rule.Verbs {
							if v != "create" && !slices.Equal(rule.ResourceNames, []string{"pvc-janitor"}) {
								t.Errorf("%s: %s on leases is not limited to the Lease pvc-janitor", where, v)
							}
						}
					}
					continue
				}
				within(t, where, gs, namespacedNeeds)
				covers(t, where, gs, namespacedNeeds)
				perNamespace = append(perNamespace, role.Namespace)
			}
			if leaseRoles != 1 || len(lease) == 0 {
				t.Errorf("want one lease Role, got %d", leaseRoles)
			}
			if namespaced {
				// Cluster-scoped reads only; claims and the rest per namespace.
				within(t, "ClusterRole", crGrants, cluster)
				covers(t, "ClusterRole", crGrants, cluster)
				cfg := loadConfig(t, r.ConfigFile(t), []string{"--config", "x"})
				sort.Strings(perNamespace)
				want := slices.Clone(cfg.Namespaces)
				sort.Strings(want)
				if !slices.Equal(perNamespace, want) {
					t.Errorf("Roles in %v, want one in each namespace looked at: %v", perNamespace, want)
				}
			} else {
				within(t, "ClusterRole", crGrants, slices.Concat(cluster, namespacedNeeds))
				covers(t, "ClusterRole", crGrants, slices.Concat(cluster, namespacedNeeds))
			}
			checkBindings(t, r)
		})
	}
}

// checkBindings: every binding binds the chart's own role to the chart's
// own ServiceAccount, and nothing else.
func checkBindings(t *testing.T, r *Rendered) {
	t.Helper()
	sa := r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	roleNames := map[string]bool{}
	for _, o := range append(r.Kind("ClusterRole"), r.Kind("Role")...) {
		roleNames[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	n := 0
	for _, o := range r.Kind("ClusterRoleBinding") {
		b := convert[rbacv1.ClusterRoleBinding](t, o)
		checkBinding(t, "ClusterRoleBinding "+b.Name, "", b.RoleRef, b.Subjects, sa, roleNames)
		n++
	}
	for _, o := range r.Kind("RoleBinding") {
		b := convert[rbacv1.RoleBinding](t, o)
		checkBinding(t, "RoleBinding "+b.Namespace+"/"+b.Name, b.Namespace, b.RoleRef, b.Subjects, sa, roleNames)
		n++
	}
	if n != len(roleNames) {
		t.Errorf("%d bindings for %d roles", n, len(roleNames))
	}
}

func checkBinding(t *testing.T, where, ns string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, sa string, roles map[string]bool) {
	t.Helper()
	if ref.Kind == "ClusterRole" {
		ns = ""
	}
	if !roles[ref.Kind+"/"+ns+"/"+ref.Name] {
		t.Errorf("%s binds %s/%s, not one of the chart's roles", where, ref.Kind, ref.Name)
	}
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != sa || subjects[0].Namespace != "janitor" {
		t.Errorf("%s binds %+v, want only the ServiceAccount janitor/%s", where, subjects, sa)
	}
}

// TestRBACContentsDelete: contents.delete=true adds exactly patch
// on volumesnapshotcontents, to the ClusterRole only, and --delete-contents
// to the CronJob; false (the default) adds nothing: every role and binding
// is the same as without the value. In both RBAC modes.
func TestRBACContentsDelete(t *testing.T) {
	for _, mode := range []struct {
		name string
		sets []string
	}{
		{"ClusterRole", []string{"config.selector=app=ide"}},
		{"NamespacedRoles", []string{"config.selector=app=ide", "rbac.namespaced=true", "config.all-namespaces=false", "config.namespace={ws-a,ws-b}"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			byObject := func(sets ...string) (map[string][]grant, []string) {
				r := render(t, "r", "janitor", nil, append(slices.Clone(mode.sets), sets...)...)
				out := map[string][]grant{}
				cluster, roles := r.Roles(t)
				for _, cr := range cluster {
					out["ClusterRole "+cr.Name] = flatten(t, "ClusterRole", cr.Rules)
				}
				for _, role := range roles {
					out["Role "+role.Namespace+"/"+role.Name] = flatten(t, "Role", role.Rules)
				}
				return out, r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
			}
			def, defArgs := byObject()
			off, offArgs := byObject("contents.delete=false")
			on, onArgs := byObject("contents.delete=true")
			if slices.Contains(defArgs, "--delete-contents") || slices.Contains(offArgs, "--delete-contents") {
				t.Errorf("contents.delete unset or false passes --delete-contents: %q %q", defArgs, offArgs)
			}
			if !slices.Contains(onArgs, "--delete-contents") {
				t.Errorf("contents.delete=true does not pass --delete-contents: %q", onArgs)
			}
			for k, g := range def {
				if !sameGrants(g, off[k]) {
					t.Errorf("contents.delete=false changes %s: %v -> %v", k, g, off[k])
				}
			}
			if len(on) != len(off) {
				t.Fatalf("contents.delete=true renders %d roles, false %d", len(on), len(off))
			}
			for k, before := range off {
				after, ok := on[k]
				if !ok {
					t.Fatalf("contents.delete=true drops %s", k)
				}
				added, removed := diffGrants(after, before), diffGrants(before, after)
				if len(removed) > 0 {
					t.Errorf("contents.delete=true removes from %s: %v", k, removed)
				}
				want := []grant(nil)
				if strings.HasPrefix(k, "ClusterRole ") {
					want = contentsNeeds
				}
				if !sameGrants(added, want) {
					t.Errorf("contents.delete=true adds to %s: %v, want exactly %v", k, added, want)
				}
			}
		})
	}
}

// diffGrants is what a grants and b does not, each grant once.
func diffGrants(a, b []grant) []grant {
	var out []grant
	for _, g := range a {
		if !slices.Contains(b, g) && !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

func sameGrants(a, b []grant) bool { return len(diffGrants(a, b)) == 0 && len(diffGrants(b, a)) == 0 }
