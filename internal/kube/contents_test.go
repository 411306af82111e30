//go:build integration

package kube_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestContentLeft builds, on the real snapshot controller, the two ends a
// content can come to when its snapshot is deleted, and asks ContentLeft
// about each once the snapshot is gone:
//
//   - Retain: the content stays; left.
//   - set to Delete only after the snapshot controller has judged the
//     snapshot's deletion (what happens when its cached copy of the content
//     predates the janitor's patch, kube.ContentSettle): the content stays
//     with Delete, no snapshot, and nothing that will delete it; left, where
//     the first version of ContentLeft (Retain only) said it was not.
//
// A content bound to another snapshot's UID is never this snapshot's left.
// (Set to Delete before the delete, the content goes with its snapshot:
// TestPrune in internal/prune.)
func TestContentLeft(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	c := clients(t)
	ns := env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "src"}); err != nil {
		t.Fatal(err)
	}
	ready := func(name string) (types.UID, string) {
		t.Helper()
		if _, err := f.Snapshot(ctx, ns, name, "src", testenv.SnapshotClassRetain, nil, nil); err != nil {
			t.Fatal(err)
		}
		vs, err := f.WaitSnapshot(ctx, ns, name, 60*time.Second, testenv.Ready)
		if err != nil {
			t.Fatal(err)
		}
		return vs.UID, *vs.Status.BoundVolumeSnapshotContentName
	}
	c.Retry = kube.RetryPolicy{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond, MaxElapsed: 10 * time.Second}
	gone := func(name string) {
		t.Helper()
		if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.WaitSnapshotGone(ctx, c, ns, name, "", time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	left := func(content string, uid types.UID) bool {
		t.Helper()
		l, err := kube.ContentLeft(ctx, c, content, uid)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	deleteContent := func(content string) {
		if err := f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}

	// Retain: left.
	uid, content := ready("retain")
	t.Cleanup(func() { deleteContent(content) })
	gone("retain")
	if !left(content, uid) {
		t.Errorf("Retain content %s outlives its snapshot, but ContentLeft says it does not", content)
	}
	if left(content, "another-uid") {
		t.Errorf("ContentLeft counts %s as left by a snapshot it is not bound to", content)
	}

	// Set to Delete after the controller judged the deletion: it stays, and
	// nothing deletes it (the controller never deletes a content whose
	// snapshot is gone: syncContent's "avoid data loss").
	uid, content = ready("late")
	t.Cleanup(func() { deleteContent(content) })
	gone("late")
	if err := kube.SetContentDelete(ctx, c, content, uid); err != nil {
		t.Fatal(err)
	}
	time.Sleep(kube.ContentSettle) // what the controller would need to act, had it a reason
	vc, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("content %s set to Delete after its snapshot went: %v", content, err)
	}
	if string(vc.Spec.DeletionPolicy) != "Delete" || vc.DeletionTimestamp != nil {
		t.Fatalf("content %s: deletionPolicy %s, deletionTimestamp %v; want Delete and none", content, vc.Spec.DeletionPolicy, vc.DeletionTimestamp)
	}
	if !left(content, uid) {
		t.Errorf("content %s is Delete but outlives its snapshot with nothing to delete it; ContentLeft says it does not", content)
	}

}
