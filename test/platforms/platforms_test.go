// Package platforms_test drives the janitor's decisions through the life
// of a workspace on four platforms, on the objects each platform makes
// (examples/platforms, docs/platforms.md): use, stop, orphan, rescue,
// reap, and the user's return, the platform's way and the recipe's way.
// It needs no cluster: see world_test.go for how the objects are read and
// which of the project's functions decide each step.
package platforms_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// step runs one step of a life as a subtest on w (whose helpers then fail
// that subtest).
func step(t *testing.T, w *world, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		parent := w.t
		w.t = t
		defer func() { w.t = parent }()
		f(t)
	})
}

// clone is a copy of the world to follow another branch of a life.
func (w *world) clone() *world {
	c := *w
	c.claims = deepCopies(w.claims, (*corev1.PersistentVolumeClaim).DeepCopy)
	c.pods = deepCopies(w.pods, (*corev1.Pod).DeepCopy)
	c.deploys = deepCopies(w.deploys, (*appsv1.Deployment).DeepCopy)
	c.snaps = deepCopies(w.snaps, (*snapv1.VolumeSnapshot).DeepCopy)
	c.contents = maps.Clone(w.contents)
	c.owners = maps.Clone(w.owners)
	return &c
}

func deepCopies[T any](in []*T, cp func(*T) *T) []*T {
	out := make([]*T, len(in))
	for i, x := range in {
		out[i] = cp(x)
	}
	return out
}

func wantState(t *testing.T, w *world, ns, name string, want classify.State, reason string) {
	t.Helper()
	got, why := w.state(ns, name)
	if got != want || !strings.Contains(why, reason) {
		t.Fatalf("%s/%s is %s (%s), want %s (%q)", ns, name, got, why, want, reason)
	}
}

func wantHeldBy(t *testing.T, w *world, ns, snap, want string) {
	t.Helper()
	if got := w.heldBy(ns, snap); got != want {
		t.Fatalf("the judge: %s is held by %q, want %q (\"\": the last copy of its data)", snap, got, want)
	}
}

// wantPrune prunes with the configuration's retention once its --keep-for
// has passed, and checks the verdict on the rescue.
func wantPrune(t *testing.T, w *world, ns, snap string, prune bool, reason string) {
	t.Helper()
	w.advance(w.cfg.KeepFor + time.Hour)
	v, ok := w.prune(ns)[snap]
	if !ok {
		t.Fatalf("prune saw no rescue %s", snap)
	}
	if v.Prune != prune || !strings.Contains(v.Reason, reason) {
		t.Fatalf("prune %s: %v (%s), want %v (%q)", snap, v.Prune, v.Reason, prune, reason)
	}
}

// oneRescue is the janitor's one rescue of claim name.
func oneRescue(t *testing.T, w *world, name string) string {
	t.Helper()
	r := w.rescuesOf(name)
	if len(r) != 1 {
		t.Fatalf("rescues of %s: %v, want one", name, r)
	}
	return r[0]
}

