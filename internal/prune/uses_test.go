//go:build integration

package prune_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestPruneWritesDownTheUsesItSees (docs/spec.md#rule-last-used): prune's
// read shows a pod using a claim that still carries the janitor's
// orphaned-since mark: the workspace started again after its rescue, and
// the reap of the same run read before the pod came. On a cluster without
// the Unused condition no one else may ever see that use (the pod can be
// gone before the next run), and the next run would delete the claim on a
// rescue older than the use. Prune writes it down as the scan does: the
// mark removed, last-used set at or after the read. Found by the chaos
// oracle on a stack without the condition (seed 1796455006875400088).
func TestPruneWritesDownTheUsesItSees(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	orphaned := time.Now().Add(-time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if _, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "ws-a", Labels: map[string]string{"workspace": "a"},
		Annotations: map[string]string{inventory.AnnotationOrphanedSince: orphaned}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "ws-b", Labels: map[string]string{"workspace": "b"},
		Annotations: map[string]string{inventory.AnnotationOrphanedSince: orphaned}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.Pod(ctx, testenv.PodSpec{Namespace: w.ns, Name: "ide-a", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	before, err := w.f.ServerNow(ctx, w.ns)
	if err != nil {
		t.Fatal(err)
	}
	w.prune(retention.Policy{KeepLast: 1}, false, 100)

	a, err := w.c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := a.Annotations[inventory.AnnotationOrphanedSince]; ok {
		t.Errorf("ws-a, in use by ide-a when prune read it, keeps orphaned-since %s", v)
	}
	used, err := time.Parse(time.RFC3339, a.Annotations[inventory.AnnotationLastUsed])
	if err != nil || used.Before(before.Truncate(time.Second)) {
		t.Errorf("ws-a's last-used is %q (%v), want a time at or after prune's read (%s)", a.Annotations[inventory.AnnotationLastUsed], err, before.Format(time.RFC3339))
	}
	// A claim no pod uses keeps its mark: prune writes only uses.
	b, err := w.c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, "ws-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Annotations[inventory.AnnotationOrphanedSince] != orphaned || b.Annotations[inventory.AnnotationLastUsed] != "" {
		t.Errorf("ws-b, which no pod uses, has annotations %v after prune", b.Annotations)
	}
}
