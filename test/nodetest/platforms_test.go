//go:build integration && node

package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The platform tests (issue 41, docs/platforms.md): each platform's
// objects exactly as examples/platforms/<platform>/ has them, created on the
// node, and a workspace's whole life with bytes on a real volume: a pod
// writes a file, the workspace stops the platform's way, the janitor (the
// recipe's configuration) finds the orphan, rescues and reaps it, the user
// comes back the platform's way with the recipe's restore, and a pod reads
// the file back byte for byte.
//
// What the test changes in the platforms' objects, and why:
//   - the storage class: the platforms name the cluster's default class (or
//     a cloud's); this cluster has the project's CSI driver's class only;
//   - the container image and its arguments: the workspace image
//     (test/cmd/workspace) writes or prints the file at the platform's
//     mount path; nothing is pulled here;
//   - Deployments: the stack runs no deployment controller
//     (testenv.Controllers), so the test runs a Deployment's pod itself,
//     from its template, as the ReplicaSet would;
//   - a Gitpod pod's finalizer: the manager removes it once its stop is
//     done; the test's stop is the manager's crash, and no finalizer is set.
//
// Each platform's life logs one line of the table docs/platforms.md
// records (found, rescued, reaped, back on return, bytes equal).

// The janitor's settings for a life within a test: the recipe's grace
// period, notice and minimum age are days; here they are nothing, and every
// claim in scope may be reaped.
var fastLife = []string{"--min-age", "0s", "--grace-period", "0s", "--notice-period", "0s",
	"--max-deletion-percent", "100", "--lock-namespace", "default"}

// TestPlatformJupyterHub: claim-alice and the bare pod jupyter-alice;
// stop deletes the pod; the return runs the pre_spawn_hook's restore before
// the spawner's create of claim-<user>, which the API server answers 409
// (KubeSpawner then mounts it). Then the same name reused without the hook:
// the spawner makes claim-alice again, empty; the janitor keeps the rescue,
// refuses a restore over the new claim, and the old home comes back beside
// it with --from … --as … --allow-older.
func TestPlatformJupyterHub(t *testing.T) {
	needNode(t)
	start := time.Now()
	cfg := platformFile("jupyterhub", "janitor.yaml")
	objs := platformObjects(t, "jupyterhub", "user-server.yaml")
	pvc, pod := objs.claim(t, "claim-alice"), objs.pod(t, "jupyter-alice")
	ns := pvc.Namespace
	namespace(t, ns)
	text := fmt.Sprintf("alice's notebook, %d", time.Now().UnixNano())
	createClaim(t, pvc)
	runPod(t, pod, text)
	stopPod(t, ns, pod.Name)
	row := reapLife(t, cfg, ns, pvc.Name)

	// The hook: the claim is missing, so janitor restore, with the
	// recipe's configuration; then the spawner's own create.
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), pvc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("before the hook: claim %s: %v, want it gone", pvc.Name, err)
	}
	janitor(t, "restore", ns+"/"+pvc.Name, "--config", cfg, "--restore-timeout", "2m")
	row.back = true
	again := onThisCluster(objs.claim(t, "claim-alice"))
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), again, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("the spawner's create of %s after the hook: %v, want AlreadyExists (KubeSpawner reuses it)", pvc.Name, err)
	}
	row.bytes = readBackPod(t, pod) == text
	if !row.bytes {
		t.Fatalf("%s after the hook does not hold alice's file", pvc.Name)
	}
	row.log(t, "JupyterHub", start)

	// The same name reused without the hook: the restored home is used
	// (read), stops and is reaped again; then the spawner makes
	// claim-alice again, empty (KubeSpawner 7.0, or a spawner without
	// state).
	stopPod(t, ns, pod.Name+"-read")
	reapLife(t, cfg, ns, pvc.Name)
	oldRescue := newestRescue(t, ns, "", pvc.Name)
	createClaim(t, onThisCluster(objs.claim(t, "claim-alice")))
	if out, code := janitorCode(t, "restore", ns+"/"+pvc.Name, "--config", cfg); code != 2 || !strings.Contains(out, "exists") {
		t.Fatalf("restore over the empty claim-alice: exit %d, %s; want 2, the name is taken", code, out)
	}
	// The new claim descends from nothing: the old home's newest rescue is
	// its only copy, and prune keeps it whatever its age (the first
	// rescue's data is in it: that one may go).
	janitorReport(t, "prune", "--config", cfg, "-n", ns, "--keep-for", "1s", "--yes", "-o", "json",
		"--max-deletion-percent", "100", "--lock-namespace", "default")
	if !snapshotExists(t, ns, oldRescue) {
		t.Fatalf("rescue %s of the old home is gone after the name was reused and prune ran", oldRescue)
	}
	janitor(t, "restore", "-n", ns, "--from", oldRescue, "--as", "claim-alice-before", "--allow-older",
		"--config", cfg, "--restore-timeout", "2m")
	before := pod.DeepCopy()
	before.Name = "jupyter-alice-before"
	before.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "claim-alice-before"
	if got := readBackPod(t, before); got != text {
		t.Fatalf("claim-alice-before holds %q, want %q", got, text)
	}
	t.Logf("JupyterHub, the name reused: the old rescue kept, restore over the new claim refused, restored beside it: bytes equal; %.0f s in all", time.Since(start).Seconds())
}