// orphanRescueReap is the middle of every life: the claim, unused since
// the last step, is marked, rescued once the grace period has passed,
// and reaped once the owner's notice (if any) has too. It returns the
// rescue.
func orphanRescueReap(t *testing.T, w *world, ns, claim string) string {
	t.Helper()
	var rescued string
	step(t, w, "orphaned: marked, in grace", func(t *testing.T) {
		w.advance(5 * time.Minute)
		if did := w.run()[claim]; did != string(classify.Grace) {
			t.Fatalf("run: %s, want Grace (marked)", did)
		}
		if _, ok := w.claim(ns, claim).Annotations[inventory.AnnotationOrphanedSince]; !ok {
			t.Fatal("no orphaned-since mark")
		}
	})
	step(t, w, "past the grace period: rescued", func(t *testing.T) {
		w.advance(w.cfg.GracePeriod + time.Minute)
		did := w.run()[claim]
		if !strings.HasPrefix(did, string(classify.Orphaned)+" rescued") {
			t.Fatalf("run: %s, want Orphaned, rescued", did)
		}
		rescued = oneRescue(t, w, claim)
		if w.cfg.NoticePeriod > 0 {
			if strings.Contains(did, "reaped") {
				t.Fatal("reaped in the run that began the owner's notice")
			}
			if _, ok := w.claim(ns, claim).Annotations[inventory.AnnotationReapAfter]; !ok {
				t.Fatal("no notice (reap-after) on the claim")
			}
			wantState(t, w, ns, claim, classify.Rescued, rescued)
		}
	})
	if w.cfg.NoticePeriod > 0 {
		step(t, w, "after the notice: reaped", func(t *testing.T) {
			w.advance(w.cfg.NoticePeriod + time.Minute)
			if did := w.run()[claim]; did != string(classify.Rescued)+" reaped" {
				t.Fatalf("run: %s, want Rescued, reaped", did)
			}
		})
	} else if w.claim(ns, claim) != nil {
		t.Fatalf("%s not reaped in the run that rescued it (no notice period)", claim)
	}
	step(t, w, "reaped: the rescue is the only copy", func(t *testing.T) {
		if w.claim(ns, claim) != nil {
			t.Fatalf("%s still exists", claim)
		}
		wantHeldBy(t, w, ns, rescued, "")
	})
	return rescued
}

// --- JupyterHub --------------------------------------------------------------

