//go:build integration

// Package rotation tests issue 42 end to end with two clusters, as a
// platform rotates one (docs/operations.md#rotating-a-cluster): cluster A,
// started as make cluster-up starts it with JANITOR_CLUSTER_STORAGE, keeps
// its CSI driver's storage in a folder outside it, the teardown gate
// rescues and exports A's workspaces, A is torn down entirely (make
// cluster-down), and cluster B, started on the same storage
// (testenv.Options.StorageDir), imports the bundle and restores each
// workspace's bytes. It has no code of its
// own; each test starts its own clusters (no shared TestMain cluster).
package rotation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The workspace platform's labels, as the gate is told them.
const (
	selector = "app.kubernetes.io/component=workspace"
	wsLabel  = "workspace"
)

// TestRotateClusterAcrossTeardown: docs/operations.md#rotating-a-cluster,
// step by step. On cluster A (JANITOR_CLUSTER_STORAGE=DIR localcluster up,
// the command of make cluster-up: storage in a folder of its own), two
// workspaces' claims hold bytes and are orphaned; examples/teardown-gate.sh
// rescues them into snapshots of the Delete class, exports both (contents
// Retain) to a bundle and opens. A's snapshots are deleted (as a teardown
// deletes namespaces), then localcluster down (make cluster-down) stops A
// and removes its folder, and the storage folder stays. Cluster B
// starts on the same storage folder. On B: an edited bundle is refused
// (exit 2, nothing created); without a CSIDriver of the copies' driver each
// copy is refused with the reason (exit 4, nothing created); with it, both
// are imported ready; a second import changes nothing; restore --workspace
// brings each workspace's bytes back, byte for byte.
func TestRotateClusterAcrossTeardown(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	work := t.TempDir()
	storage := filepath.Join(work, "storage")
	janitor := buildJanitor(t, work)
	localcluster(t, work)
	t.Logf("janitor and localcluster built at %s", time.Since(start).Round(time.Second))
	bundleFile := filepath.Join(work, "teardown-bundle.yaml")
	const ns = "workspaces"
	data := map[string]string{"alice": "alice's last work, before the teardown\n", "bob": "bob's notes\x00\xff, byte for byte"}

	// Cluster A, its storage outside it, as make cluster-up starts it.
	a := clusterUp(t, work, filepath.Join(work, "a"), storage)
	t.Logf("cluster A up at %s", time.Since(start).Round(time.Second))
	fa, err := a.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, a, ns)
	for ws, b := range data {
		claim := "ws-" + ws
		if _, err := fa.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: claim,
			Labels: map[string]string{"app.kubernetes.io/component": "workspace", wsLabel: ws}}); err != nil {
			t.Fatal(err)
		}
		if err := fa.WriteVolume(ctx, ns, claim, "notes.txt", []byte(b)); err != nil {
			t.Fatal(err)
		}
		if _, err := fa.WaitUnused(ctx, ns, claim); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cluster A seeded at %s", time.Since(start).Round(time.Second))

	// The gate: rescue, export, verdict.
	gate := run(t, gateEnv(janitor, a.Kubeconfig, ns, bundleFile), "bash", gateScript(t),
		"--min-age", "0s", "--grace-period", "0s", "--snapshot-class", testenv.SnapshotClassDelete,
		"--snapshot-timeout", "1m", "--api-timeout", "1m", "--log-format", "console")
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
	if len(b.Copies) != 2 || exported["alice"] == "" || exported["bob"] == "" {
		t.Fatalf("the bundle holds %v, want a copy of alice and of bob\n%s", exported, raw)
	}
	t.Logf("gate open, bundle written at %s", time.Since(start).Round(time.Second))

	// The teardown: the snapshots go (the Retain contents keep the storage
	// snapshots), then the whole cluster; the storage stays.
	deleteSnapshots(t, fa, ns)
	if r := run(t, localclusterEnv(storage), localcluster(t, work), "down", "--dir", a.Dir); r.code != 0 {
		t.Fatalf("localcluster down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
		t.Fatalf("cluster A's folder is still there after localcluster down: %v", err)
	}
	if snaps, err := os.ReadDir(filepath.Join(storage, "snapshots")); err != nil || len(snaps) != len(b.Copies) {
		t.Fatalf("the storage folder after cluster A: %d snapshot records, %v; want %d", len(snaps), err, len(b.Copies))
	}
	t.Logf("cluster A gone at %s", time.Since(start).Round(time.Second))

	// Cluster B, on the same storage.
	c := startCluster(t, filepath.Join(work, "b"), storage)
	fb, err := c.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, c, ns)
	envB := []string{"PATH=/usr/bin:/bin", "HOME=" + work, "KUBECONFIG=" + c.Kubeconfig}
	imp := func(file string) result {
		return run(t, envB, janitor, "import", file, "--workspace-label", wsLabel, "-o", "json", "--api-timeout", "1m")
	}

	// Refused: an edited bundle, whole.
	edited := filepath.Join(work, "edited.yaml")
	if err := os.WriteFile(edited, bytes.Replace(raw, []byte("sourceClaim: ws-"), []byte("sourceClaim: wz-"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := imp(edited); r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "does not match its content") {
		t.Errorf("edited bundle on B: exit %d, stdout %q, stderr %q; want 2 naming the checksum", r.code, r.stdout, r.stderr)
	}
	noSnapshots(t, fb, ns, "the edited bundle")

	// Refused: a driver B does not have, per copy.
	drivers := fb.Kube.StorageV1().CSIDrivers()
	if _, err := drivers.Get(ctx, testenv.DriverName, metav1.GetOptions{}); err == nil {
		t.Fatalf("cluster B has a CSIDriver %s already: the refusal is not exercised", testenv.DriverName)
	}
	r := imp(bundleFile)
	if rep := parse(t, r); r.code != 4 || len(rep.Snapshots) != 2 {
		t.Errorf("import without the CSIDriver: exit %d, want 4 with both copies\n%s%s", r.code, r.stdout, r.stderr)
	} else {
		for _, s := range rep.Snapshots {
			if s.Action != "import-failed" || !strings.Contains(s.Reason, "this cluster has no CSIDriver "+testenv.DriverName) {
				t.Errorf("%s: %q %s", s.Name, s.Action, s.Reason)
			}
		}
	}
	noSnapshots(t, fb, ns, "the refused import")

	// The driver installed, as the new cluster's storage add-on would.
	no := false
	if _, err := drivers.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testenv.DriverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &no,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = imp(bundleFile)
	if r.code != 0 {
		t.Fatalf("import on B: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range parse(t, r).Snapshots {
		if s.Action != "imported" || !s.ReadyToUse {
			t.Errorf("imported %s: action %q, ready %v: %s", s.Name, s.Action, s.ReadyToUse, s.Reason)
		}
	}
	versions := map[string]string{}
	for _, s := range snapshots(t, fb, ns) {
		versions[s.Name] = s.ResourceVersion
	}
	r = imp(bundleFile)
	if r.code != 0 {
		t.Errorf("second import on B: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, s := range parse(t, r).Snapshots {
		if s.Action != "already-imported" {
			t.Errorf("second import of %s: %q", s.Name, s.Action)
		}
	}
	for _, s := range snapshots(t, fb, ns) {
		if versions[s.Name] != s.ResourceVersion {
			t.Errorf("%s changed on the second import", s.Name)
		}
	}
	t.Logf("imported on B at %s", time.Since(start).Round(time.Second))

	// The way back, by workspace, byte for byte.
	for ws, want := range data {
		r := run(t, envB, janitor, "restore", "-n", ns, "--workspace", ws, "--workspace-label", wsLabel, "-o", "json", "--api-timeout", "1m")
		if r.code != 0 {
			t.Fatalf("restore --workspace %s on B: exit %d\n%s%s", ws, r.code, r.stdout, r.stderr)
		}
		rep := parse(t, r)
		if len(rep.Claims) != 1 || rep.Claims[0].Action != "restored" || rep.Claims[0].Snapshot == nil || rep.Claims[0].Snapshot.Name != exported[ws] {
			t.Errorf("restore --workspace %s: %s", ws, r.stdout)
			continue
		}
		got, err := fb.ReadVolume(ctx, ns, rep.Claims[0].Name, "notes.txt")
		if err != nil || string(got) != want {
			t.Errorf("workspace %s restored on B: %q, %v; want %q", ws, got, err, want)
		}
	}
	t.Logf("rotation done in %s", time.Since(start).Round(time.Second))
}

// clusterUp starts cluster A in dir as make cluster-up does (localcluster
// up, detached, with JANITOR_CLUSTER_STORAGE), stops it with localcluster
// down when the test ends (a second down is harmless), and returns it as
// localcluster's own commands see it: DriverStateDir is dir's csi-state.
// env is added to localcluster's environment (JANITOR_CLUSTER_NODE=1: a node).
func clusterUp(t *testing.T, work, dir, storage string, env ...string) *testenv.Cluster {
	t.Helper()
	bin := localcluster(t, work)
	t.Cleanup(func() { _ = exec.Command(bin, "down", "--dir", dir).Run() })
	if r := run(t, append(localclusterEnv(storage), env...), bin, "up", "--dir", dir); r.code != 0 {
		t.Fatalf("JANITOR_CLUSTER_STORAGE=%s localcluster up: exit %d\n%s%s", storage, r.code, r.stdout, r.stderr)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	gates, _ := testenv.RecordedFeatureGates(dir)
	version, _ := testenv.RecordedKubeVersion(dir)
	return &testenv.Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Config: cfg,
		DriverStateDir: filepath.Join(dir, "csi-state"), FeatureGates: gates, KubeVersion: version}
}

// localclusterEnv is make cluster-up's environment for the storage folder:
// no feature gates, no node, whatever the test's environment says.
func localclusterEnv(storage string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JANITOR_CLUSTER_") {
			env = append(env, kv)
		}
	}
	return append(env, testenv.StorageEnv+"="+storage)
}

// localcluster builds test/cmd/localcluster (make cluster-up's command)
// into work/bin once.
func localcluster(t *testing.T, work string) string {
	t.Helper()
	bin := filepath.Join(work, "bin", "localcluster")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-tags", "integration", "-o", bin, "./test/cmd/localcluster")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/cmd/localcluster: %v\n%s", err, out)
	}
	return bin
}