// TestPlatformCoder: the home claim and the Deployment of coder's
// kubernetes template; stop
// destroys the Deployment (Terraform, count = start_count); the stopped
// workspace's home is an orphan; the return is home-from-rescue.tf's: the
// claim made again with a dataSourceRef to its newest ready rescue.
func TestPlatformCoder(t *testing.T) {
	needNode(t)
	start := time.Now()
	cfg := platformFile("coder", "janitor.yaml")
	objs := platformObjects(t, "coder", "workspace.yaml")
	home := objs.claim(t, "coder-0f8a3c2e-6b1d-4e57-9a2f-3c4d5e6f7a8b-home")
	deploy := objs.deployment(t, "coder-0f8a3c2e-6b1d-4e57-9a2f-3c4d5e6f7a8b")
	ns, ws := home.Namespace, home.Labels["com.coder.workspace.id"]
	namespace(t, ns)
	createClaim(t, home)
	// The stopped workspace: made, used, stopped, and left stopped.
	text := fmt.Sprintf("alice's home on coder, %d", time.Now().UnixNano())
	createDeployment(t, deploy)
	pod := deploymentPod(deploy)
	runPod(t, pod, text)
	stopDeployment(t, deploy, pod.Name)
	row := reapLife(t, cfg, ns, home.Name)

	// The start: the template's lookup of the newest rescue, the claim
	// made from it, the Deployment again.
	again := onThisCluster(objs.claim(t, home.Name))
	rescueName := newestRescue(t, ns, "com.coder.workspace.id="+ws, home.Name)
	group := "snapshot.storage.k8s.io"
	again.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: rescueName}
	createClaim(t, again)
	row.back = true
	createDeployment(t, deploy)
	row.bytes = readBackPod(t, deploymentPod(deploy)) == text
	if !row.bytes {
		t.Fatalf("the home made from rescue %s does not hold the file", rescueName)
	}
	row.log(t, "Coder", start)
}

