//go:build integration

package testenv_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestProvisionedClaimLifecycle: a claim of the provisioned class gets a
// volume from csi-provisioner through the driver's CreateVolume; deleting the
// claim deletes the PV and, through DeleteVolume, the volume's files.
func TestProvisionedClaimLifecycle(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	start := time.Now()
	claim, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "dyn"})
	if err != nil {
		t.Fatalf("%v (claim %+v)", err, claim)
	}
	t.Logf("claim provisioned and bound in %s", time.Since(start).Round(time.Millisecond))
	pv, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != testenv.DriverName || !strings.HasPrefix(pv.Spec.CSI.VolumeHandle, "vol-") ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != testenv.ProvisionedStorageClassName {
		t.Fatalf("provisioned PV %+v", pv.Spec)
	}
	handle := pv.Spec.CSI.VolumeHandle
	if h, err := f.VolumeHandle(ctx, ns, "dyn"); err != nil || h != handle {
		t.Fatalf("VolumeHandle = %q, %v; want %q", h, err, handle)
	}
	if err := f.WriteVolume(ctx, ns, "dyn", "a/b.txt", []byte("bytes")); err != nil {
		t.Fatal(err)
	}
	dir, err := csidriver.VolumeDir(env.DriverStateDir, handle)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/a/b.txt"); err != nil {
		t.Fatalf("the file is not in the driver's volume folder: %v", err)
	}

	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "dyn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("the provisioned PV %s was not deleted with its claim: %v", pv.Name, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DeleteVolume left the volume's files: %v", err)
	}
}

// TestRestoreFromSnapshotCarriesBytes stands in for a pod writing to a
// workspace claim (a pre-bound fixture claim, as the janitor's tests use):
// the claim is snapshotted, more is written after the cut, and a claim with
// dataSourceRef to the snapshot, restored by csi-provisioner, holds exactly
// the bytes of the cut.
func TestRestoreFromSnapshotCarriesBytes(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws"}); err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("workspace data\x00\xff"), 4096)
	if err := f.WriteVolume(ctx, ns, "ws", "home/dev/project/main.go", payload); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteVolume(ctx, ns, "ws", "notes.txt", []byte("before the cut")); err != nil {
		t.Fatal(err)
	}
	if got, err := f.ReadVolume(ctx, ns, "ws", "notes.txt"); err != nil || string(got) != "before the cut" {
		t.Fatalf("ReadVolume = %q, %v", got, err)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-ws", "ws", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := f.WaitSnapshot(ctx, ns, "snap-ws", 30*time.Second, testenv.Ready); err != nil {
		t.Fatalf("%v (status %+v)", err, s)
	}
	if err := f.WriteVolume(ctx, ns, "ws", "notes.txt", []byte("after the cut")); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	restored, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-restored", FromSnapshot: "snap-ws"})
	if err != nil {
		t.Fatalf("%v (claim %+v)", err, restored)
	}
	t.Logf("claim restored from the snapshot and bound in %s", time.Since(start).Round(time.Millisecond))
	if ds := restored.Spec.DataSource; ds == nil || ds.Kind != "VolumeSnapshot" || ds.Name != "snap-ws" {
		t.Errorf("restored claim's dataSource %+v", ds)
	}
	got, err := f.ReadVolume(ctx, ns, "ws-restored", "home/dev/project/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("restored main.go: %d bytes, want the %d written before the cut", len(got), len(payload))
	}
	if got, err := f.ReadVolume(ctx, ns, "ws-restored", "notes.txt"); err != nil || string(got) != "before the cut" {
		t.Errorf("restored notes.txt = %q, %v; want the content at the cut", got, err)
	}
	if got, _ := f.ReadVolume(ctx, ns, "ws", "notes.txt"); string(got) != "after the cut" {
		t.Errorf("source notes.txt = %q", got)
	}
	if _, err := f.ReadVolume(ctx, ns, "ws-restored", "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadVolume of a missing file: %v", err)
	}
}
