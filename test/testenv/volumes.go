//go:build integration

package testenv

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
)

// snapshotAPIGroup is the API group of VolumeSnapshots, as a claim's
// dataSourceRef names it.
const snapshotAPIGroup = "snapshot.storage.k8s.io"

// ProvisionedClaim creates a claim of ProvisionedStorageClassName (1Gi,
// ReadWriteOnce) and waits until csi-provisioner has provisioned its volume
// through the driver and the binder reports it Bound. With
// s.FromSnapshot set, the claim's dataSourceRef names that VolumeSnapshot (in
// the claim's namespace; it must become ready): the volume is restored from
// it with the snapshot's bytes. s.VolumeHandle and s.Unbound are ignored (the
// handle is the driver's: see VolumeHandle).
func (f *Fixtures) ProvisionedClaim(ctx context.Context, s ClaimSpec) (*corev1.PersistentVolumeClaim, error) {
	sc := ProvisionedStorageClassName
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels,
			Annotations: s.Annotations, OwnerReferences: s.OwnerReferences},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if s.FromSnapshot != "" {
		group := snapshotAPIGroup
		claim.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: s.FromSnapshot}
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(s.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create claim %s/%s: %w", s.Namespace, s.Name, err)
	}
	return f.WaitClaim(ctx, s.Namespace, s.Name, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Status.Phase == corev1.ClaimBound
	})
}

// VolumeHandle returns the CSI volume handle of the driver's volume that a
// bound claim uses (claim -> PV -> spec.csi.volumeHandle).
func (f *Fixtures) VolumeHandle(ctx context.Context, ns, claim string) (string, error) {
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if c.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s/%s is not bound to a volume", ns, claim)
	}
	pv, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != DriverName || pv.Spec.CSI.VolumeHandle == "" {
		return "", fmt.Errorf("claim %s/%s: volume %s is not a volume of the driver %s", ns, claim, pv.Name, DriverName)
	}
	return pv.Spec.CSI.VolumeHandle, nil
}

// WriteVolume writes data to path (slash-separated, relative to the volume's
// root) in the volume of a bound claim, as a pod mounting the claim would
// (there is no kubelet). The bytes go to the driver's state folder, where
// snapshots and restores copy them.
func (f *Fixtures) WriteVolume(ctx context.Context, ns, claim, path string, data []byte) error {
	handle, err := f.volumeHandle(ctx, ns, claim)
	if err != nil {
		return err
	}
	return csidriver.WriteVolumeFile(f.DriverStateDir, handle, path, data)
}

// ReadVolume reads path (slash-separated, relative to the volume's root)
// from the volume of a bound claim. A missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (f *Fixtures) ReadVolume(ctx context.Context, ns, claim, path string) ([]byte, error) {
	handle, err := f.volumeHandle(ctx, ns, claim)
	if err != nil {
		return nil, err
	}
	return csidriver.ReadVolumeFile(f.DriverStateDir, handle, path)
}

func (f *Fixtures) volumeHandle(ctx context.Context, ns, claim string) (string, error) {
	if f.DriverStateDir == "" {
		return "", errors.New("testenv: Fixtures.DriverStateDir is not set (use Cluster.NewFixtures)")
	}
	return f.VolumeHandle(ctx, ns, claim)
}