// TestPlatformCoderHomeAndData: a workspace with two claims, the starter
// template's home and a data claim beside it, each labelled with its role
// (app.kubernetes.io/component, the recipe's volume-label); a pod writes
// each; the stop destroys the Deployment; both are rescued and reaped; on
// return janitor restore --workspace brings both back, each from its own
// rescue (docs/spec.md#restore-roles).
func TestPlatformCoderHomeAndData(t *testing.T) {
	needNode(t)
	start := time.Now()
	cfg := platformFile("coder", "janitor.yaml")
	objs := platformObjects(t, "coder", "workspace.yaml")
	const id = "0f8a3c2e-6b1d-4e57-9a2f-3c4d5e6f7a8b"
	home := objs.claim(t, "coder-"+id+"-home")
	ns := home.Namespace + "-2"
	home.Namespace = ns
	data := home.DeepCopy()
	data.Name = "coder-" + id + "-data"
	home.Labels["app.kubernetes.io/component"], data.Labels["app.kubernetes.io/component"] = "home", "data"
	namespace(t, ns)
	createClaim(t, home)
	createClaim(t, data)
	deploy := objs.deployment(t, "coder-"+id)
	deploy.Namespace = ns
	tpl := &deploy.Spec.Template.Spec
	tpl.Volumes = append(tpl.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: data.Name}}})
	tpl.Containers[0].VolumeMounts = append(tpl.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	createDeployment(t, deploy)
	// The workspace image writes at its first mount: one pod per claim,
	// the second with the mounts the other way round.
	homePod := deploymentPod(deploy)
	dataPod := deploymentPod(deploy)
	dataPod.Name = deploy.Name + "-data"
	m := dataPod.Spec.Containers[0].VolumeMounts
	m[0], m[1] = m[1], m[0]
	text := map[string]string{
		home.Name: fmt.Sprintf("alice's home, %d", time.Now().UnixNano()),
		data.Name: fmt.Sprintf("alice's data, %d", time.Now().UnixNano()),
	}
	runPod(t, homePod, text[home.Name])
	runPod(t, dataPod, text[data.Name])
	deleteDeployment(t, deploy)
	stopPod(t, ns, homePod.Name)
	stopPod(t, ns, dataPod.Name)
	row := reapLife(t, cfg, ns, home.Name, data.Name)

	rep := janitorReport(t, "restore", "--config", cfg, "-n", ns, "--workspace", id, "--restore-timeout", "2m", "-o", "json")
	for _, name := range []string{home.Name, data.Name} {
		if e := entry(rep, ns, name); e == nil || e.Action != "restored" {
			t.Fatalf("restore --workspace %s: %s: %+v; want restored", id, name, e)
		}
	}
	row.back = true
	createDeployment(t, deploy)
	row.bytes = readBackPod(t, homePod) == text[home.Name] && readBackPod(t, dataPod) == text[data.Name]
	if !row.bytes {
		t.Fatal("the restored home and data do not hold their files")
	}
	row.log(t, "Coder, home and data", start)
}

