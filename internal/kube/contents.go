package kube

import (
	"context"
	"encoding/json"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SetContentDelete sets a VolumeSnapshotContent's deletionPolicy to Delete,
// only while its volumeSnapshotRef is the snapshot with uid (a JSON patch
// whose test operation the API server checks), so that deleting that
// snapshot also deletes the content and the storage-side snapshot (docs/spec.md#retention,
// --delete-contents). It needs patch on volumesnapshotcontents.
func SetContentDelete(ctx context.Context, c *Clients, content string, uid types.UID) error {
	return patchContent(ctx, c, content, uid, "", snapv1.VolumeSnapshotContentDelete)
}

// SetContentRetain undoes SetContentDelete for a snapshot that was not
// deleted after all: Retain again, only while the content is still bound to
// uid and still Delete (so a policy someone else set since is left as is).
func SetContentRetain(ctx context.Context, c *Clients, content string, uid types.UID) error {
	return patchContent(ctx, c, content, uid, snapv1.VolumeSnapshotContentDelete, snapv1.VolumeSnapshotContentRetain)
}

// patchContent sets the content's deletionPolicy to to, testing that it is
// bound to uid and, unless from is empty, that its policy is from.
func patchContent(ctx context.Context, c *Clients, content string, uid types.UID, from, to snapv1.DeletionPolicy) error {
	ops := []map[string]any{{"op": "test", "path": "/spec/volumeSnapshotRef/uid", "value": string(uid)}}
	if from != "" {
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/deletionPolicy", "value": string(from)})
	}
	patch, err := json.Marshal(append(ops, map[string]any{"op": "replace", "path": "/spec/deletionPolicy", "value": string(to)}))
	if err != nil {
		return err
	}
	return c.Retry.Do(ctx, "patch VolumeSnapshotContent "+content, func(ctx context.Context) error {
		_, err := c.Snap.SnapshotV1().VolumeSnapshotContents().Patch(ctx, content, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// ContentSettle is how long the janitor waits between setting contents to
// Delete and deleting their snapshots. The snapshot controller decides
// whether to delete a content from its own store of contents
// (processSnapshotWithDeletionTimestamp in external-snapshotter v8), which
// its content worker updates from an informer: a snapshot deleted right
// after its content's patch can be judged against the content as it was
// (Retain), and the content then stays with Delete, no snapshot and nothing
// that will ever delete it (syncContent never deletes a content whose
// snapshot is gone; the long chaos run left 1 in about 400 so). The lag has
// no bound (informer, queue, a failing key's backoff): the wait makes the
// race rare, it cannot rule it out, and ContentLeft finds what it misses.
const ContentSettle = 2 * time.Second

// ContentLeft reports whether the content bound to the snapshot with uid
// outlives it: it exists, is not being deleted and is still bound to that
// UID. It is asked once the snapshot is gone, when the snapshot controller
// has decided: a content it deletes has its deletionTimestamp by then. So
// it counts Retain contents, and Delete ones that the controller judged
// from a copy read before their patch (ContentSettle). It reads through
// ReadContent (list, not get).
func ContentLeft(ctx context.Context, c *Clients, content string, uid types.UID) (bool, error) {
	vc, err := ReadContent(ctx, c, content)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return vc.DeletionTimestamp == nil && vc.Spec.VolumeSnapshotRef.UID == uid, nil
}
