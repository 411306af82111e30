//go:build integration

package prune_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
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
	if err := kube.SetContentDelete(ctx, w.c, kube.DefaultRetry, content, vs.UID); err != nil {
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

// TestSafetyV3Finding7KilledPruneIsSettled (docs/spec.md#retention-intent):
// a prune killed between setting a rescue's content to Delete and deleting
// the rescue leaves its intent on the rescue; the next prune, or the next
// scan, puts Retain back and clears the intent.
func TestSafetyV3Finding7KilledPruneIsSettled(t *testing.T) {
	w := newWorld(t)
	retain := testenv.SnapshotClassRetain
	// The only rescue of each workspace: --keep-last 1 keeps it.
	w.rescue("p1", "p", time.Hour, retain, false, false)
	w.rescue("s1", "s", time.Hour, retain, false, false)
	// Killed, then a scan.
	content := w.killedPrune("s1")
	retry := kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxElapsed: 20 * time.Second}
	if _, err := janitor.Scan(context.Background(), w.c, janitor.ScanOptions{
		Scope:  kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
		Policy: classify.Policy{WorkspaceLabel: "workspace"}, Concurrency: 1, Retry: retry}); err != nil {
		t.Fatal(err)
	}
	w.settled("s1", content, "the next scan")

	// Killed, then a prune that keeps it.
	content = w.killedPrune("p1")
	if o := outcomes(w.prune(retention.Policy{KeepLast: 1, DeleteContents: true}, false, 100))["p1"]; o.Action != "kept" {
		t.Fatalf("p1: %s (%s), want kept", o.Action, o.Reason)
	}
	w.settled("p1", content, "the next prune")
}
