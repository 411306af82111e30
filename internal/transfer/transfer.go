// Package transfer is what `janitor export` and `janitor import` send to
// the API server (docs/spec.md#export-and-import), below the commands so
// that cli calls no API server itself: the access review each asks first
// (MayI), a copy's content set to Retain and read back into the bundle's
// copy (Export), what an import weighs (ReadTarget), the objects it creates
// (ImportStep) and the wait until they are ready (WaitReady). Which copies,
// the document and the plan are internal/bundle's, pure.
package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// SnapshotGroup is the API group of snapshots and contents.
const SnapshotGroup = "snapshot.storage.k8s.io"

// MayI asks the API server whether this user may verb resource (of the
// snapshot group) in namespace ns ("" for all or cluster-scoped): a
// SelfSubjectAccessReview, which every authenticated user may create. It
// returns the verdict; err is for a review that could not be made.
func MayI(ctx context.Context, c *kube.Clients, verb, resource, ns string) (bool, error) {
	body, err := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": map[string]any{"resourceAttributes": map[string]any{"group": SnapshotGroup, "resource": resource, "verb": verb, "namespace": ns}}})
	if err != nil {
		return false, err
	}
	var raw []byte
	err = c.Retry.Do(ctx, "review access to "+verb+" "+resource, func(ctx context.Context) error {
		var err error
		raw, err = c.Snap.SnapshotV1().RESTClient().Post().AbsPath("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").
			SetHeader("Content-Type", "application/json").SetHeader("Accept", "application/json").Body(body).DoRaw(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("review access to %s %s: %w", verb, resource, err)
	}
	var review struct {
		Status struct {
			Allowed bool `json:"allowed"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &review); err != nil {
		return false, fmt.Errorf("review access to %s %s: %w", verb, resource, err)
	}
	return review.Status.Allowed, nil
}

// Export sets the content of s to Retain (when policy, its deletion policy
// as read, is not), reads the snapshot and its content again and makes the
// bundle's copy of them. A content that is not Retain by then, or is being
// deleted, is an error: the copy would not outlive the cluster.
func Export(ctx context.Context, c *kube.Clients, s *inventory.Snapshot, policy string) (bundle.Copy, error) {
	if policy != string(snapv1.VolumeSnapshotContentRetain) {
		if err := kube.SetContentRetain(ctx, c, s.ContentName, s.UID); err != nil {
			return bundle.Copy{}, fmt.Errorf("set content %s to Retain: %w", s.ContentName, err)
		}
	}
	vs, err := kube.GetSnapshot(ctx, c, s.Namespace, s.Name)
	if err != nil {
		return bundle.Copy{}, err
	}
	if vs == nil {
		return bundle.Copy{}, errors.New("the snapshot is gone")
	}
	vc, err := kube.ReadContent(ctx, c, s.ContentName)
	if err != nil {
		return bundle.Copy{}, err
	}
	if vc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain || vc.DeletionTimestamp != nil {
		return bundle.Copy{}, fmt.Errorf("content %s is %s (being deleted: %v), not Retain", vc.Name, vc.Spec.DeletionPolicy, vc.DeletionTimestamp != nil)
	}
	return bundle.NewCopy(s, vs, vc)
}

// ReadTarget reads what an import's plan weighs: the CSIDrivers, every
// VolumeSnapshotContent and the snapshots of the target namespaces.
func ReadTarget(ctx context.Context, c *kube.Clients, namespaces []string) (bundle.Cluster, error) {
	var drivers storagev1.CSIDriverList
	err := c.Retry.Do(ctx, "list CSIDrivers", func(ctx context.Context) error {
		return c.Kube.StorageV1().RESTClient().Get().Resource("csidrivers").Do(ctx).Into(&drivers)
	})
	if err != nil {
		return bundle.Cluster{}, &kube.ReadError{What: "CSIDrivers", Err: err}
	}
	names := make([]string, 0, len(drivers.Items))
	for i := range drivers.Items {
		names = append(names, drivers.Items[i].Name)
	}
	var contents *snapv1.VolumeSnapshotContentList
	err = c.Retry.Do(ctx, "list VolumeSnapshotContents", func(ctx context.Context) error {
		var err error
		contents, err = c.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return bundle.Cluster{}, &kube.ReadError{What: "VolumeSnapshotContents", Err: err}
	}
	var snaps []snapv1.VolumeSnapshot
	for _, ns := range namespaces {
		var l *snapv1.VolumeSnapshotList
		err := c.Retry.Do(ctx, "list snapshots in "+ns, func(ctx context.Context) error {
			var err error
			l, err = c.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			return bundle.Cluster{}, &kube.ReadError{What: "snapshots in " + ns, Err: err}
		}
		snaps = append(snaps, l.Items...)
	}
	return bundle.ClusterOf(names, contents.Items, snaps), nil
}

// ImportStep creates the step's content, then its snapshot.
func ImportStep(ctx context.Context, c *kube.Clients, st *bundle.Step) error {
	if vc := st.NewContent; vc != nil {
		err := c.Retry.Do(ctx, "create VolumeSnapshotContent "+vc.Name, func(ctx context.Context) error {
			_, err := c.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, vc, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("create VolumeSnapshotContent %s: %w", vc.Name, err)
		}
	}
	if vs := st.NewSnapshot; vs != nil {
		err := c.Retry.Do(ctx, "create VolumeSnapshot "+st.Target.String(), func(ctx context.Context) error {
			_, err := c.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Create(ctx, vs, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("create VolumeSnapshot %s: %w", st.Target, err)
		}
	}
	return nil
}

// Ready is an imported snapshot found ready to use, with its restore size
// (0 when the status has none).
type Ready struct {
	RestoreSize int64
}

// pollEvery is how often WaitReady reads the snapshots not yet ready.
const pollEvery = 500 * time.Millisecond

// WaitReady reads the snapshots until each is ready to use (the snapshot
// controller bound it and the driver reported the storage snapshot) or
// until deadline, and returns those that are. One not ready by then is no
// error: a restore waits for it.
func WaitReady(ctx context.Context, c *kube.Clients, snapshots []inventory.Key, deadline time.Time) map[inventory.Key]Ready {
	ready := map[inventory.Key]Ready{}
	_ = retry.Poll(ctx, pollEvery, deadline, func(ctx context.Context) (bool, error) {
		for _, k := range snapshots {
			if _, ok := ready[k]; ok {
				continue
			}
			vs, err := kube.GetSnapshot(ctx, c, k.Namespace, k.Name)
			if err != nil || vs == nil || vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse || vs.Status.Error != nil {
				continue
			}
			r := Ready{}
			if vs.Status.RestoreSize != nil {
				r.RestoreSize = vs.Status.RestoreSize.Value()
			}
			ready[k] = r
		}
		return len(ready) == len(snapshots), nil
	})
	return ready
}