// TestPlatformDevWorkspacePerWorkspace: the DevWorkspace (its CRD, reduced
// to a schemaless one), storage-<id> owned by it, the Deployment; a stop
// scales the Deployment to 0: the claim stays in use (owner, template) and
// the janitor leaves it. The orphan: the DevWorkspace deleted with
// --cascade=orphan and its Deployment gone. The return: janitor restore
// storage-<id>, then the DevWorkspace made again with the id override.
func TestPlatformDevWorkspacePerWorkspace(t *testing.T) {
	needNode(t)
	start := time.Now()
	ctx := context.Background()
	cfg := platformFile("devworkspace", "janitor.yaml")
	objs := platformObjects(t, "devworkspace", "per-workspace.yaml")
	pvc := objs.claim(t, "storage-workspace8c2f1a4b3d5e4f60")
	deploy := objs.deployment(t, "workspace8c2f1a4b3d5e4f60")
	dw := objs.other(t, "DevWorkspace", "my-project")
	ns := pvc.Namespace
	namespace(t, ns)
	devWorkspaceCRD(t)
	uid := createDevWorkspace(t, dw)
	pvc.OwnerReferences[0].UID, deploy.OwnerReferences[0].UID = uid, uid
	createClaim(t, pvc)
	createDeployment(t, deploy)
	text := fmt.Sprintf("alice's project on che, %d", time.Now().UnixNano())
	pod := deploymentPod(deploy)
	runPod(t, pod, text)

	// Stopped: the Deployment at 0 replicas, its pod gone.
	scaleDeployment(t, deploy, 0)
	stopPod(t, ns, pod.Name)
	rep := janitorReport(t, append([]string{"run", "--config", cfg, "-n", ns, "--yes", "-o", "json"}, fastLife...)...)
	if e := entry(rep, ns, pvc.Name); e == nil || e.State != "InUse" || e.Action != "" {
		t.Fatalf("a stopped DevWorkspace's claim: %+v; want InUse, nothing done", e)
	}

	// The chain broken: the DevWorkspace deleted, its dependents orphaned
	// (the garbage collector removes their owner references), the
	// Deployment gone.
	orphan := metav1.DeletePropagationOrphan
	if err := dyn.Resource(devWorkspaces).Namespace(ns).Delete(ctx, dw.GetName(), metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "owner reference of "+pvc.Name+" removed", func() (bool, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		return err == nil && len(c.OwnerReferences) == 0, err
	})
	deleteDeployment(t, deploy)
	row := reapLife(t, cfg, ns, pvc.Name)

	// The return: the restore, then the DevWorkspace with the id override.
	janitor(t, "restore", ns+"/"+pvc.Name, "--config", cfg, "-n", ns, "--restore-timeout", "2m")
	row.back = true
	dw2 := dw.DeepCopy()
	dw2.SetName("my-project-again")
	dw2.SetAnnotations(map[string]string{"controller.devfile.io/devworkspace_id_override": pvc.Labels["controller.devfile.io/devworkspace_id"]})
	uid = createDevWorkspace(t, dw2)
	deploy2 := objs.deployment(t, "workspace8c2f1a4b3d5e4f60")
	deploy2.OwnerReferences[0].UID, deploy2.OwnerReferences[0].Name = uid, dw2.GetName()
	createDeployment(t, deploy2)
	row.bytes = readBackPod(t, deploymentPod(deploy2)) == text
	if !row.bytes {
		t.Fatalf("the restored %s does not hold the file", pvc.Name)
	}
	row.log(t, "DevWorkspace per-workspace", start)
}