// TestJupyterHub: KubeSpawner's claim-alice outlives every stop of the
// server; once the janitor has moved it into a rescue, KubeSpawner makes
// it again under the same name, empty, unless the pre_spawn_hook restores
// it first (examples/platforms/jupyterhub/pre_spawn_hook.py).
func TestJupyterHub(t *testing.T) {
	const ns, home = "jhub", "claim-alice"
	objs := loadObjects(t, platformFile(t, "jupyterhub", "user-server.yaml"))
	w := newWorld(t, platformFile(t, "jupyterhub", "janitor.yaml"))
	if w.cfg.WorkspaceLabel != "" {
		t.Fatal("the recipe has no workspace label: each claim is its own workspace")
	}
	step(t, w, "session 1: the spawner's claim and pod", func(t *testing.T) {
		w.createClaim(objs.claim(t, home))
		w.startPod(objs.pod(t, "jupyter-alice"))
		w.advance(time.Hour)
		w.run()
		wantState(t, w, ns, home, classify.InUse, "Pod "+ns+"/jupyter-alice")
	})
	step(t, w, "stopped: the culler deletes the pod, the claim stays", func(t *testing.T) {
		w.deletePod(ns, "jupyter-alice")
	})
	rescued := orphanRescueReap(t, w, ns, home)

	// The user returns. KubeSpawner 7.0 (and 7.1 without saved state)
	// creates claim-alice again from its manifest: empty.
	empty := w.clone()
	step(t, empty, "returns without the hook: claim-alice made again, empty", func(t *testing.T) {
		empty.createClaim(objs.claim(t, home))
		empty.startPod(objs.pod(t, "jupyter-alice"))
		empty.advance(time.Hour)
		wantState(t, empty, ns, home, classify.InUse, "jupyter-alice")
		wantHeldBy(t, empty, ns, rescued, "")
		if _, err := empty.restore(restore.Request{Namespace: ns, Claim: home}); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Fatalf("restore over the new claim: %v, want a refusal (the name is taken)", err)
		}
		wantPrune(t, empty, ns, rescued, false, "the only copy")
	})
	step(t, empty, "the new claim rescued in turn: the old home stays the only copy of its data", func(t *testing.T) {
		empty.deletePod(ns, "jupyter-alice")
		empty.advance(5 * time.Minute)
		empty.run()
		empty.advance(empty.cfg.GracePeriod + time.Minute)
		empty.run()
		if n := len(empty.rescuesOf(home)); n != 2 {
			t.Fatalf("%d rescues of %s, want 2", n, home)
		}
		wantHeldBy(t, empty, ns, rescued, "")
		wantPrune(t, empty, ns, rescued, false, "the only copy")
	})
	step(t, empty, "both reaped: restore by name takes the newer rescue; the old home needs --from", func(t *testing.T) {
		empty.advance(empty.cfg.NoticePeriod + time.Minute)
		empty.run()
		if empty.claim(ns, home) != nil {
			t.Fatal("the second claim-alice was not reaped")
		}
		c, err := empty.restore(restore.Request{Namespace: ns, Claim: home})
		if err != nil {
			t.Fatal(err)
		}
		if got := kube.Claim(c, "").DataSource; got == rescued {
			t.Fatal("restore by name took the old home's rescue, not the newest")
		}
		empty.deleteClaim(ns, home) // the user looks: not their files
		from := restore.Request{Namespace: ns, From: rescued, As: home + "-before"}
		if _, err := empty.restore(from); err == nil || !strings.Contains(err.Error(), "holds newer data") {
			t.Fatalf("restore --from the old home: %v, want a refusal naming the newer rescue", err)
		}
		from.AllowOlder = true
		if _, err := empty.restore(from); err != nil {
			t.Fatalf("restore --from the old home --allow-older: %v", err)
		}
	})

	// The recipe: the pre_spawn_hook restores claim-alice before the
	// spawner starts; KubeSpawner's create is answered 409 and it mounts
	// the claim that is there.
	hook := w.clone()
	step(t, hook, "returns with the pre_spawn_hook: janitor restore, then the pod", func(t *testing.T) {
		c, err := hook.restore(restore.Request{Namespace: ns, Claim: home})
		if err != nil {
			t.Fatalf("janitor restore %s/%s: %v", ns, home, err)
		}
		if got := kube.Claim(c, "").DataSource; got != rescued {
			t.Fatalf("restored from %q, want the rescue %s", got, rescued)
		}
		if !hook.inScope(c) {
			t.Fatal("the restored claim lost KubeSpawner's labels: out of the selector")
		}
		hook.startPod(objs.pod(t, "jupyter-alice"))
		hook.advance(time.Hour)
		wantState(t, hook, ns, home, classify.InUse, "jupyter-alice")
		wantHeldBy(t, hook, ns, rescued, home)
		wantPrune(t, hook, ns, rescued, true, "its data is also in restored claim "+home)
	})
}

// --- Coder -------------------------------------------------------------------

