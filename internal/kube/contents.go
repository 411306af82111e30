package kube

import (
	"context"
	"encoding/json"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SetContentDelete sets a VolumeSnapshotContent's deletionPolicy to Delete,
// only while its volumeSnapshotRef is the snapshot with uid (a JSON patch
// whose test operation the API server checks), so that deleting that
// snapshot also deletes the content and the storage-side snapshot (SPEC §11,
// --delete-contents). It needs patch on volumesnapshotcontents.
func SetContentDelete(ctx context.Context, c *Clients, retry RetryPolicy, content string, uid types.UID) error {
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/spec/volumeSnapshotRef/uid", "value": string(uid)},
		{"op": "replace", "path": "/spec/deletionPolicy", "value": string(snapv1.VolumeSnapshotContentDelete)},
	})
	if err != nil {
		return err
	}
	return retry.Do(ctx, "patch VolumeSnapshotContent "+content, func(ctx context.Context) error {
		_, err := c.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// ContentLeft reports whether the content bound to the snapshot with uid
// outlives it: it exists, is Retain and is not being deleted. It reads
// through ReadContent (list, not get).
func ContentLeft(ctx context.Context, c *Clients, retry RetryPolicy, content string, uid types.UID) (bool, error) {
	vc, err := ReadContent(ctx, c, retry, content)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return vc.Spec.DeletionPolicy == snapv1.VolumeSnapshotContentRetain && vc.DeletionTimestamp == nil &&
		vc.Spec.VolumeSnapshotRef.UID == uid, nil
}
