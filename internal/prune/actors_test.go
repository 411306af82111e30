//go:build integration

package prune_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

const annPruneIntent = "pvc-janitor.io/prune-intent"

// killedPrune does what a prune does to a rescue before its delete, in its
// order: the intent on the VolumeSnapshot, then its content set to Delete;
// then it stops, as a prune killed at that moment. It returns the content.
func (w *world) killedPrune(name string) string {
	w.t.Helper()
	ctx := context.Background()
	patch := []byte(`{"metadata":{"annotations":{"` + annPruneIntent + `":"2026-01-02T03:04:05Z"}}}`)
	vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	content := *vs.Status.BoundVolumeSnapshotContentName
	w.t.Cleanup(func() {
		_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), content, metav1.DeleteOptions{})
	})
	if err := kube.SetContentDelete(ctx, w.c, content, vs.UID); err != nil {
		w.t.Fatal(err)
	}
	return content
}

// settled checks that the rescue name is back as it was before the killed
// prune: its content Retain, no intent.
func (w *world) settled(name, content, by string) {
	w.t.Helper()
	ctx := context.Background()
	vc, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if p := vc.Spec.DeletionPolicy; p != "Retain" {
		w.t.Errorf("after %s: the kept rescue %s's content is %s, want Retain again", by, name, p)
	}
	vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if v, ok := vs.Annotations[annPruneIntent]; ok {
		w.t.Errorf("after %s: %s still carries %s=%s", by, name, annPruneIntent, v)
	}
}

