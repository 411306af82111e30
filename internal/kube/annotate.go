package kube

import (
	"context"
	"encoding/json"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// AnnotateSnapshot sets annotation key to value on the VolumeSnapshot s
// (by namespace, name and UID), and, when rv is not empty, only while its resourceVersion is rv
// (a merge patch carrying metadata.uid, which the API server refuses to
// change (422), and metadata.resourceVersion, which it checks (409)). It
// returns the snapshot as patched. It needs patch on volumesnapshots.
func AnnotateSnapshot(ctx context.Context, c *Clients, s *inventory.Snapshot, rv, key, value string) (*snapv1.VolumeSnapshot, error) {
	ns, name := s.Namespace, s.Name
	meta := map[string]any{"uid": string(s.UID), "annotations": map[string]string{key: value}}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, err
	}
	var vs *snapv1.VolumeSnapshot
	err = c.Retry.Do(ctx, "annotate VolumeSnapshot "+ns+"/"+name, func(ctx context.Context) error {
		var err error
		vs, err = c.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	return vs, err
}

// UnannotateSnapshot removes annotation key from the VolumeSnapshot s only
// while it is the snapshot with s's UID and the annotation's value is
// value (a JSON patch whose test operations the API server checks): an
// annotation someone wrote since is left as it is, and the patch then fails.
func UnannotateSnapshot(ctx context.Context, c *Clients, s *inventory.Snapshot, key, value string) error {
	ns, name := s.Namespace, s.Name
	path := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(s.UID)},
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	return c.Retry.Do(ctx, "remove "+key+" from VolumeSnapshot "+ns+"/"+name, func(ctx context.Context) error {
		_, err := c.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{})
		return err
	})
}