// TestPlatformDevWorkspacePerUser: claim-devworkspace shared by two
// DevWorkspaces of one user, one running (its pod writes in its subPath),
// the other stopped (its Deployment at 0 still names the claim). The
// recipe leaves per-user claims out of scope; a janitor told to take them
// anyway sees the claim in use and leaves it, and the running workspace's
// file is there.
func TestPlatformDevWorkspacePerUser(t *testing.T) {
	needNode(t)
	start := time.Now()
	cfg := platformFile("devworkspace", "janitor.yaml")
	objs := platformObjects(t, "devworkspace", "per-user.yaml")
	// Another namespace than per-workspace's: the two files name the same
	// DevWorkspace and Deployment in alice-che.
	const ns = "bob-che"
	namespace(t, ns)
	devWorkspaceCRD(t)
	uids := map[string]types.UID{}
	for _, name := range []string{"my-project", "other-project"} {
		dw := objs.other(t, "DevWorkspace", name)
		dw.SetNamespace(ns)
		uids[name] = createDevWorkspace(t, dw)
	}
	pvc := objs.claim(t, "claim-devworkspace")
	pvc.Namespace = ns
	createClaim(t, pvc)
	for _, name := range []string{"workspace8c2f1a4b3d5e4f60", "workspace2b4d6f801a3c4e5f"} {
		d := objs.deployment(t, name)
		d.Namespace = ns
		d.OwnerReferences[0].UID = uids[d.OwnerReferences[0].Name]
		createDeployment(t, d)
	}
	pod := objs.pod(t, "workspace8c2f1a4b3d5e4f60-7d9f8c6b5-x2x7q")
	pod.Namespace = ns
	text := fmt.Sprintf("alice's my-project, %d", time.Now().UnixNano())
	runPod(t, pod, text)

	rep := janitorReport(t, append([]string{"run", "--config", cfg, "-n", ns, "--yes", "-o", "json"}, fastLife...)...)
	if e := entry(rep, ns, pvc.Name); e != nil {
		t.Fatalf("the recipe's janitor found the per-user claim: %+v; want it out of scope", e)
	}
	rep = janitorReport(t, append([]string{"run", "--config", cfg, "-n", ns, "--yes", "-o", "json",
		"-l", "controller.devfile.io/devworkspace_pvc_type=per-user"}, fastLife...)...)
	if e := entry(rep, ns, pvc.Name); e == nil || e.State != "InUse" || e.Action != "" {
		t.Fatalf("the shared claim with one workspace running: %+v; want InUse, nothing done", e)
	}
	// The running workspace stops (its Deployment to 0, its pod gone):
	// both Deployments at 0 still name the claim: in use, left.
	running := objs.deployment(t, "workspace8c2f1a4b3d5e4f60")
	running.Namespace = ns
	scaleDeployment(t, running, 0)
	stopPod(t, ns, pod.Name)
	rep = janitorReport(t, append([]string{"run", "--config", cfg, "-n", ns, "--yes", "-o", "json",
		"-l", "controller.devfile.io/devworkspace_pvc_type=per-user"}, fastLife...)...)
	if e := entry(rep, ns, pvc.Name); e == nil || e.State != "InUse" || e.Action != "" {
		t.Fatalf("the shared claim, every workspace stopped, Deployments at 0: %+v; want InUse, nothing done", e)
	}
	if got := readBackPod(t, pod); got != text {
		t.Fatalf("the shared claim holds %q in my-project's subPath, want %q", got, text)
	}
	t.Logf("platform DevWorkspace per-user: out of the recipe's scope; taken anyway: InUse with one workspace running and with every one stopped (Deployments at 0), nothing done; bytes equal; %.0f s", time.Since(start).Seconds())
}

// TestPlatformGitpod: the instance's claim ws-<instance id> and its pod;
// a stop broken halfway (the manager gone before its snapshot and delete);
// the janitor rescues and reaps the claim; the next instance's claim is
// made with spec.dataSource from the newest snapshot of the workspace
// (metaID): the janitor's rescue.
func TestPlatformGitpod(t *testing.T) {
	needNode(t)
	start := time.Now()
	cfg := platformFile("gitpod", "janitor.yaml")
	objs := platformObjects(t, "gitpod", "instance.yaml")
	pvc := objs.claim(t, "ws-7e3b9c1d-5a2f-4d68-b0e4-9f1a2b3c4d5e")
	pod := objs.pod(t, "ws-7e3b9c1d-5a2f-4d68-b0e4-9f1a2b3c4d5e")
	ns, ws := pvc.Namespace, pvc.Labels["metaID"]
	namespace(t, ns)
	createClaim(t, pvc)
	text := fmt.Sprintf("alice's gitpod workspace, %d", time.Now().UnixNano())
	runPod(t, pod, text)
	stopPod(t, ns, pod.Name)
	row := reapLife(t, cfg, ns, pvc.Name)

	// The next instance: a new claim from the newest snapshot of the
	// workspace, through spec.dataSource, and its pod.
	const next = "ws-0d4e6f8a-1b3c-4d5e-8f9a-0b1c2d3e4f5a"
	src := newestRescue(t, ns, "metaID="+ws, "")
	c := onThisCluster(objs.claim(t, pvc.Name))
	c.Name, c.Labels["workspaceID"] = next, strings.TrimPrefix(next, "ws-")
	group := "snapshot.storage.k8s.io"
	c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: src}
	createClaim(t, c)
	row.back = true
	p := objs.pod(t, pvc.Name)
	p.Name, p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = next, next
	row.bytes = readBackPod(t, p) == text
	if !row.bytes {
		t.Fatalf("the next instance's claim from %s does not hold the file", src)
	}
	row.log(t, "Gitpod-style", start)
}