// TestCoder: a stop destroys the workspace's Deployment and keeps its home
// claim; the janitor rescues the home of a workspace stopped past the grace
// period and reaps it after the owner's notice; the next start makes the
// claim again, from the rescue with home-from-rescue.tf, empty without.
func TestCoder(t *testing.T) {
	const ns = "coder-workspaces"
	const id = "0f8a3c2e-6b1d-4e57-9a2f-3c4d5e6f7a8b"
	const home, deploy = "coder-" + id + "-home", "coder-" + id
	objs := loadObjects(t, platformFile(t, "coder", "workspace.yaml"))
	w := newWorld(t, platformFile(t, "coder", "janitor.yaml"))
	step(t, w, "running: the home claim and the Deployment", func(t *testing.T) {
		w.createClaim(objs.claim(t, home))
		w.applyDeployment(objs.deploy(t, deploy))
		w.advance(time.Hour)
		w.run()
		wantState(t, w, ns, home, classify.InUse, "Deployment "+ns+"/"+deploy)
	})
	step(t, w, "stopped: start_count 0 destroys the Deployment", func(t *testing.T) {
		w.deleteDeployment(ns, deploy)
	})
	step(t, w, "stopped for a day: in grace, nothing rescued", func(t *testing.T) {
		w.advance(time.Minute)
		w.run()
		w.advance(24 * time.Hour)
		w.run()
		wantState(t, w, ns, home, classify.Grace, "")
		if r := w.rescuesOf(home); len(r) != 0 {
			t.Fatalf("rescued within the grace period: %v", r)
		}
	})
	step(t, w, "started again within the grace period: in use, the marks go", func(t *testing.T) {
		w.applyDeployment(objs.deploy(t, deploy))
		w.advance(time.Hour)
		w.run()
		wantState(t, w, ns, home, classify.InUse, deploy)
		if _, ok := w.claim(ns, home).Annotations[inventory.AnnotationOrphanedSince]; ok {
			t.Fatal("the orphaned-since mark survived a use")
		}
		w.deleteDeployment(ns, deploy)
	})
	rescued := orphanRescueReap(t, w, ns, home)
	step(t, w, "the rescue carries the workspace id", func(t *testing.T) {
		if got := w.snapshot(ns, rescued).Labels["com.coder.workspace.id"]; got != id {
			t.Fatalf("rescue's workspace label %q, want %s", got, id)
		}
	})

	// Coder's template as shipped: terraform sees the claim gone and
	// creates it again from the same resource: empty.
	shipped := w.clone()
	step(t, shipped, "started with the shipped template: the home made again, empty", func(t *testing.T) {
		shipped.createClaim(objs.claim(t, home))
		shipped.applyDeployment(objs.deploy(t, deploy))
		shipped.advance(time.Hour)
		wantState(t, shipped, ns, home, classify.InUse, deploy)
		wantHeldBy(t, shipped, ns, rescued, "")
		wantPrune(t, shipped, ns, rescued, false, "the only copy")
	})

	// home-from-rescue.tf: the claim names the newest rescue of the
	// workspace (by pvc-janitor.io/orphaned-since) as its dataSourceRef.
	recipe := w.clone()
	step(t, recipe, "started with home-from-rescue.tf: the home made from the rescue", func(t *testing.T) {
		c := objs.claim(t, home)
		group := "snapshot.storage.k8s.io"
		c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: newestRescue(t, recipe, ns, id, home)}
		recipe.createClaim(c)
		recipe.applyDeployment(objs.deploy(t, deploy))
		recipe.advance(time.Hour)
		wantState(t, recipe, ns, home, classify.InUse, deploy)
		wantHeldBy(t, recipe, ns, rescued, home)
		wantPrune(t, recipe, ns, rescued, true, "its data is also in claim "+home)
	})
}

// newestRescue picks the rescue as home-from-rescue.tf does: the janitor's
// ready rescues of the workspace and of this very claim, not archives,
// the greatest "<orphaned-since>/<name>".
func newestRescue(t *testing.T, w *world, ns, id, claim string) string {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{inventory.LabelManagedBy: inventory.ManagedByValue, "com.coder.workspace.id": id})
	var keys []string
	for _, s := range w.snaps {
		if s.Namespace != ns || !sel.Matches(labels.Set(s.Labels)) || s.Labels[inventory.LabelSuperseded] == "true" ||
			s.Status == nil || s.Status.ReadyToUse == nil || !*s.Status.ReadyToUse || s.Status.Error != nil || s.DeletionTimestamp != nil ||
			s.Annotations[inventory.AnnotationSourceName] != claim {
			continue
		}
		keys = append(keys, s.Annotations[inventory.AnnotationOrphanedSince]+"/"+s.Name)
	}
	if len(keys) == 0 {
		t.Fatal("no rescue for the template to restore from")
	}
	slices.Sort(keys)
	_, name, _ := strings.Cut(keys[len(keys)-1], "/")
	return name
}

// --- Eclipse Che / DevWorkspace Operator -------------------------------------

