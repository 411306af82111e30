//go:build integration

package prune_test

import (
	"context"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestContentsOfKeptAndLeftRescues: what prune does with a content it set
// to Delete when the rescue is not pruned after all, and how it finds one
// that outlives a pruned rescue.
//
//   - Kept after all (held, changed, interrupted, failed): Unpatch sets the
//     content back to Retain, as it was, so that a later delete of the
//     rescue (a namespace's teardown) keeps the storage-side snapshot.
//   - Being deleted by someone else: left Delete (the snapshot controller
//     may be deleting it already).
//   - Pruned, and the content outlives it with Delete (what the snapshot
//     controller leaves when it judged an older copy): Left names it.
func TestContentsOfKeptAndLeftRescues(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	o := prune.Options{Retention: retention.Policy{DeleteContents: true}}
	read := func(name string) (*snapv1.VolumeSnapshot, string) {
		t.Helper()
		vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return vs, *vs.Status.BoundVolumeSnapshotContentName
	}
	policy := func(content string) string {
		t.Helper()
		vc, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(vc.Spec.DeletionPolicy)
	}
	setDelete := func(content string, uid types.UID) {
		t.Helper()
		if err := kube.SetContentDelete(ctx, w.c, content, uid); err != nil {
			t.Fatal(err)
		}
	}
	cleanup := func(content string) {
		t.Cleanup(func() {
			_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content, metav1.DeleteOptions{})
		})
	}

	// Kept after all: Retain again.
	w.rescue("kept", "a", time.Hour, testenv.SnapshotClassRetain, false, false)
	vs, content := read("kept")
	cleanup(content)
	setDelete(content, vs.UID)
	prune.Unpatch(ctx, w.c, o, kube.Snapshot(vs, ""), content)
	if got := policy(content); got != "Retain" {
		t.Errorf("kept rescue's content: %s after Unpatch, want Retain again", got)
	}

	// Being deleted by someone else (a finalizer of the test holds it):
	// left as it is.
	w.rescue("going", "b", time.Hour, testenv.SnapshotClassRetain, false, false)
	_, content = read("going")
	cleanup(content)
	const fin = "pvc-janitor.io/test-hold"
	// The snapshot controller writes the rescue too (its own finalizers,
	// its status): a JSON patch adds the test's finalizer without a
	// resourceVersion to conflict on.
	hold := []byte(`[{"op":"add","path":"/metadata/finalizers/-","value":"` + fin + `"}]`)
	if vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Patch(ctx, "going", types.JSONPatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	} else {
		setDelete(content, vs.UID)
	}
	if err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Delete(ctx, "going", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	vs, _ = read("going")
	if vs.DeletionTimestamp == nil {
		t.Fatal("going: no deletionTimestamp")
	}
	prune.Unpatch(ctx, w.c, o, kube.Snapshot(vs, ""), content)
	if got := policy(content); got != "Delete" {
		t.Errorf("a rescue being deleted by someone else: its content set to %s, want it left Delete", got)
	}
	release := func() error {
		cur, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, "going", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []string
		for _, f := range cur.Finalizers {
			if f != fin {
				keep = append(keep, f)
			}
		}
		cur.Finalizers = keep
		_, err = w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	if err := retry.RetryOnConflict(retry.DefaultBackoff, release); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}

	// Pruned, content left with Delete: named.
	w.rescue("left", "c", time.Hour, testenv.SnapshotClassRetain, false, false)
	vs, content = read("left")
	cleanup(content)
	if err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Delete(ctx, "left", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	snap := kube.Snapshot(vs, "")
	if err := kube.WaitSnapshotGone(ctx, w.c, w.ns, "left", vs.UID, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	setDelete(content, vs.UID) // too late for the controller, as when it judged an older copy
	if name, checked := prune.Left(ctx, w.c, o, snap, content, time.Now().Add(time.Minute)); name != content || !checked {
		t.Errorf("Left = %q, %v; want %s, checked", name, checked, content)
	}
}