// --- a life -------------------------------------------------------------

// lifeRow is a line of docs/platforms.md's table.
type lifeRow struct{ found, rescued, reaped, back, bytes bool }

func (r *lifeRow) log(t *testing.T, platform string, start time.Time) {
	t.Helper()
	t.Logf("platform %s: found %v, rescued %v, reaped %v, back on return %v, bytes equal %v; %.0f s",
		platform, r.found, r.rescued, r.reaped, r.back, r.bytes, time.Since(start).Seconds())
}

// reapLife runs the recipe's janitor (janitor run --config FILE, with
// fastLife) until each claim is rescued and deleted (a run before v1.37's
// Unused condition only marks), and waits until the claims are gone.
func reapLife(t *testing.T, cfg, ns string, claims ...string) *lifeRow {
	t.Helper()
	row := &lifeRow{}
	done := map[string]bool{}
	for run := 1; run <= 3 && len(done) < len(claims); run++ {
		rep := janitorReport(t, append([]string{"run", "--config", cfg, "-n", ns, "--yes", "-o", "json"}, fastLife...)...)
		for _, name := range claims {
			e := entry(rep, ns, name)
			if e == nil {
				continue
			}
			row.found = row.found || e.State != "InUse"
			if e.Action == "deleted" {
				done[name] = true
			}
		}
	}
	if len(done) < len(claims) {
		t.Fatalf("after three runs only %v of %v were rescued and deleted", done, claims)
	}
	for _, name := range claims {
		waitClaimGone(t, ns, name)
	}
	row.reaped = true
	for _, name := range claims {
		newestRescue(t, ns, "", name)
	}
	row.rescued = true
	return row
}

// --- the platforms' objects ---------------------------------------------

func platformFile(parts ...string) string {
	return filepath.Join(append([]string{root, "examples", "platforms"}, parts...)...)
}

type platformDocs []*unstructured.Unstructured

// platformObjects reads a YAML file of examples/platforms, one object a
// document.
func platformObjects(t *testing.T, parts ...string) platformDocs {
	t.Helper()
	f, err := os.Open(platformFile(parts...))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out platformDocs
	for {
		var m map[string]any
		if err := d.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", filepath.Join(parts...), err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func (d platformDocs) find(t *testing.T, kind, name string, into any) {
	t.Helper()
	for _, u := range d {
		if u.GetKind() == kind && u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.DeepCopy().Object, into); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return
		}
	}
	t.Fatalf("no %s %s in the platform's file", kind, name)
}

func (d platformDocs) other(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range d {
		if u.GetKind() == kind && u.GetName() == name {
			return u.DeepCopy()
		}
	}
	t.Fatalf("no %s %s in the platform's file", kind, name)
	return nil
}

// claim is the platform's claim as this cluster can provision it.
func (d platformDocs) claim(t *testing.T, name string) *corev1.PersistentVolumeClaim {
	var c corev1.PersistentVolumeClaim
	d.find(t, "PersistentVolumeClaim", name, &c)
	return onThisCluster(&c)
}

func (d platformDocs) pod(t *testing.T, name string) *corev1.Pod {
	var p corev1.Pod
	d.find(t, "Pod", name, &p)
	return &p
}

func (d platformDocs) deployment(t *testing.T, name string) *appsv1.Deployment {
	var dp appsv1.Deployment
	d.find(t, "Deployment", name, &dp)
	return &dp
}

// onThisCluster gives a first claim this cluster's storage class, and no
// data source (a platform's first instance has none).
func onThisCluster(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	sc := testenv.ProvisionedStorageClassName
	c.Spec.StorageClassName = &sc
	c.Spec.DataSource, c.Spec.DataSourceRef = nil, nil
	return c
}

