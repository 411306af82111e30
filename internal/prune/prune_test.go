//go:build integration

package prune_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

// world is one namespace of workspaces, each with rescues of the janitor's
// (labelled and annotated as rescue writes them) of a claim src-<ws>.
type world struct {
	t   *testing.T
	f   *testenv.Fixtures
	c   *kube.Clients
	ns  string
	src map[string]*corev1.PersistentVolumeClaim
}

func newWorld(t *testing.T) *world {
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200,
		Retry: kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxElapsed: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return &world{t: t, f: f, c: c, ns: env.Namespace(t), src: map[string]*corev1.PersistentVolumeClaim{}}
}

// rescue creates a ready rescue of src-<ws> whose data time is dataAgo ago.
// ownUID: the source-uid annotation is the real claim's UID (the source
// claim exists); otherwise it names a claim that is gone.
func (w *world) rescue(name, ws string, dataAgo time.Duration, class string, ownUID bool, hold bool) {
	w.t.Helper()
	ctx := context.Background()
	src, ok := w.src[ws]
	if !ok {
		var err error
		src, err = w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "src-" + ws, Labels: map[string]string{"workspace": ws}})
		if err != nil {
			w.t.Fatal(err)
		}
		w.src[ws] = src
	}
	uid := "gone-" + name
	if ownUID {
		uid = string(src.UID)
	}
	labels := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": ws}
	if hold {
		labels[inventory.KeyHold] = "true"
	}
	ann := map[string]string{inventory.AnnotationSourceUID: uid, inventory.AnnotationSourceName: src.Name,
		inventory.AnnotationOrphanedSince: time.Now().Add(-dataAgo).UTC().Format(time.RFC3339)}
	if _, err := w.f.Snapshot(ctx, w.ns, name, src.Name, class, labels, ann); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.f.WaitSnapshot(ctx, w.ns, name, 60*time.Second, testenv.Ready); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) prune(p retention.Policy, dry bool, maxDeletions int) *prune.Result {
	w.t.Helper()
	res, err := prune.DeleteByRetention(context.Background(), w.c, prune.Options{
		Scope:     kube.Scope{Namespaces: []string{w.ns}, WorkspaceLabel: "workspace"},
		Policy:    carryPolicy,
		Retention: p, DryRun: dry, MaxDeletions: maxDeletions, MaxDeletionPercent: 100,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return res
}

func outcomes(res *prune.Result) map[string]prune.Outcome {
	m := map[string]prune.Outcome{}
	for _, o := range res.Outcomes {
		m[o.Name] = o
	}
	return m
}

// exists reports whether the snapshot is there and not being deleted.
func (w *world) exists(name string) bool {
	s, err := w.c.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return s.DeletionTimestamp == nil
}

// TestPrune runs prune on the real stack: retention makes candidates, and
// each never-delete rule keeps one; dry run, blast radius and --keep-for
// delete nothing; a Retain rescue is kept without --delete-contents and
// pruned with it, content and the driver's stored snapshot included.
func TestPrune(t *testing.T) {
	w := newWorld(t)
	del := testenv.SnapshotClassDelete
	// a: three rescues, the source claim gone: --keep-last 1 keeps a3.
	w.rescue("a1", "a", 3*time.Hour, del, false, false)
	w.rescue("a2", "a", 2*time.Hour, del, false, false)
	w.rescue("a3", "a", time.Hour, del, false, false)
	// b: the older one held.
	w.rescue("b1", "b", 2*time.Hour, del, false, true)
	w.rescue("b2", "b", time.Hour, del, false, false)
	// c: the older one restored by a claim that is not Bound.
	w.rescue("c1", "c", 2*time.Hour, del, false, false)
	w.rescue("c2", "c", time.Hour, del, false, false)
	none, group := "no-such-class", "snapshot.storage.k8s.io"
	restoring := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "restoring"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &none,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSourceRef:    &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: "c1"}}}
	if _, err := w.c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Create(context.Background(), restoring, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// d: the source claim still exists and is not rescued by newer data.
	w.rescue("d1", "d", 2*time.Hour, del, true, false)
	w.rescue("d2", "d", time.Hour, del, false, false)
	// e: the older one under the Retain class.
	w.rescue("e1", "e", 2*time.Hour, testenv.SnapshotClassRetain, false, false)
	w.rescue("e2", "e", time.Hour, del, false, false)
	all := []string{"a1", "a2", "a3", "b1", "b2", "c1", "c2", "d1", "d2", "e1", "e2"}
	want := map[string]string{ // the reason of every rescue kept by --keep-last 1
		"a3": "kept by --keep-last 1", "b2": "kept by --keep-last 1", "c2": "kept by --keep-last 1", "d2": "kept by --keep-last 1", "e2": "kept by --keep-last 1",
		"b1": "held", "c1": "claim restoring restores from it", "d1": "its source claim src-d exists", "e1": "is Retain",
	}

	// Nothing is deleted by a dry run, by the blast radius or by --keep-for.
	dry := outcomes(w.prune(retention.Policy{KeepLast: 1}, true, 100))
	if dry["a1"].Action != prune.ActionWouldPrune || dry["a2"].Action != prune.ActionWouldPrune {
		t.Errorf("dry run: a1 %+v, a2 %+v: want would-prune", dry["a1"], dry["a2"])
	}
	limited := w.prune(retention.Policy{KeepLast: 1}, false, 1)
	if !strings.Contains(limited.Blocked, "2 rescues would be deleted, over --max-deletions 1") || outcomes(limited)["a1"].Action != prune.ActionLimited {
		t.Errorf("blast radius: blocked %q, a1 %+v", limited.Blocked, outcomes(limited)["a1"])
	}
	for _, o := range w.prune(retention.Policy{KeepFor: time.Hour}, false, 100).Outcomes {
		if o.Action != prune.ActionKept || !strings.Contains(o.Reason, "kept by --keep-for 1h0m0s") {
			t.Errorf("--keep-for 1h: %s %s (%s)", o.Name, o.Action, o.Reason)
		}
	}
	for _, n := range all {
		if !w.exists(n) {
			t.Fatalf("%s deleted by a dry run, a blocked prune or --keep-for", n)
		}
	}

	// --keep-last 1, without --delete-contents.
	got := outcomes(w.prune(retention.Policy{KeepLast: 1}, false, 100))
	for _, n := range all {
		o := got[n]
		if why, kept := want[n]; kept {
			if o.Action != prune.ActionKept || !strings.Contains(o.Reason, why) || !w.exists(n) {
				t.Errorf("%s: %s (%s), exists %v; want kept: %s", n, o.Action, o.Reason, w.exists(n), why)
			}
			continue
		}
		if o.Action != prune.ActionPruned || w.exists(n) {
			t.Errorf("%s: %s (%s), exists %v; want pruned", n, o.Action, o.Reason, w.exists(n))
		}
	}

	// With --delete-contents the Retain rescue goes, content and all.
	e1, err := w.c.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(context.Background(), "e1", metav1.GetOptions{})
	if err != nil || e1.Status == nil || e1.Status.BoundVolumeSnapshotContentName == nil {
		t.Fatalf("e1: %v %+v", err, e1)
	}
	content := *e1.Status.BoundVolumeSnapshotContentName
	vc, err := w.c.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), content, metav1.GetOptions{})
	if err != nil || vc.Status == nil || vc.Status.SnapshotHandle == nil {
		t.Fatalf("content %s: %v", content, err)
	}
	stored := filepath.Join(env.DriverStateDir, "snapshots", *vc.Status.SnapshotHandle+".json")
	if _, err := os.Stat(stored); err != nil {
		t.Fatalf("the driver's stored snapshot: %v", err)
	}
	got = outcomes(w.prune(retention.Policy{KeepLast: 1, DeleteContents: true}, false, 100))
	if got["e1"].Action != prune.ActionPruned {
		t.Fatalf("e1 with --delete-contents: %+v", got["e1"])
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		vc, err := w.c.Snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), content, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err == nil && vc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentDelete {
			t.Fatalf("content %s still %s after the prune", content, vc.Spec.DeletionPolicy)
		}
		if time.Now().After(deadline) {
			t.Fatalf("content %s not deleted within 60s (%v)", content, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Errorf("the driver still stores snapshot %s (%v)", stored, err)
	}
	for n, why := range want {
		if n != "e1" && (got[n].Action != prune.ActionKept || !w.exists(n)) {
			t.Errorf("%s: %+v with --delete-contents; want kept: %s", n, got[n], why)
		}
	}
}