// TestDevWorkspacePerWorkspace: storage-<id> is owned by its DevWorkspace,
// so stopped or running it is in use while the DevWorkspace exists; the
// janitor rescues it only when that chain broke, and a DevWorkspace made
// again with the same id finds the claim restored under its name.
func TestDevWorkspacePerWorkspace(t *testing.T) {
	const ns, id = "alice-che", "workspace8c2f1a4b3d5e4f60"
	const claim = "storage-" + id
	const dwUID = types.UID("8c2f1a4b-3d5e-4f60-9a7b-c1d2e3f4a5b6")
	objs := loadObjects(t, platformFile(t, "devworkspace", "per-workspace.yaml"))
	w := newWorld(t, platformFile(t, "devworkspace", "janitor.yaml"))
	running := objs.deploy(t, id)
	step(t, w, "running: the claim owned by the DevWorkspace, the Deployment names it", func(t *testing.T) {
		w.owners[dwUID] = "DevWorkspace/my-project"
		w.createClaim(objs.claim(t, claim))
		w.applyDeployment(running)
		w.advance(time.Hour)
		w.run()
		wantState(t, w, ns, claim, classify.InUse, "")
	})
	step(t, w, "stopped: the Deployment scaled to 0, still in use (template and owner)", func(t *testing.T) {
		stopped := running.DeepCopy()
		zero := int32(0)
		stopped.Spec.Replicas = &zero
		w.applyDeployment(stopped)
		w.advance(w.cfg.GracePeriod * 3)
		w.run()
		wantState(t, w, ns, claim, classify.InUse, "pod template volume "+claim)
		w.deleteDeployment(ns, id)
		w.advance(time.Minute)
		wantState(t, w, ns, claim, classify.InUse, "DevWorkspace "+ns+"/my-project (owner)")
	})
	step(t, w, "the DevWorkspace deleted with --cascade=orphan: no owner, no user", func(t *testing.T) {
		delete(w.owners, dwUID)
		w.claim(ns, claim).OwnerReferences = nil // the garbage collector's orphan finalizer
	})
	rescued := orphanRescueReap(t, w, ns, claim)

	// The DevWorkspace made again with the same id (the
	// controller.devfile.io/devworkspace_id_override annotation).
	const newUID = types.UID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
	again := func(w *world) {
		w.owners[newUID] = "DevWorkspace/my-project"
		d := running.DeepCopy()
		d.OwnerReferences[0].UID = newUID
		w.applyDeployment(d)
	}
	empty := w.clone()
	step(t, empty, "made again without a restore: the operator creates storage-<id>, empty", func(t *testing.T) {
		c := objs.claim(t, claim)
		c.OwnerReferences[0].UID = newUID
		empty.createClaim(c)
		again(empty)
		empty.advance(time.Hour)
		wantState(t, empty, ns, claim, classify.InUse, "")
		wantHeldBy(t, empty, ns, rescued, "")
		wantPrune(t, empty, ns, rescued, false, "the only copy")
	})
	restored := w.clone()
	step(t, restored, "made again after janitor restore: the operator uses the claim it finds", func(t *testing.T) {
		c, err := restored.restore(restore.Request{Namespace: ns, Claim: claim})
		if err != nil {
			t.Fatalf("janitor restore %s/%s: %v", ns, claim, err)
		}
		if len(c.OwnerReferences) != 0 {
			t.Fatalf("the restored claim has owner references %v", c.OwnerReferences)
		}
		again(restored) // a claim is immutable to the operator's sync: no owner is added
		restored.advance(time.Hour)
		wantState(t, restored, ns, claim, classify.InUse, "pod template volume "+claim)
		wantHeldBy(t, restored, ns, rescued, claim)
		wantPrune(t, restored, ns, rescued, true, "its data is also in restored claim "+claim)
	})
}