// createClaim creates the claim and waits until it is Bound.
func createClaim(t *testing.T, c *corev1.PersistentVolumeClaim) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "claim "+c.Name+" Bound", func() (bool, error) {
		got, err := kube.CoreV1().PersistentVolumeClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, err
	})
}

// workspaceContainer makes the platform's pod run the workspace image with
// args, the file at the first mount's path: the platform's user, volumes
// and mounts (subPaths too) stay.
func workspaceContainer(p *corev1.Pod, args ...string) *corev1.Pod {
	p = p.DeepCopy()
	p.ResourceVersion, p.UID, p.Finalizers = "", "", nil
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	c := &p.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = testenv.WorkspaceImage, corev1.PullNever
	file := c.VolumeMounts[0].MountPath + "/notes.md"
	c.Command, c.Args = nil, append(args, file)
	if p.Spec.SecurityContext == nil {
		uid := int64(65532)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, FSGroup: &uid}
	}
	return p
}

// runPod runs the platform's pod, writing text to its volume; it returns
// once the pod said so.
func runPod(t *testing.T, p *corev1.Pod, text string) {
	t.Helper()
	ctx := context.Background()
	p = workspaceContainer(p, "write")
	c := &p.Spec.Containers[0]
	c.Args = []string{"write", c.Args[1], text}
	if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "pod "+p.Name+" wrote its file", func() (bool, error) {
		got, err := kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == corev1.PodFailed {
			return false, final{fmt.Errorf("pod failed: %s", podLog(ctx, p.Namespace, p.Name))}
		}
		return got.Status.Phase == corev1.PodRunning && strings.Contains(podLog(ctx, p.Namespace, p.Name), "wrote "), nil
	})
}

// readBackPod runs the platform's pod (named <name>-read) to print the file.
func readBackPod(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	ctx := context.Background()
	p = workspaceContainer(p, "cat")
	p.Name += "-read"
	if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "pod "+p.Name+" Succeeded", func() (bool, error) {
		got, err := kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == corev1.PodFailed {
			return false, final{fmt.Errorf("pod %s failed: %s", p.Name, podLog(ctx, p.Namespace, p.Name))}
		}
		return got.Status.Phase == corev1.PodSucceeded, nil
	})
	return podLog(ctx, p.Namespace, p.Name)
}

// --- Deployments, played by the test ------------------------------------

func createDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	d = d.DeepCopy()
	c := &d.Spec.Template.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = testenv.WorkspaceImage, corev1.PullNever
	if _, err := kube.AppsV1().Deployments(d.Namespace).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deploymentPod is the pod the Deployment's ReplicaSet would make.
func deploymentPod(d *appsv1.Deployment) *corev1.Pod {
	tpl := d.Spec.Template.DeepCopy()
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-pod", Namespace: d.Namespace, Labels: tpl.Labels},
		Spec: tpl.Spec}
}

