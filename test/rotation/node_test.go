//go:build integration && node

package rotation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/test/rotation/workfiles"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// workfilesImage runs test/rotation/workfiles/cmd/workfiles on the nodes.
const workfilesImage = "pvc-janitor.local/workfiles:1"

// TestRotateClusterThroughNodes is issue 42's rotation with the bytes
// written and read through the nodes (docs/node.md#a-rotation-through-the-nodes):
// cluster A and its node start as `NODE=1 JANITOR_CLUSTER_STORAGE=DIR make
// cluster-up` starts them; on A's node a pod per workspace writes its files
// (workfiles.Files: a note, a source file, binary bytes, an empty file and
// 3 MiB of incompressible bytes) into its claim through kubelet,
// containerd, runc and the CSI driver's node publish, and stops; the claims
// are orphaned, and examples/teardown-gate.sh with GATE_EXPORT rescues and
// exports them; A's snapshots are deleted and A is torn down with its node
// (make cluster-down); cluster B and a node of its own start on the same
// storage folder; janitor import, janitor restore --workspace, and a pod
// on B's node prints the manifest (SHA-256, size, path of every file) of
// each restored claim, which must be the one derived from the workspace's
// seed: byte for byte, no file missing or added, each workspace's own.
// It needs root and runs in make node-test.
func TestRotateClusterThroughNodes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("the node needs root (mounts, cgroups, network namespaces); running as uid %d", os.Geteuid())
	}
	start := time.Now()
	ctx := context.Background()
	work := t.TempDir()
	storage := filepath.Join(work, "storage")
	localcluster(t, work)
	// The janitor and the workfiles image are built while cluster A starts.
	var janitor, image string
	built := make(chan error, 1)
	go func() {
		var err error
		if janitor, err = goBuild(work, "janitor", "./cmd/janitor"); err == nil {
			image, err = buildWorkfilesImage(work)
		}
		built <- err
	}()
	bundleFile := filepath.Join(work, "teardown-bundle.yaml")
	const ns = "workspaces"
	nonce := fmt.Sprint(time.Now().UnixNano())
	seeds := map[string]string{"alice": "alice's workspace " + nonce, "bob": "bob's workspace " + nonce}

	// Cluster A and its node, as NODE=1 make cluster-up starts them.
	a := clusterUp(t, work, filepath.Join(work, "a"), storage, testenv.NodeEnv+"=1")
	if err := <-built; err != nil {
		t.Fatal(err)
	}
	nodeA := nodeFolder(t, a.Dir)
	importImage(t, nodeA, image)
	t.Logf("cluster A and its node up, the janitor and the workfiles image built at %s", time.Since(start).Round(time.Second))
	ka := a.Clientset(t)
	createNamespace(t, a, ns)
	for ws := range seeds {
		workspaceClaim(t, ka, ns, "ws-"+ws, ws)
	}
	for ws, seed := range seeds {
		if _, err := ka.CoreV1().Pods(ns).Create(ctx, filesPod(ns, ws, "ws-"+ws, "write", "/data", seed), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for ws, seed := range seeds {
		want := workfiles.Manifest(workfiles.Files(seed))
		log := waitLog(t, ka, ns, ws, corev1.PodRunning, "wrote 5 files\n")
		if got := strings.TrimSuffix(log, "wrote 5 files\n"); got != want {
			t.Fatalf("workspace %s on A's node wrote\n%swant\n%s", ws, got, want)
		}
	}
	// The workspaces stop: their pods go, and with them the mounts.
	for ws := range seeds {
		if err := ka.CoreV1().Pods(ns).Delete(ctx, ws, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fa, err := a.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	var claims []string
	for ws := range seeds {
		waitPodGone(t, ka, ns, ws)
		claims = append(claims, "ws-"+ws)
	}
	// Orphaned: the Unused condition set by the pods' real lifecycle, or,
	// on a minor without it (make matrix), the mark a first scan writes.
	if err := fa.MarkIdle(ctx, ns, claims...); err != nil {
		t.Fatal(err)
	}
	if a.UnusedCondition() {
		for _, claim := range claims {
			if _, err := fa.WaitUnused(ctx, ns, claim); err != nil {
				t.Fatal(err)
			}
		}
	} else if _, err := fa.WaitOrphanedSince(ctx, ns, claims...); err != nil {
		t.Fatal(err)
	}
	t.Logf("workspaces written and stopped on A's node at %s", time.Since(start).Round(time.Second))

	// The gate: rescue, export, verdict.
	gate := run(t, gateEnv(janitor, a.Kubeconfig, ns, bundleFile), "bash", gateScript(t),
		"--min-age", "0s", "--grace-period", "0s", "--snapshot-class", testenv.SnapshotClassDelete,
		"--snapshot-timeout", "2m", "--api-timeout", "1m", "--log-format", "console")
	if gate.code != 0 || !strings.Contains(gate.stderr, "GATE OPEN") {
		t.Fatalf("teardown-gate.sh on A: exit %d, want 0 (GATE OPEN)\n%s%s", gate.code, gate.stdout, gate.stderr)
	}
	raw, err := os.ReadFile(bundleFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Decode(raw)
	if err != nil {
		t.Fatalf("the bundle: %v\n%s", err, raw)
	}
	exported := map[string]string{} // workspace: snapshot
	for _, c := range b.Copies {
		exported[c.Workspace] = c.Snapshot
	}
	if len(b.Copies) != len(seeds) || exported["alice"] == "" || exported["bob"] == "" {
		t.Fatalf("the bundle holds %v, want a copy of alice and of bob\n%s", exported, raw)
	}
	t.Logf("gate open, bundle written at %s", time.Since(start).Round(time.Second))

	// The teardown: the snapshots go (their contents are Retain), then the
	// whole cluster with its node; the storage stays.
	deleteSnapshots(t, fa, ns)
	if r := run(t, localclusterEnv(storage), localcluster(t, work), "down", "--dir", a.Dir); r.code != 0 {
		t.Fatalf("localcluster down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, gone := range []string{a.Dir, nodeA, filepath.Join("/run/netns", "pvcj-"+strings.TrimPrefix(filepath.Base(nodeA), "pvcj-"))} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Fatalf("%s is still there after localcluster down: %v", gone, err)
		}
	}
	t.Logf("cluster A and its node gone at %s", time.Since(start).Round(time.Second))

	// Cluster B and its own node, on the same storage.
	c := startNodeCluster(t, filepath.Join(work, "b"), storage)
	importImage(t, nodeFolder(t, c.Dir), image)
	kb := c.Clientset(t)
	createNamespace(t, c, ns)
	t.Logf("cluster B and its node up at %s", time.Since(start).Round(time.Second))
	envB := []string{"PATH=/usr/bin:/bin", "HOME=" + work, "KUBECONFIG=" + c.Kubeconfig}
	r := run(t, envB, janitor, "import", bundleFile, "--workspace-label", wsLabel, "-o", "json", "--api-timeout", "2m")
	if r.code != 0 {
		t.Fatalf("import on B: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range parse(t, r).Snapshots {
		if s.Action != "imported" || !s.ReadyToUse {
			t.Fatalf("imported %s: action %q, ready %v: %s", s.Name, s.Action, s.ReadyToUse, s.Reason)
		}
	}

	// The way back, by workspace, read on B's node.
	restored := map[string]string{} // workspace: claim
	for ws := range seeds {
		r := run(t, envB, janitor, "restore", "-n", ns, "--workspace", ws, "--workspace-label", wsLabel,
			"-o", "json", "--api-timeout", "1m", "--restore-timeout", "2m")
		if r.code != 0 {
			t.Fatalf("restore --workspace %s on B: exit %d\n%s%s", ws, r.code, r.stdout, r.stderr)
		}
		rep := parse(t, r)
		if len(rep.Claims) != 1 || rep.Claims[0].Action != "restored" || rep.Claims[0].Snapshot == nil || rep.Claims[0].Snapshot.Name != exported[ws] {
			t.Fatalf("restore --workspace %s: %s", ws, r.stdout)
		}
		restored[ws] = rep.Claims[0].Name
		if _, err := kb.CoreV1().Pods(ns).Create(ctx, filesPod(ns, ws+"-read", restored[ws], "sum", "/data"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for ws, seed := range seeds {
		want := workfiles.Manifest(workfiles.Files(seed))
		if got := waitLog(t, kb, ns, ws+"-read", corev1.PodSucceeded, ""); got != want {
			t.Errorf("workspace %s restored on B (claim %s), read on B's node:\n%swant\n%s", ws, restored[ws], got, want)
		}
	}
	t.Logf("rotation through the nodes done in %s", time.Since(start).Round(time.Second))
}

// buildWorkfilesImage builds the workfiles program and its image the way
// test/testenv builds the node's workspace image (scripts/image), into
// work/images, and returns the image's archive.
func buildWorkfilesImage(work string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin, err := goBuild(work, "workfiles", "./test/rotation/workfiles/cmd/workfiles")
	if err != nil {
		return "", err
	}
	archive := filepath.Join(work, "images", "workfiles.oci.tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		return "", err
	}
	img := exec.Command("go", "-C", filepath.Join(root, "scripts", "image"), "run", ".", "build",
		"-name", "workfiles", "-binary", bin, "-ref", workfilesImage, "-out", archive)
	img.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := img.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image workfiles: %w\n%s", err, out)
	}
	return archive, nil
}

// nodeFolder is the node's folder (/tmp/pvcj-<id>) that the cluster
// folder's node marker names (test/testenv/node.go).
func nodeFolder(t *testing.T, clusterDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clusterDir, "node"))
	if err != nil {
		t.Fatalf("the cluster in %s has no node: %v", clusterDir, err)
	}
	return strings.TrimSpace(string(b))
}

// importImage imports an image archive into the node's containerd, as the
// node's own images are (never pulled).
func importImage(t *testing.T, nodeDir, archive string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	nb, err := testenv.FindNodeBinaries(root)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(nb.ContainerdDir, "ctr"), "-a", filepath.Join(nodeDir, "containerd.sock"),
		"-n", "k8s.io", "images", "import", archive).CombinedOutput()
	if err != nil {
		t.Fatalf("import %s into the node in %s: %v\n%s", archive, nodeDir, err, out)
	}
}

// startNodeCluster starts a cluster with a node in dir on the storage
// folder and stops both when the test ends.
func startNodeCluster(t *testing.T, dir, storage string) *testenv.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var progress strings.Builder
	c, err := testenv.Start(ctx, testenv.Options{Dir: dir, StorageDir: storage, Node: true, Progress: &progress})
	if err != nil {
		t.Fatalf("start cluster with a node in %s: %v\n%s(logs in %s)", dir, err, progress.String(), filepath.Join(dir, "logs"))
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// workspaceClaim creates a workspace's claim, provisioned by the CSI
// driver, and waits until it is Bound (a pod of a claim not yet bound
// waits in the scheduler's backoff).
func workspaceClaim(t *testing.T, kube kubernetes.Interface, ns, name, ws string) {
	t.Helper()
	sc := testenv.ProvisionedStorageClassName
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/component": "workspace", wsLabel: ws}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	ctx := context.Background()
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "claim "+name+" Bound", func() (bool, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
}

// filesPod is testenv.WorkspacePod of the workfiles image.
func filesPod(ns, name, claim string, args ...string) *corev1.Pod {
	return testenv.WorkspacePod(ns, name, claim, workfilesImage, args...)
}

// waitLog waits until the pod is in phase and its log (read through the
// API server and the kubelet, as kubectl logs reads it) ends with suffix,
// and returns the log. A failed pod ends the wait with its log.
func waitLog(t *testing.T, kube kubernetes.Interface, ns, name string, phase corev1.PodPhase, suffix string) string {
	t.Helper()
	ctx := context.Background()
	var log string
	waitFor(t, 3*time.Minute, fmt.Sprintf("pod %s %s", name, phase), func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			b, _ := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			return false, final{fmt.Errorf("pod %s failed: %s", name, b)}
		}
		if p.Status.Phase != phase {
			return false, nil
		}
		b, err := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		log = string(b)
		return strings.HasSuffix(log, suffix), nil
	})
	return log
}

func waitPodGone(t *testing.T, kube kubernetes.Interface, ns, name string) {
	t.Helper()
	waitFor(t, 2*time.Minute, "pod "+name+" gone", func() (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// final is an error after which waiting is pointless (a pod failed).
type final struct{ error }

// waitFor polls done every 250 ms until it reports true, a final error,
// or timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, done func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := done()
		if ok {
			return
		}
		if f, isFinal := err.(final); isFinal {
			t.Fatalf("%s: %v", what, f.error)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v)", what, timeout, last)
}
