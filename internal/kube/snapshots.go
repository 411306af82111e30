package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// GetSnapshot reads a VolumeSnapshot with retries; nil, and no error, when
// it does not exist.
func GetSnapshot(ctx context.Context, c *Clients, ns, name string) (*snapv1.VolumeSnapshot, error) {
	var vs *snapv1.VolumeSnapshot
	err := c.Retry.Do(ctx, "get VolumeSnapshot "+ns+"/"+name, func(ctx context.Context) error {
		var err error
		vs, err = c.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return vs, err
}

// WaitSnapshotGone polls (retry.Poll), every 200 ms until deadline, until
// the snapshot with uid no longer exists (gone, or its name taken by
// another; any snapshot of the name when uid is empty). A read that fails
// is tried again until the deadline.
func WaitSnapshotGone(ctx context.Context, c *Clients, ns, name string, uid types.UID, deadline time.Time) error {
	err := retry.Poll(ctx, 200*time.Millisecond, deadline, func(ctx context.Context) (bool, error) {
		vs, err := GetSnapshot(ctx, c, ns, name)
		return err == nil && (vs == nil || (uid != "" && vs.UID != uid)), nil
	})
	if errors.Is(err, retry.ErrDeadline) {
		return fmt.Errorf("VolumeSnapshot %s/%s still exists at %s", ns, name, deadline.UTC().Format(time.RFC3339))
	}
	return err
}

// GetContent reads one VolumeSnapshotContent by name (a get, with
// retries); nil, and no error, when it does not exist. The hot paths
// (the rescue's wait, the reap's re-read of a rescue) read contents this
// way: one object, where ReadContent's list by field selector costs the
// API server a walk of its cache of contents.
func GetContent(ctx context.Context, c *Clients, name string) (*snapv1.VolumeSnapshotContent, error) {
	var vc *snapv1.VolumeSnapshotContent
	err := c.Retry.Do(ctx, "get VolumeSnapshotContent "+name, func(ctx context.Context) error {
		var err error
		vc, err = c.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return vc, err
}