func scaleDeployment(t *testing.T, d *appsv1.Deployment, n int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := kube.AppsV1().Deployments(d.Namespace).Patch(context.Background(), d.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deleteDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ctx := context.Background()
	if err := kube.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Deployment "+d.Name+" gone", func() (bool, error) {
		_, err := kube.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// stopDeployment is Coder's stop: Terraform destroys the Deployment (and
// with it its pod).
func stopDeployment(t *testing.T, d *appsv1.Deployment, pod string) {
	t.Helper()
	deleteDeployment(t, d)
	stopPod(t, d.Namespace, pod)
}

// --- DevWorkspaces -------------------------------------------------------

var (
	devWorkspaces = schema.GroupVersionResource{Group: "workspace.devfile.io", Version: "v1alpha2", Resource: "devworkspaces"}
	crds          = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	snapshots     = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	dyn           dynamic.Interface
)

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	if dyn == nil {
		var err error
		if dyn, err = dynamic.NewForConfig(cluster.Config); err != nil {
			t.Fatal(err)
		}
	}
	return dyn
}

// devWorkspaceCRD installs the DevWorkspace kind, its schema left open:
// the janitor reads a DevWorkspace only as a claim's owner (its metadata).
func devWorkspaceCRD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "devworkspaces.workspace.devfile.io"},
		"spec": map[string]any{
			"group": "workspace.devfile.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "devworkspaces", "singular": "devworkspace", "kind": "DevWorkspace", "listKind": "DevWorkspaceList"},
			"versions": []any{map[string]any{"name": "v1alpha2", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := dynamicClient(t).Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the DevWorkspace kind served", func() (bool, error) {
		_, err := dyn.Resource(devWorkspaces).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}

// createDevWorkspace creates it and returns the UID the API server gave it
// (the platform's file has one of its own, which a create replaces).
func createDevWorkspace(t *testing.T, dw *unstructured.Unstructured) types.UID {
	t.Helper()
	dw = dw.DeepCopy()
	dw.SetUID("")
	got, err := dynamicClient(t).Resource(devWorkspaces).Namespace(dw.GetNamespace()).Create(context.Background(), dw, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.GetUID()
}

// --- the janitor's rescues ------------------------------------------------

// newestRescue is the recipe's lookup (home-from-rescue.tf's, the Gitpod
// manager's): the janitor's ready rescue, not an archive, of the workspace
// (selector) or of the claim (its pvc-janitor.io/source-name), with the
// newest pvc-janitor.io/orphaned-since.
func newestRescue(t *testing.T, ns, selector, claim string) string {
	t.Helper()
	sel := "app.kubernetes.io/managed-by=pvc-janitor,pvc-janitor.io/superseded!=true"
	if selector != "" {
		sel += "," + selector
	}
	list, err := dynamicClient(t).Resource(snapshots).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, s := range list.Items {
		ready, _, _ := unstructured.NestedBool(s.Object, "status", "readyToUse")
		if !ready || s.GetDeletionTimestamp() != nil || claim != "" && s.GetAnnotations()["pvc-janitor.io/source-name"] != claim {
			continue
		}
		found = append(found, s.GetAnnotations()["pvc-janitor.io/orphaned-since"]+"/"+s.GetName())
	}
	if len(found) == 0 {
		t.Fatalf("no ready rescue in %s (%s, claim %q)", ns, sel, claim)
	}
	sort.Strings(found)
	_, name, _ := strings.Cut(found[len(found)-1], "/")
	return name
}

func snapshotExists(t *testing.T, ns, name string) bool {
	t.Helper()
	s, err := dynamicClient(t).Resource(snapshots).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && s.GetDeletionTimestamp() == nil
}

// --- the janitor on the host -----------------------------------------------

// janitorCode runs this checkout's janitor and returns its output and exit
// code.
func janitorCode(t *testing.T, args ...string) (string, int) {
	t.Helper()
	janitorBinary(t)
	cmd := exec.Command(filepath.Join(cluster.Dir, "bin", "janitor"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// janitorReport runs the janitor with -o json and decodes its report
// (stdout); its log (stderr) goes to the test's log on failure.
func janitorReport(t *testing.T, args ...string) *report.Report {
	t.Helper()
	janitorBinary(t)
	cmd := exec.Command(filepath.Join(cluster.Dir, "bin", "janitor"), append(args, "--kubeconfig", cluster.Kubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("janitor %s: %v\n%s\n%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	var r report.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("janitor %s: report: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return &r
}

func janitorBinary(t *testing.T) {
	t.Helper()
	bin := filepath.Join(cluster.Dir, "bin", "janitor")
	if _, err := os.Stat(bin); err == nil {
		return
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/janitor")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build janitor: %v\n%s", err, out)
	}
}