// startCluster starts a cluster in dir on the storage folder and stops it
// when the test ends (Stop twice is harmless).
func startCluster(t *testing.T, dir, storage string) *testenv.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	c, err := testenv.Start(ctx, testenv.Options{Dir: dir, StorageDir: storage, Progress: &progress})
	if err != nil {
		t.Fatalf("start cluster in %s: %v\n%s(logs in %s)", dir, err, progress.String(), filepath.Join(dir, "logs"))
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func createNamespace(t *testing.T, c *testenv.Cluster, name string) {
	t.Helper()
	if _, err := c.Clientset(t).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// buildJanitor builds cmd/janitor into work/bin.
func buildJanitor(t *testing.T, work string) string {
	t.Helper()
	bin, err := goBuild(work, "janitor", "./cmd/janitor")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// goBuild builds the package pkg (static) into work/bin/name.
func goBuild(work, name, pkg string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(work, "bin", name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

func gateScript(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "examples", "teardown-gate.sh")
}

// gateEnv is the teardown gate's environment on cluster A: the janitor on
// PATH, the platform's selector and workspace label, the bundle file.
func gateEnv(janitor, kubeconfig, ns, bundleFile string) []string {
	return []string{
		"PATH=" + filepath.Dir(janitor) + ":/usr/bin:/bin",
		"HOME=" + filepath.Dir(filepath.Dir(janitor)),
		"KUBECONFIG=" + kubeconfig,
		"GATE_NAMESPACES=" + ns,
		"GATE_SELECTOR=" + selector,
		"GATE_WORKSPACE_LABEL=" + wsLabel,
		"GATE_EXPORT=" + bundleFile,
		"GATE_OUTPUT=json",
	}
}

// result is a finished process.
type result struct {
	code           int
	stdout, stderr string
}

// run runs name with args in environ, for at most three minutes.
func run(t *testing.T, environ []string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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
	}
	t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errOut.String())
	return result{}
}

// parse reads a janitor -o json report.
func parse(t *testing.T, r result) *report.Report {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return &rep
}

func snapshots(t *testing.T, f *testenv.Fixtures, ns string) []snapshot {
	t.Helper()
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]snapshot, 0, len(l.Items))
	for _, s := range l.Items {
		out = append(out, snapshot{Name: s.Name, ResourceVersion: s.ResourceVersion})
	}
	return out
}

type snapshot struct{ Name, ResourceVersion string }

func noSnapshots(t *testing.T, f *testenv.Fixtures, ns, after string) {
	t.Helper()
	if s := snapshots(t, f, ns); len(s) != 0 {
		t.Errorf("after %s, %d snapshots in %s, want none", after, len(s), ns)
	}
	l, err := f.Snap.SnapshotV1().VolumeSnapshotContents().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("after %s, %d contents, want none", after, len(l.Items))
	}
}

// deleteSnapshots deletes every snapshot of ns and waits until they are gone.
func deleteSnapshots(t *testing.T, f *testenv.Fixtures, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(snapshots(t, f, ns)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("the snapshots of %s are not gone after a minute", ns))
		}
		time.Sleep(250 * time.Millisecond)
	}
}