// TestDevWorkspacePerUser: claim-devworkspace holds every workspace of
// its user. The recipe leaves it out; the janitor told to take it would
// rescue and reap it once every workspace is stopped and cleaned up, and
// the operator would make it again, empty, at the next start.
func TestDevWorkspacePerUser(t *testing.T) {
	const ns, claim = "alice-che", "claim-devworkspace"
	objs := loadObjects(t, platformFile(t, "devworkspace", "per-user.yaml"))
	w := newWorld(t, platformFile(t, "devworkspace", "janitor.yaml"))
	w.owners["8c2f1a4b-3d5e-4f60-9a7b-c1d2e3f4a5b6"] = "DevWorkspace/my-project"
	w.owners["2b4d6f80-1a3c-4e5f-8b9d-0c1e2f3a4b5c"] = "DevWorkspace/other-project"
	w.createClaim(objs.claim(t, claim))
	for _, d := range objs.deploys {
		w.applyDeployment(d)
	}
	w.startPod(objs.pod(t, "workspace8c2f1a4b3d5e4f60-7d9f8c6b5-x2x7q"))
	w.advance(time.Hour)

	step(t, w, "the recipe's selector leaves the per-user claim out", func(t *testing.T) {
		for _, c := range w.read(true).Claims {
			if c.Name == claim {
				t.Fatalf("%s is in scope of the recipe", claim)
			}
		}
	})

	// The janitor told to take per-user claims too.
	w.cfg.Selector = labels.SelectorFromSet(labels.Set{"controller.devfile.io/devworkspace_pvc_type": "per-user"})
	step(t, w, "one of two workspaces running: in use by its pod", func(t *testing.T) {
		w.run()
		wantState(t, w, ns, claim, classify.InUse, "Pod "+ns+"/workspace8c2f1a4b3d5e4f60")
	})
	step(t, w, "both stopped (Deployments at 0): still in use by their templates", func(t *testing.T) {
		w.deletePod(ns, "workspace8c2f1a4b3d5e4f60-7d9f8c6b5-x2x7q")
		for _, d := range slices.Clone(w.deploys) {
			zero := int32(0)
			d.Spec.Replicas = &zero
		}
		w.advance(w.cfg.GracePeriod * 3)
		w.run()
		wantState(t, w, ns, claim, classify.InUse, "pod template volume "+claim)
	})
	step(t, w, "both stopped under cleanupOnStop: the Deployments deleted", func(t *testing.T) {
		for _, d := range slices.Clone(w.deploys) {
			w.deleteDeployment(d.Namespace, d.Name)
		}
	})
	rescued := orphanRescueReap(t, w, ns, claim)
	step(t, w, "the next start: the operator makes claim-devworkspace again, empty", func(t *testing.T) {
		w.createClaim(objs.claim(t, claim))
		for _, d := range objs.deploys {
			w.applyDeployment(d)
		}
		w.advance(time.Hour)
		wantState(t, w, ns, claim, classify.InUse, "")
		wantHeldBy(t, w, ns, rescued, "")
		if _, err := w.restore(restore.Request{Namespace: ns, Claim: claim}); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Fatalf("restore over the new claim: %v, want a refusal (the name is taken)", err)
		}
		wantPrune(t, w, ns, rescued, false, "the only copy")
	})
}

// --- Gitpod-style ------------------------------------------------------------

