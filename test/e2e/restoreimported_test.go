//go:build integration

package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestRestoreFindsAnImportedRescueByName (issue 42, docs/spec.md#import):
// a claim is rescued and reaped, exported, its snapshot and content deleted
// (the storage keeps the snapshot: Retain), and imported into another
// namespace; there restore NAMESPACE/CLAIM, by the claim's name alone,
// finds the imported rescue (a pre-provisioned snapshot, whose spec names
// no claim) by its claim template, and the claim holds the bytes.
func TestRestoreFindsAnImportedRescueByName(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	const text = "i's notes, across a teardown"
	orphan(t, f, ns, "ws-i", "i", "")
	if err := f.WriteVolume(ctx, ns, "ws-i", "notes.txt", []byte(text)); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s\n%s", code, out, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-i", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reapUntilDeleted(t, f, ns, "ws-i", c.UID, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100"))
	if err := f.WaitClaimGone(ctx, ns, "ws-i"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bundle.yaml")
	if code, out, stderr := run(t, "export", file, "-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s", "-o", "json"); code != 0 {
		t.Fatalf("export: exit %d\n%s\n%s", code, out, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Decode(data)
	if err != nil || len(b.Copies) != 1 {
		t.Fatalf("the bundle: %v\n%s", err, data)
	}
	// The old cluster's objects go; the storage snapshot stays (Retain).
	for _, s := range snapshots(t, f, ns) {
		content := *s.Status.BoundVolumeSnapshotContentName
		if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, "snapshot "+s.Name, func() (bool, error) {
			_, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, s.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err := f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		waitGone(t, "content "+content, func() (bool, error) {
			_, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	imported := bundle.ContentName(b.Copies[0].Driver, b.Copies[0].SnapshotHandle)
	t.Cleanup(func() { _ = f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, imported, metav1.DeleteOptions{}) })
	// Import checks the driver: the stack's API-only cluster has no
	// CSIDriver object of it until a test makes one.
	ensureCSIDriver(t)
	ns2 := env.Namespace(t)
	if code, out, stderr := run(t, "import", file, "-n", ns2, "--workspace-label", "workspace", "-o", "json"); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, s := range snapshots(t, f, ns2) {
		if s.Spec.Source.PersistentVolumeClaimName != nil {
			t.Fatalf("imported %s names claim %s in its spec: the case of this test is a snapshot that names none", s.Name, *s.Spec.Source.PersistentVolumeClaimName)
		}
	}

	// By name alone.
	code, out, stderr := run(t, "restore", ns2+"/ws-i", "--workspace-label", "workspace", "--min-age", "0s", "-o", "json", "--restore-timeout", "2m")
	if code != 0 {
		t.Fatalf("restore %s/ws-i: exit %d\n%s\n%s", ns2, code, out, stderr)
	}
	if _, act, reason := entry(t, parse(t, out), "ws-i"); act != "restored" || !strings.Contains(reason, b.Copies[0].Snapshot) {
		t.Errorf("restore by name: action %q, reason %q; want restored from %s", act, reason, b.Copies[0].Snapshot)
	}
	got, err := f.ReadVolume(ctx, ns2, "ws-i", "notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != text {
		t.Fatalf("the restored claim holds %q, want %q", got, text)
	}
}

// ensureCSIDriver makes the CSIDriver object of the project's driver,
// which import checks a copy's driver against, unless the cluster has one
// (the API-only stack has none until a test makes it); the test's cleanup
// deletes the one it made.
func ensureCSIDriver(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	drivers := env.Clientset(t).StorageV1().CSIDrivers()
	_, err := drivers.Get(ctx, testenv.DriverName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	no := false
	if _, err := drivers.Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testenv.DriverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &no,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drivers.Delete(ctx, testenv.DriverName, metav1.DeleteOptions{}) })
}
