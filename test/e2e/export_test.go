//go:build integration

package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestExportImportAcrossTeardown is issue 42 on one cluster
// (docs/spec.md#export-and-import): workspace a is rescued and reaped (its
// rescue is its only copy), workspace b rescued (its claim Rescued), both
// into contents with deletionPolicy Delete, so guard fails. Without patch on
// contents, export and import exit 2 and write nothing. guard --export sets
// both contents to Retain, writes the bundle and passes. Then the teardown:
// every snapshot and content of the namespace is deleted (the storage
// snapshots stay: Retain). Into a fresh namespace, import refuses each copy
// while the cluster has no CSIDriver of their driver; with it, imports both
// as the janitor's rescues, ready; a second import changes nothing; an
// edited bundle is refused. restore --workspace brings each workspace's
// bytes back.
func TestExportImportAcrossTeardown(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	bytes := map[string]string{"a": "a's last work, before the teardown", "b": "b's notes\x00\xff, byte for byte"}
	for ws, data := range bytes {
		orphan(t, f, ns, "ws-"+ws, ws, "")
		if err := f.WriteVolume(ctx, ns, "ws-"+ws, "notes.txt", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, stderr := run(t, snapArgs(ns, "--snapshot-class", testenv.SnapshotClassDelete)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s\n%s", code, out, stderr)
	}
	a, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reapUntilDeleted(t, f, ns, "ws-a", a.UID, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100", "-l", wsSel+",workspace=a"))
	if err := f.WaitClaimGone(ctx, ns, "ws-a"); err != nil {
		t.Fatal(err)
	}
	guardArgs := func(extra ...string) []string {
		return append([]string{"guard", "-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s",
			"--grace-period", "0s", "-o", "json", "--lock-namespace", ns}, extra...)
	}
	if code, out, stderr := run(t, guardArgs()...); code != 3 {
		t.Fatalf("guard with Delete contents: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	file := filepath.Join(t.TempDir(), "bundle.yaml")

	// Without patch on contents: exit 2, one line naming it, no file.
	kc := tokenKubeconfig(t, ns, []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
	})
	code, out, stderr := runWith2(t, append(guardArgs("--export", file), "--kubeconfig", kc))
	if code != 2 || out != "" || !strings.Contains(stderr, "needs patch on volumesnapshotcontents.snapshot.storage.k8s.io") ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("guard --export without patch on contents: exit %d, stdout %q, stderr %q; want 2 and one line naming the permission", code, out, stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a refused export wrote %s: %v", file, err)
	}

	// guard --export: both copies exported, their contents Retain; it passes.
	code, out, stderr = run(t, guardArgs("--export", file)...)
	if code != 0 {
		t.Fatalf("guard --export: exit %d\n%s\n%s", code, out, stderr)
	}
	exported := map[string]string{} // workspace: snapshot
	for _, s := range parse(t, out).Snapshots {
		if s.Action != "exported" || s.DeletionPolicy != "Retain" {
			t.Errorf("snapshot %s: action %q, policy %q: %s", s.Name, s.Action, s.DeletionPolicy, s.Reason)
		}
		exported[strings.TrimPrefix(s.SourceClaim, "ws-")] = s.Name
	}
	if len(exported) != 2 {
		t.Fatalf("exported %v, want the rescues of a (gone) and b (Rescued)\n%s", exported, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Decode(data)
	if err != nil || len(b.Copies) != 2 {
		t.Fatalf("the bundle: %v\n%s", err, data)
	}
	// Import needs create on contents: exit 2, nothing written.
	if code, out, stderr := runWith2(t, []string{"import", file, "-n", ns, "--kubeconfig", kc}); code != 2 || out != "" ||
		!strings.Contains(stderr, "import needs create on volumesnapshotcontents") {
		t.Errorf("import without the permission: exit %d, stdout %q, stderr %q", code, out, stderr)
	}

	// The teardown: snapshots and contents go; the storage keeps the
	// snapshots of Retain contents.
	var contents []string
	for _, s := range snapshots(t, f, ns) {
		vc, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *s.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if vc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain {
			t.Errorf("content %s of exported %s is %s", vc.Name, s.Name, vc.Spec.DeletionPolicy)
		}
		contents = append(contents, vc.Name)
		if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, "the namespace's snapshots", func() (bool, error) {
		l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	for _, name := range contents {
		if err := f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		waitGone(t, "content "+name, func() (bool, error) {
			_, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	for _, c := range b.Copies {
		name := bundle.ContentName(c.Driver, c.SnapshotHandle)
		t.Cleanup(func() { _ = f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}) })
	}

	// The new cluster's namespace. Without a CSIDriver object of the
	// copies' driver, each copy is refused with the reason.
	ns2 := env.Namespace(t)
	imp := func(extra ...string) (int, string, string) {
		return run(t, append([]string{"import", file, "-n", ns2, "--workspace-label", "workspace", "-o", "json"}, extra...)...)
	}
	drivers := env.Clientset(t).StorageV1().CSIDrivers()
	if _, err := drivers.Get(ctx, testenv.DriverName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		code, out, stderr := imp()
		if code != 4 || len(snapshots(t, f, ns2)) != 0 {
			t.Errorf("import without the CSIDriver: exit %d, %d snapshots, want 4 and none\n%s\n%s", code, len(snapshots(t, f, ns2)), out, stderr)
		}
		for _, s := range parse(t, out).Snapshots {
			if s.Action != "import-failed" || !strings.Contains(s.Reason, "this cluster has no CSIDriver "+testenv.DriverName) {
				t.Errorf("%s: %q %s", s.Name, s.Action, s.Reason)
			}
		}
		ensureCSIDriver(t)
	} else if err != nil {
		t.Fatal(err)
	} else {
		t.Log("the cluster has a CSIDriver " + testenv.DriverName + " already: the refusal without one is not exercised")
	}

	// Imported as the janitor's rescues, ready.
	code, out, stderr = imp()
	if code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, s := range parse(t, out).Snapshots {
		if s.Action != "imported" || !s.ReadyToUse {
			t.Errorf("%s: action %q, ready %v: %s", s.Name, s.Action, s.ReadyToUse, s.Reason)
		}
	}
	imported := snapshots(t, f, ns2)
	versions := map[string]string{}
	for _, s := range imported {
		versions[s.Name] = s.ResourceVersion
		if s.Labels["app.kubernetes.io/managed-by"] != "pvc-janitor" || s.Labels["workspace"] == "" ||
			s.Annotations["pvc-janitor.io/orphaned-since"] == "" || s.Annotations["pvc-janitor.io/claim"] == "" {
			t.Errorf("imported %s: labels %v annotations %v", s.Name, s.Labels, s.Annotations)
		}
	}
	if len(imported) != 2 {
		t.Fatalf("%d snapshots imported, want 2", len(imported))
	}

	// Again: nothing changes. Edited: refused whole.
	code, out, stderr = imp()
	if code != 0 {
		t.Errorf("second import: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, s := range parse(t, out).Snapshots {
		if s.Action != "already-imported" {
			t.Errorf("second import of %s: %q", s.Name, s.Action)
		}
	}
	edited := strings.Replace(string(data), "snapshotHandle: ", "snapshotHandle: x", 1)
	if err := os.WriteFile(file, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := imp(); code != 2 || out != "" || !strings.Contains(stderr, "does not match its content") ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("edited bundle: exit %d, stdout %q, stderr %q; want 2 and one line", code, out, stderr)
	}
	for _, s := range snapshots(t, f, ns2) {
		if versions[s.Name] != s.ResourceVersion {
			t.Errorf("%s changed after the second import or the refusal", s.Name)
		}
	}

	// The way back, by workspace, byte for byte.
	for ws, want := range bytes {
		code, out, stderr := run(t, "restore", "-n", ns2, "--workspace", ws, "--workspace-label", "workspace", "-o", "json")
		if code != 0 {
			t.Fatalf("restore --workspace %s: exit %d\n%s\n%s", ws, code, out, stderr)
		}
		r := parse(t, out)
		if len(r.Claims) != 1 || r.Claims[0].Action != "restored" || r.Claims[0].Snapshot.Name != exported[ws] {
			t.Errorf("restore --workspace %s: %s", ws, out)
			continue
		}
		got, err := f.ReadVolume(ctx, ns2, r.Claims[0].Name, "notes.txt")
		if err != nil || string(got) != want {
			t.Errorf("workspace %s restored: %q, %v; want %q", ws, got, err, want)
		}
	}
}

// waitGone polls cond for a minute.
func waitGone(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s not gone: %v", what, err)
	}
}