// TestGitpodStyle: a claim per instance (ws-<instance id>), the workspace
// is metaID. The manager snapshots the claim at stop and deletes it; when
// it crashed in between, the janitor rescues and reaps the claim. The next
// instance starts from a snapshot through spec.dataSource: the manager's
// own (cut before the first instance's last use ended: it holds nothing
// the janitor can prove) or the janitor's rescue (descent: it holds it).
func TestGitpodStyle(t *testing.T) {
	const ns, meta = "default", "alice-myrepo-5x8k2m1n4pq"
	const i1, i2 = "1c5a7e9b-3d2f-4a6c-8b0e-2f4a6c8e0b1d", "7e3b9c1d-5a2f-4d68-b0e4-9f1a2b3c4d5e"
	objs := loadObjects(t, platformFile(t, "gitpod", "instance.yaml"))
	w := newWorld(t, platformFile(t, "gitpod", "janitor.yaml"))
	// instance renames instance 2's objects (instance.yaml) to another
	// instance id: the manager makes every instance alike.
	instance := func(id string) (*corev1.PersistentVolumeClaim, *corev1.Pod, *snapv1.VolumeSnapshot) {
		c, p, s := objs.claim(t, "ws-"+i2), objs.pod(t, "ws-"+i2), objs.snaps[0].DeepCopy()
		c.Name, p.Name, s.Name = "ws-"+id, "ws-"+id, id
		for _, m := range []map[string]string{c.Labels, p.Labels, s.Labels} {
			m["workspaceID"] = id
		}
		p.Annotations["gitpod/id"], s.Annotations["gitpod/id"] = id, id
		p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = c.Name
		s.Spec.Source.PersistentVolumeClaimName = &c.Name
		c.Spec.DataSource, c.Spec.DataSourceRef = nil, nil
		return c, p, s
	}
	c1, p1, s1 := instance(i1)
	step(t, w, "instance 1: a claim made empty (a new workspace), its pod", func(t *testing.T) {
		w.createClaim(c1)
		w.startPod(p1)
		w.advance(time.Hour)
		w.run()
		wantState(t, w, ns, c1.Name, classify.InUse, "Pod "+ns+"/"+c1.Name)
	})
	step(t, w, "stopping: the manager's snapshot, cut while the pod still holds the claim", func(t *testing.T) {
		w.addSnapshot(s1, w.now, "Delete")
		w.advance(time.Minute)
	})
	step(t, w, "the manager crashed before deleting the claim; the pod's finalizer removed", func(t *testing.T) {
		w.deletePod(ns, p1.Name)
	})
	rescued := orphanRescueReap(t, w, ns, c1.Name)
	step(t, w, "the rescue is the janitor's, beside the manager's snapshot", func(t *testing.T) {
		if rescued == s1.Name {
			t.Fatal("the manager's snapshot was taken as the rescue")
		}
		if got := w.snapshot(ns, rescued).Labels["metaID"]; got != meta {
			t.Fatalf("rescue's workspace label %q, want %s", got, meta)
		}
	})

	// The manager as it is: instance 2 from the snapshot it recorded
	// (instance.yaml exactly).
	own := w.clone()
	step(t, own, "instance 2 from the manager's own snapshot (dataSource): the rescue is kept", func(t *testing.T) {
		c2 := objs.claim(t, "ws-"+i2)
		if got := kube.Claim(c2, "").DataSource; got != s1.Name {
			t.Fatalf("instance.yaml's claim restores from %q, want %s", got, s1.Name)
		}
		own.createClaim(c2)
		own.startPod(objs.pod(t, "ws-"+i2))
		own.advance(time.Hour)
		wantState(t, own, ns, c2.Name, classify.InUse, "")
		wantHeldBy(t, own, ns, rescued, "")
		wantPrune(t, own, ns, rescued, false, "the only copy")
	})

	// The recipe: the manager (or a step before it) starts instance 2 from
	// the janitor's rescue when its data time is newer than its own
	// snapshot's.
	recipe := w.clone()
	step(t, recipe, "instance 2 from the janitor's rescue (dataSource): the rescue is held", func(t *testing.T) {
		c2 := objs.claim(t, "ws-"+i2)
		c2.Spec.DataSource.Name = rescued
		recipe.createClaim(c2)
		recipe.startPod(objs.pod(t, "ws-"+i2))
		recipe.advance(time.Hour)
		wantState(t, recipe, ns, c2.Name, classify.InUse, "")
		wantHeldBy(t, recipe, ns, rescued, c2.Name)
		wantPrune(t, recipe, ns, rescued, true, "its data is also in claim "+c2.Name)
	})
}