// TestKilledPruneIsSettled (docs/spec.md#retention-intent):
// a prune killed between setting a rescue's content to Delete and deleting
// the rescue leaves its intent on the rescue; the next prune, or the next
// scan, puts Retain back and clears the intent.
//
// Safety v3 (issue 23), finding 7.
func TestKilledPruneIsSettled(t *testing.T) {
	w := newWorld(t)
	retain := testenv.SnapshotClassRetain
	// The only rescue of each workspace: --keep-last 1 keeps it.
	w.rescue("p1", "p", time.Hour, retain, false, false)
	w.rescue("s1", "s", time.Hour, retain, false, false)
	// Killed, then a scan.
	content := w.killedPrune("s1")
	if _, err := janitor.Scan(context.Background(), w.c, janitor.ScanOptions{
		Scope:  kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
		Policy: classify.Policy{WorkspaceLabel: "workspace"}, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	w.settled("s1", content, "the next scan")

	// Killed, then a prune that keeps it.
	content = w.killedPrune("p1")
	if o := outcomes(w.prune(retention.Policy{KeepLast: 1, DeleteContents: true}, false, 100))["p1"]; o.Action != "kept" {
		t.Fatalf("p1: %s (%s), want kept", o.Action, o.Reason)
	}
	w.settled("p1", content, "the next prune")

	// And prune writes the intent before the content's Delete: at the
	// moment of the delete, q1 carries it.
	w.rescue("q1", "q", 2*time.Hour, retain, false, false)
	w.rescue("q2", "q", time.Hour, retain, false, false)
	seen := false
	res, err := prune.DeleteByRetention(context.Background(), w.c, prune.Options{
		Scope:     kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
		Policy:    carryPolicy,
		Retention: retention.Policy{KeepLast: 1, DeleteContents: true}, MaxDeletions: 10, MaxDeletionPercent: 100,
		BeforeDelete: func(ctx context.Context, k inventory.Key) {
			vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, k.Name, metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			_, seen = vs.Annotations[annPruneIntent]
		}})
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomes(res)["q1"]; o.Action != prune.ActionPruned || !seen {
		t.Errorf("q1: %s (%s), intent seen before its delete %v; want pruned, with the intent", o.Action, o.Reason, seen)
	}
}

// TestRestoreProtectsItsSource (docs/spec.md#restore-protects-source):
// prune has read the namespace and decided to delete x1; before its delete
// a restore from x1 begins. Prune keeps x1: a restore marks its source
// before it creates the claim, and prune reads each rescue and the claims
// again right before its delete. A mark older than inventory.RestoringFor
// does not keep it on its own.
//
// Safety v3 (issue 23), finding 8.
func TestRestoreProtectsItsSource(t *testing.T) {
	del := testenv.SnapshotClassDelete
	none, group := "no-such-class", "snapshot.storage.k8s.io"
	pending := func(w *world, name, from string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &none,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				DataSourceRef:    &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: from}}}
	}
	mark := func(w *world, name string, at time.Time) {
		patch := []byte(`{"metadata":{"annotations":{"pvc-janitor.io/restoring":"` + w.ns + `/elsewhere@` + at.UTC().Format(time.RFC3339) + `"}}}`)
		if _, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		actor  func(ctx context.Context, w *world)
		pruned bool
		reason string
	}{
		{"janitor restore", func(ctx context.Context, w *world) {
			// Its claim's class never binds: the restore ends Pending
			// (a timeout, exit 4), its mark left on x1.
			_, err := restore.Do(ctx, w.c, restore.Request{Namespace: w.ns, From: "x1", As: "x-back", AllowOlder: true,
				StorageClass: none, Size: "1Gi", WorkspaceLabel: "workspace"},
				restore.Options{Policy: classify.Policy{WorkspaceLabel: "workspace"}, Timeout: time.Millisecond})
			var pe *restore.ProvisionError
			if !errors.As(err, &pe) {
				w.t.Errorf("restore: %v, want a provisioning timeout", err)
			}
		}, false, "/x-back@"},
		{"a restore's mark, before its claim", func(ctx context.Context, w *world) { mark(w, "x1", time.Now()) }, false, "pvc-janitor.io/restoring"},
		{"another tool's restore: a Pending claim", func(ctx context.Context, w *world) {
			if _, err := w.c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Create(ctx, pending(w, "x-kubectl", "x1"), metav1.CreateOptions{}); err != nil {
				w.t.Fatal(err)
			}
		}, false, "claim x-kubectl restores from it"},
		// Left by a restore killed two days ago, before prune's read: it
		// keeps x1 no more.
		{"a stale mark alone", nil, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.rescue("x1", "x", 2*time.Hour, del, false, false)
			w.rescue("x2", "x", time.Hour, del, false, false)
			acted := false
			if c.actor == nil {
				mark(w, "x1", time.Now().Add(-48*time.Hour))
				acted = true
			}
			res, err := prune.DeleteByRetention(context.Background(), w.c, prune.Options{
				Scope:     kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
				Policy:    carryPolicy,
				Retention: retention.Policy{KeepLast: 1}, MaxDeletions: 10, MaxDeletionPercent: 100,
				BeforeDelete: func(ctx context.Context, k inventory.Key) {
					if k.Name == "x1" && c.actor != nil && !acted {
						acted = true
						c.actor(ctx, w)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			if !acted {
				t.Fatal("prune never came to delete x1: the test proves nothing")
			}
			o := outcomes(res)["x1"]
			if got := !w.exists("x1"); got != c.pruned {
				t.Fatalf("x1 pruned %v, want %v: %s (%s)", got, c.pruned, o.Action, o.Reason)
			}
			if !c.pruned && (o.Action != prune.ActionKept || !strings.Contains(o.Reason, c.reason)) {
				t.Errorf("x1: %s (%s), want kept, saying %q", o.Action, o.Reason, c.reason)
			}
		})
	}
}

// pruneWithHook prunes w's namespace with --keep-last 1, calling at before
// each rescue's delete.
func (w *world) pruneWithHook(deleteContents bool, at func(ctx context.Context, k inventory.Key)) map[string]prune.Outcome {
	w.t.Helper()
	res, err := prune.DeleteByRetention(context.Background(), w.c, prune.Options{
		Scope:     kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
		Policy:    carryPolicy,
		Retention: retention.Policy{KeepLast: 1, DeleteContents: deleteContents}, MaxDeletions: 10, MaxDeletionPercent: 100,
		BeforeDelete: at})
	if err != nil {
		w.t.Fatal(err)
	}
	return outcomes(res)
}

// TestSafetyR5SnapshotChangedBeforePruneDelete (docs/spec.md#retention-preconditions):
// a rescue changed between prune's read and its delete (a label someone
// added; the name taken by a new snapshot) is kept.
func TestSafetyR5SnapshotChangedBeforePruneDelete(t *testing.T) {
	del := testenv.SnapshotClassDelete
	for _, c := range []struct {
		name   string
		change func(ctx context.Context, w *world)
		reason string
	}{
		{"a label added", func(ctx context.Context, w *world) {
			if _, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Patch(ctx, "x1", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"example.com/owner":"someone"}}}`), metav1.PatchOptions{}); err != nil {
				w.t.Fatal(err)
			}
		}, "changed since it was read"},
		{"recreated under its name", func(ctx context.Context, w *world) {
			if err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Delete(ctx, "x1", metav1.DeleteOptions{}); err != nil {
				w.t.Fatal(err)
			}
			old, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, "x1", metav1.GetOptions{})
			if err == nil {
				if err := kube.WaitSnapshotGone(ctx, w.c, w.ns, "x1", old.UID, time.Now().Add(time.Minute)); err != nil {
					w.t.Fatal(err)
				}
			}
			w.rescue("x1", "x", 3*time.Hour, del, false, false)
		}, "another snapshot has its name now"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			w.rescue("x1", "x", 2*time.Hour, del, false, false)
			w.rescue("x2", "x", time.Hour, del, false, false)
			acted := false
			got := w.pruneWithHook(false, func(ctx context.Context, k inventory.Key) {
				if k.Name == "x1" && !acted {
					acted = true
					c.change(ctx, w)
				}
			})
			if !acted {
				t.Fatal("prune never came to delete x1: the test proves nothing")
			}
			if !w.exists("x1") {
				t.Fatalf("x1 was deleted although it changed since prune read it: %+v", got["x1"])
			}
			if o := got["x1"]; o.Action != prune.ActionKept || !strings.Contains(o.Reason, c.reason) {
				t.Errorf("x1: %s (%s), want kept, saying %q", o.Action, o.Reason, c.reason)
			}
		})
	}
}

// TestSafetyR6ContentOfAnotherSnapshotIsNotSetToDelete (docs/spec.md#retention-contents):
// the patch that sets a content to Delete tests its volumeSnapshotRef's
// UID: asked for another snapshot's UID, the API server refuses it and the
// content stays Retain.
func TestSafetyR6ContentOfAnotherSnapshotIsNotSetToDelete(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.rescue("r1", "r", time.Hour, testenv.SnapshotClassRetain, false, false)
	vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, "r1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content := *vs.Status.BoundVolumeSnapshotContentName
	t.Cleanup(func() {
		_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), content, metav1.DeleteOptions{})
	})
	if err := kube.SetContentDelete(ctx, w.c, content, "another-snapshots-uid"); err == nil {
		t.Error("SetContentDelete for another snapshot's UID succeeded")
	}
	vc, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vc.Spec.DeletionPolicy != "Retain" {
		t.Errorf("content %s bound to %s is %s after a patch for another UID, want Retain", content, vc.Spec.VolumeSnapshotRef.UID, vc.Spec.DeletionPolicy)
	}
}

// TestSafetyR6bPruneSetsBackWhatItKeeps (docs/spec.md#retention-contents):
// prune set x1's content to Delete, then x1 is held before its delete:
// prune keeps it, puts its content back to Retain and removes its intent,
// in the same run.
func TestSafetyR6bPruneSetsBackWhatItKeeps(t *testing.T) {
	w := newWorld(t)
	retain := testenv.SnapshotClassRetain
	w.rescue("x1", "x", 2*time.Hour, retain, false, false)
	w.rescue("x2", "x", time.Hour, retain, false, false)
	vs, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(context.Background(), "x1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content := *vs.Status.BoundVolumeSnapshotContentName
	t.Cleanup(func() {
		_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), content, metav1.DeleteOptions{})
	})
	policy := ""
	got := w.pruneWithHook(true, func(ctx context.Context, k inventory.Key) {
		if k.Name != "x1" {
			return
		}
		vc, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, content, metav1.GetOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		policy = string(vc.Spec.DeletionPolicy)
		if _, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Patch(ctx, "x1", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"pvc-janitor.io/hold":"true"}}}`), metav1.PatchOptions{}); err != nil {
			t.Error(err)
		}
	})
	if policy != "Delete" {
		t.Fatalf("x1's content was %q before the delete, want Delete: the test proves nothing", policy)
	}
	if o := got["x1"]; o.Action != prune.ActionKept || !w.exists("x1") {
		t.Fatalf("x1: %s (%s), want kept", o.Action, o.Reason)
	}
	w.settled("x1", content, "a prune that kept it")
}

// carryPolicy is the scan's policy of these tests: their rescues of two
// claims of one workspace are pruned on the workspace's line, which the
// operator states with --sessions-carry-data (docs/spec.md#rule-descent);
// what they prove is the actors around the delete.
var carryPolicy = classify.Policy{WorkspaceLabel: "workspace", MinAge: time.Minute, GracePeriod: time.Hour, SessionsCarryData: true}
