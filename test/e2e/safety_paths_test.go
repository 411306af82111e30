//go:build integration

package cli_test

// One deterministic scenario per path of issue 12 ("Safety v2") on the real
// control plane. Each test asserts the outcome docs/spec.md asks for and
// judges deletions by ground truth (safety_truth_test.go): what the test
// did to the pods and attachments, the snapshots' cut times and their
// contents; never by the janitor's marks.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

const annOrphanedSince = "pvc-janitor.io/orphaned-since"

// pathClaim is a claim of a path scenario: what the test knows of it.
type pathClaim struct {
	truthClaim
	UID types.UID
	// usedUntil is when its last use (pod, attachment) is known to have
	// ended: the start of the test's call that ended it; its creation when
	// nothing ever used it.
	usedUntil time.Time
}

// pathWorld is the claims of one path scenario.
type pathWorld struct {
	t      *testing.T
	f      *testenv.Fixtures
	ns     string
	claims map[string]*pathClaim
}

func newPathWorld(t *testing.T) *pathWorld {
	t.Helper()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	return &pathWorld{t: t, f: f, ns: env.Namespace(t), claims: map[string]*pathClaim{}}
}

// claim creates a bound workspace claim (in the selector) of workspace ws on
// the CSI volume handle (default "<ns>-<name>") and waits until the
// controller manager has seen it unused.
func (w *pathWorld) claim(name, ws, handle string, annotations map[string]string) *pathClaim {
	w.t.Helper()
	ctx := context.Background()
	if handle == "" {
		handle = w.ns + "-" + name
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": ws}
	c, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: name, Labels: labels, Annotations: annotations, VolumeHandle: handle})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.f.WaitUnused(ctx, w.ns, name); err != nil {
		w.t.Fatal(err)
	}
	pc := &pathClaim{truthClaim: truthOf(c, handle), UID: c.UID, usedUntil: c.CreationTimestamp.Time}
	w.claims[name] = pc
	return pc
}

// use creates a scheduled pod referencing the claim and waits until the
// controller manager counts it; the returned function deletes the pod and
// records the end of the use.
func (w *pathWorld) use(claim, pod string) func() {
	w.t.Helper()
	ctx := context.Background()
	if _, err := w.f.Pod(ctx, testenv.PodSpec{Namespace: w.ns, Name: pod, Claims: []string{claim}, Scheduled: true}); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		w.t.Helper()
		start := time.Now()
		if err := w.f.ForceDeletePod(ctx, w.ns, pod); err != nil {
			w.t.Fatal(err)
		}
		if c := w.claims[claim]; c != nil {
			c.usedUntil = start
		}
	}
}

// args is a command line for this scenario's namespace; grace is the grace
// period.
func (w *pathWorld) args(cmd, grace string, extra ...string) []string {
	return append([]string{cmd, "-n", w.ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s",
		"--grace-period", grace, "-o", "json", "--lock-namespace", w.ns}, extra...)
}

// run runs a janitor command and fails the test on an unexpected exit code.
func (w *pathWorld) run(args []string, codes ...int) report {
	w.t.Helper()
	code, out, stderr := run(w.t, args...)
	for _, c := range codes {
		if code == c {
			return parse(w.t, out)
		}
	}
	w.t.Fatalf("%s: exit %d, want one of %v\nstdout:\n%s\nstderr:\n%s", args[0], code, codes, out, stderr)
	return report{}
}

// snaps reads the namespace's snapshots as ground truth.
func (w *pathWorld) snaps() []truthSnap {
	w.t.Helper()
	s, err := truthSnapshots(context.Background(), w.f, w.ns)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// deleted reports whether the claim was deleted (deletionTimestamp set, or
// gone, or replaced by another claim of its name).
func (w *pathWorld) deleted(name string) bool {
	w.t.Helper()
	d, err := claimDeleted(context.Background(), w.f, w.ns, name, w.claims[name].UID)
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// noDataLost is invariant 1 on ground truth: every deleted claim of the
// scenario has an intact snapshot of its own, cut after its last use ended.
// It is a no-op for claims still there.
func (w *pathWorld) noDataLost(when string) {
	w.t.Helper()
	snaps := w.snaps()
	for name, c := range w.claims {
		if !w.deleted(name) {
			continue
		}
		if _, ok := c.rescueAfter(snaps, c.usedUntil); !ok {
			w.t.Errorf("%s: %s was deleted without an intact snapshot of it cut after its last use ended (%s):%s", when, name,
				c.usedUntil.UTC().Format(time.RFC3339Nano), c.describeSnaps(snaps))
		}
	}
}

// mustRescue fails unless the claim has an intact snapshot of its own cut
// after its last use ended.
func (w *pathWorld) mustRescue(name, why string) {
	w.t.Helper()
	snaps := w.snaps()
	c := w.claims[name]
	if _, ok := c.rescueAfter(snaps, c.usedUntil); !ok {
		w.t.Errorf("%s has no intact snapshot of its own cut after its last use (%s): %s%s", name,
			c.usedUntil.UTC().Format(time.RFC3339Nano), why, c.describeSnaps(snaps))
	}
}

// mustKeep fails when the claim was deleted.
func (w *pathWorld) mustKeep(name, why string) {
	w.t.Helper()
	if w.deleted(name) {
		w.t.Errorf("%s was deleted: %s", name, why)
	}
}

// foreignSnapshot takes a snapshot of claim that is not the janitor's (no
// label or annotation of it) and waits until it is ready.
func (w *pathWorld) foreignSnapshot(name, claim string, labels map[string]string) *snapv1.VolumeSnapshot {
	w.t.Helper()
	ctx := context.Background()
	if _, err := w.f.Snapshot(ctx, w.ns, name, claim, "", labels, nil); err != nil {
		w.t.Fatal(err)
	}
	s, err := w.f.WaitSnapshot(ctx, w.ns, name, 30*time.Second, testenv.Ready)
	if err != nil {
		w.t.Fatal(err)
	}
	return s
}

// mark returns the claim's orphaned-since annotation ("" when absent).
func (w *pathWorld) mark(name string) string {
	w.t.Helper()
	c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return c.Annotations[annOrphanedSince]
}

// markedAfresh fails unless the claim carries an orphaned-since mark that
// parses and is not before its creation.
func (w *pathWorld) markedAfresh(name, why string) {
	w.t.Helper()
	m := w.mark(name)
	ts, err := time.Parse(time.RFC3339, m)
	if err != nil || ts.Before(w.claims[name].Created) {
		w.t.Errorf("%s: orphaned-since %q, want a fresh mark not before its creation %s: %s", name, m,
			w.claims[name].Created.UTC().Format(time.RFC3339), why)
	}
}

// patchClaim applies a JSON merge patch to a claim.
func (w *pathWorld) patchClaim(name, patch string) {
	w.t.Helper()
	if _, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// nextSecond steps past the second of t (and the one after it): API
// timestamps have one-second resolution, and a scenario that needs "B
// strictly after A" must not land both in one second. This is a clock step,
// not a wait for a condition.
func nextSecond(t time.Time) {
	time.Sleep(time.Until(t.Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
}

// pastLastUse waits until a use the janitor saw at t (recorded rounded up
// to the second) is more than the default --clock-skew (2s) old: an Unused
// condition dated before that is stale (docs/spec.md#rule-last-used), so a
// use must outlast it for the condition to date the orphan.
func pastLastUse(t time.Time) {
	time.Sleep(time.Until(t.Truncate(time.Second).Add(time.Second + 2*time.Second + 50*time.Millisecond)))
}

// withoutUnusedCondition turns this scenario into one on a cluster without
// the Unused condition (KEP-5541 off): it stops the controller manager and
// removes the condition from the claims through the status subresource.
// The returned function (also run at cleanup) resumes the controller
// manager. While it is stopped, a deleted claim keeps its pvc-protection
// finalizer (Terminating): "deleted" means deletionTimestamp set.
func (w *pathWorld) withoutUnusedCondition(names ...string) func() {
	w.t.Helper()
	resume := pauseControllerManager(w.t)
	for _, n := range names {
		w.setUnused(n, nil)
	}
	return resume
}

// setUnused replaces the claim's Unused condition (nil: removes it) through
// the status subresource; the controller manager must be stopped.
func (w *pathWorld) setUnused(name string, cond *corev1.PersistentVolumeClaimCondition) {
	w.t.Helper()
	ctx := context.Background()
	claims := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		var conds []corev1.PersistentVolumeClaimCondition
		for _, x := range c.Status.Conditions {
			if x.Type != "Unused" {
				conds = append(conds, x)
			}
		}
		if cond != nil {
			conds = append(conds, *cond)
		}
		c.Status.Conditions = conds
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		w.t.Fatalf("set the Unused condition of %s: %v", name, err)
	}
}

// TestSafetyPath01LateRescueOfAnOldClaimDoesNotSupersedeANewerOne: claim A
// of workspace W is orphaned; claim B of W is created and used; only then is
// A's rescue created (it waited for a concurrency slot). B's pod goes. A's
// rescue is newer than B by creation time, but its data (A's, as of A's
// orphaned-since) is older than B's: B is not Superseded, it must be rescued
// (keep), and never deleted without its own rescue (discard).
func TestSafetyPath01LateRescueOfAnOldClaimDoesNotSupersedeANewerOne(t *testing.T) {
	for _, policy := range []string{"keep", "discard"} {
		t.Run(policy, func(t *testing.T) {
			ctx := context.Background()
			w := newPathWorld(t)
			a := w.claim("ws-a", "w", "", nil)
			aCond, err := w.f.WaitUnused(ctx, w.ns, "ws-a")
			if err != nil {
				t.Fatal(err)
			}
			var aSince time.Time
			for _, c := range aCond.Status.Conditions {
				if c.Type == "Unused" {
					aSince = c.LastTransitionTime.Time
				}
			}
			nextSecond(time.Now())
			w.claim("ws-b", "w", "", nil)
			stop := w.use("ws-b", "ide-b")
			waitUsed(t, w.f, w.ns, "ws-b")
			nextSecond(time.Now())
			// A's rescue as the janitor makes it (docs/spec.md#rescue), created late.
			late := "ws-a-late-rescue"
			if _, err := w.f.Snapshot(ctx, w.ns, late, "ws-a", "",
				map[string]string{"app.kubernetes.io/managed-by": "pvc-janitor", "workspace": "w"},
				map[string]string{"pvc-janitor.io/source-uid": string(a.UID), "pvc-janitor.io/source-name": "ws-a",
					annOrphanedSince: aSince.UTC().Format(time.RFC3339)}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.f.WaitSnapshot(ctx, w.ns, late, 30*time.Second, testenv.Ready); err != nil {
				t.Fatal(err)
			}
			nextSecond(time.Now())
			stop()
			if _, err := w.f.WaitUnused(ctx, w.ns, "ws-b"); err != nil {
				t.Fatal(err)
			}
			// By descent nothing here supersedes: the trap is the workspace's
			// chronological line, under --sessions-carry-data (docs/spec.md#rule-superseded).
			var r report
			if policy == "keep" {
				r = w.run(snapArgs(w.ns, "--sessions-carry-data"), 0, 4)
			} else {
				r = w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--superseded", "discard", "--sessions-carry-data"), 0, 4)
			}
			st, act, reason := entry(t, r, "ws-b")
			w.mustRescue("ws-b", "a late rescue of an older claim made it look superseded: "+st+", "+act+": "+reason)
			w.noDataLost(policy)
		})
	}
}

// TestSafetyPath02HeldClaimUsedLosesItsMark: on a cluster without the
// Unused condition, a rescued claim is put on hold and a pod uses it. A run
// that sees the pod must remove the janitor's mark although the claim is
// Held (a use restarts the clock, whatever the state). The pod goes and the
// hold is lifted: the rescue taken before that use must not count.
func TestSafetyPath02HeldClaimUsedLosesItsMark(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(snapArgs(w.ns), 0)
	w.mustRescue("ws-a", "setup: the first rescue")
	defer w.withoutUnusedCondition("ws-a")()
	nextSecond(time.Now())
	w.patchClaim("ws-a", `{"metadata":{"labels":{"pvc-janitor.io/hold":"true"}}}`)
	stop := w.use("ws-a", "ide")
	r := w.run(w.args("scan", "0s"), 0)
	if st, _, _ := entry(t, r, "ws-a"); st != "Held" {
		t.Errorf("setup: ws-a is %s, want Held", st)
	}
	if m := w.mark("ws-a"); m != "" {
		t.Errorf("a pod references the Held claim ws-a, yet its orphaned-since mark %s stays", m)
	}
	nextSecond(time.Now())
	stop()
	w.patchClaim("ws-a", `{"metadata":{"labels":{"pvc-janitor.io/hold":null}}}`)
	w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100"), 0, 4)
	w.noDataLost("after the hold was lifted")
}

// TestSafetyPath02ReattachClearsTheMarks: a VolumeAttachment of the claim's
// volume created after its mark is a use (a node mounted it): the run that
// sees it clears the marks. Once detached, the rescue taken before the
// attachment must not count (the Unused condition does not see
// attachments, so this holds on any cluster).
func TestSafetyPath02ReattachClearsTheMarks(t *testing.T) {
	ctx := context.Background()
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(snapArgs(w.ns), 0)
	w.mustRescue("ws-a", "setup: the first rescue")
	m, err := time.Parse(time.RFC3339, w.mark("ws-a"))
	if err != nil {
		t.Fatalf("setup: the rescued claim has no mark: %v", err)
	}
	nextSecond(m)
	va := "va-" + w.ns
	pv := "pv-" + w.ns + "-ws-a"
	if _, err := w.f.VolumeAttachment(ctx, va, pv, "node-1", true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.f.Kube.StorageV1().VolumeAttachments().Delete(context.Background(), va, metav1.DeleteOptions{})
	})
	r := w.run(w.args("scan", "0s"), 0)
	if st, _, _ := entry(t, r, "ws-a"); st != "Attached" {
		t.Errorf("ws-a is %s, want Attached", st)
	}
	if m := w.mark("ws-a"); m != "" {
		t.Errorf("ws-a was attached after its mark, yet its orphaned-since mark %s stays", m)
	}
	nextSecond(time.Now())
	detach := time.Now()
	if err := w.f.Kube.StorageV1().VolumeAttachments().Delete(ctx, va, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.claims["ws-a"].usedUntil = detach
	w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100"), 0, 4)
	w.noDataLost("after the detach")
}

// TestSafetyPath02UseSeenByAnotherClaimsRecheck: on a cluster without the
// Unused condition, the pod list of a snapshot's re-check (made for ws-b,
// workspace b) shows a pod using ws-a (workspace a, rescued) that is gone
// before the same run's reap reads the pods again. That use was seen: the
// run must not delete ws-a on its older rescue, and must remove its mark so
// that the next run does not either. Found by the long chaos run without
// the condition (ws-027, seed 1796146985604586734): the re-check classified
// only the claim's own workspace.
func TestSafetyPath02UseSeenByAnotherClaimsRecheck(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(snapArgs(w.ns), 0)
	w.mustRescue("ws-a", "setup: the first rescue")
	w.claim("ws-b", "b", "", nil)
	defer w.withoutUnusedCondition("ws-a", "ws-b")()
	w.run(w.args("scan", "0s"), 0) // ws-b marked: the run rescues it
	nextSecond(time.Now())
	p := env.StartFaultProxy(t, 1)
	var mu sync.Mutex
	lists := 0
	var stop func()
	p.OnRequest = func(r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/namespaces/"+w.ns+"/pods") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch lists++; lists {
		case 1: // the scan's
		case 2: // ws-b's re-check: a pod uses ws-a just now
			stop = w.use("ws-a", "back")
		case 3: // the reap's: the pod went
			stop()
		}
	}
	code, out, stderr := proxyRun(p, w.args("run", "0s", "--yes", "--max-deletion-percent", "100")...)
	if code != 0 && code != 4 {
		t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
	}
	mu.Lock()
	n := lists
	mu.Unlock()
	if n < 3 {
		t.Fatalf("%d pod lists: the scenario did not happen (want the scan's, ws-b's re-check and the reap's)", n)
	}
	w.noDataLost("after a use only ws-b's re-check saw")
	if w.deleted("ws-a") {
		t.Fatal("ws-a was deleted in the run whose re-check saw it in use")
	}
	if m := w.mark("ws-a"); m != "" {
		t.Errorf("ws-a was seen in use, yet its orphaned-since mark %s stays (the next run would count the older rescue)", m)
	}
}

// TestSafetyPath04GuardSeesWhatATeardownWouldLose: the rescue of a claim
// already reaped is the only copy: with deletionPolicy Delete a teardown
// deletes it, so guard fails (exit 3). A claim in use fails it too, and an
// empty scope fails it under --min-claims.
func TestSafetyPath04GuardSeesWhatATeardownWouldLose(t *testing.T) {
	guard := func(w *pathWorld, extra ...string) (int, string) {
		args := append([]string{"guard", "-n", w.ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s",
			"--grace-period", "0s", "-o", "json"}, extra...)
		code, out, stderr := run(t, args...)
		return code, out + stderr
	}
	t.Run("reaped rescue with deletionPolicy Delete", func(t *testing.T) {
		w := newPathWorld(t)
		w.claim("ws-a", "a", "", nil)
		for i := 0; i < 3 && !w.deleted("ws-a"); i++ {
			w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--snapshot-class", testenv.SnapshotClassDelete), 0, 4)
		}
		if !w.deleted("ws-a") {
			t.Fatal("setup: ws-a was not reaped in three runs")
		}
		w.noDataLost("setup")
		if code, out := guard(w); code != 3 {
			t.Errorf("guard with the only copy of ws-a on a Delete-policy rescue: exit %d, want 3\n%s", code, out)
		}
	})
	t.Run("claim in use", func(t *testing.T) {
		w := newPathWorld(t)
		w.claim("ws-a", "a", "", nil)
		w.use("ws-a", "ide")
		waitUsed(t, w.f, w.ns, "ws-a")
		if code, out := guard(w); code != 3 {
			t.Errorf("guard with a claim in use: exit %d, want 3\n%s", code, out)
		}
	})
	t.Run("young claim", func(t *testing.T) {
		// A claim younger than --min-age may be written to any moment:
		// nothing it holds is rescued, so a teardown would lose it.
		w := newPathWorld(t)
		w.claim("ws-a", "a", "", nil)
		code, out := guard(w, "--min-age", "1h")
		if code != 3 || !strings.Contains(out, `"state": "Young"`) {
			t.Errorf("guard with a claim younger than --min-age: exit %d, want 3 with ws-a Young\n%s", code, out)
		}
	})
	t.Run("empty scope under min-claims", func(t *testing.T) {
		w := newPathWorld(t)
		if code, out := guard(w, "--min-claims", "1"); code != 3 {
			t.Errorf("guard --min-claims 1 on an empty scope: exit %d, want 3\n%s", code, out)
		}
		// issue 23: --min-claims defaults to 1.
		if code, out := guard(w); code != 3 {
			t.Errorf("guard on an empty scope by default: exit %d, want 3\n%s", code, out)
		}
	})
}

// TestSafetyPath05ForeignSnapshotDoesNotShortenTheGrace: a claim orphaned
// (and marked) moments ago has a ready snapshot someone else took since.
// Under a 30m grace period it must not be reaped: only the grace period
// guards a use nobody saw.
func TestSafetyPath05ForeignSnapshotDoesNotShortenTheGrace(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(w.args("scan", "30m"), 0)
	nextSecond(time.Now())
	w.foreignSnapshot("backup-a", "ws-a", nil)
	r := w.run(w.args("reap", "30m", "--yes", "--max-deletion-percent", "100"), 0, 4)
	st, act, reason := entry(t, r, "ws-a")
	w.mustKeep("ws-a", "orphaned moments ago, reaped before its 30m grace period on a foreign snapshot ("+st+", "+act+": "+reason+")")
	w.noDataLost("reap")
}

// TestSafetyPath06CopiedMarkIsIgnored: a claim carries an orphaned-since
// mark an hour older than the claim itself (copied by a restore or a
// re-applied manifest), on a cluster without the Unused condition. The mark
// cannot be true: the claim is Grace and marked afresh, and a snapshot
// taken since never reaps it before the grace period has passed.
func TestSafetyPath06CopiedMarkIsIgnored(t *testing.T) {
	w := newPathWorld(t)
	copied := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	w.claim("ws-a", "a", "", map[string]string{annOrphanedSince: copied})
	defer w.withoutUnusedCondition("ws-a")()
	nextSecond(time.Now())
	w.foreignSnapshot("backup-a", "ws-a", nil)
	r := w.run(w.args("reap", "10m", "--yes", "--max-deletion-percent", "100"), 0, 4)
	st, act, reason := entry(t, r, "ws-a")
	w.mustKeep("ws-a", "reaped on a copied mark "+copied+" ("+st+", "+act+": "+reason+")")
	w.noDataLost("reap")
	if w.deleted("ws-a") {
		return
	}
	w.markedAfresh("ws-a", "a copied mark must be replaced")
	if st, _, reason := entry(t, w.run(w.args("scan", "10m", "--dry-run"), 0), "ws-a"); st != "Grace" {
		t.Errorf("ws-a with a copied mark is %s (%s), want Grace", st, reason)
	}
}

// TestSafetyPath06ImpossibleUnusedConditionIsIgnored: the claim's Unused
// condition says True with a zero lastTransitionTime, or one before the
// claim's creation. Neither can be true: the claim is Grace and marked
// afresh, and never reaped before the grace period on a snapshot taken since.
func TestSafetyPath06ImpossibleUnusedConditionIsIgnored(t *testing.T) {
	for _, c := range []struct {
		name string
		ltt  func(created time.Time) metav1.Time
	}{
		{"zero", func(time.Time) metav1.Time { return metav1.Time{} }},
		{"before creation", func(created time.Time) metav1.Time { return metav1.NewTime(created.Add(-time.Hour)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newPathWorld(t)
			a := w.claim("ws-a", "a", "", nil)
			defer w.withoutUnusedCondition()()
			w.setUnused("ws-a", &corev1.PersistentVolumeClaimCondition{Type: "Unused", Status: corev1.ConditionTrue,
				LastTransitionTime: c.ltt(a.Created), Reason: "NoPodsUsing"})
			nextSecond(time.Now())
			w.foreignSnapshot("backup-a", "ws-a", nil)
			r := w.run(w.args("reap", "10m", "--yes", "--max-deletion-percent", "100"), 0, 4)
			st, act, reason := entry(t, r, "ws-a")
			w.mustKeep("ws-a", "reaped on an Unused condition that cannot be true ("+st+", "+act+": "+reason+")")
			w.noDataLost("reap")
			if w.deleted("ws-a") {
				return
			}
			w.markedAfresh("ws-a", "an impossible condition must be ignored")
			if st, _, reason := entry(t, w.run(w.args("scan", "10m", "--dry-run"), 0), "ws-a"); st != "Grace" {
				t.Errorf("ws-a is %s (%s), want Grace", st, reason)
			}
		})
	}
}

// TestSafetyPath08PreProvisionedSnapshotIsDatedByItsCut: an old storage
// snapshot (cut before claim C of workspace W existed) is imported as a
// pre-provisioned VolumeSnapshot of W after C was orphaned. Its data time is
// its cut time, not the import: it does not supersede C, which must be
// rescued (keep) and never deleted without its own rescue (discard).
func TestSafetyPath08PreProvisionedSnapshotIsDatedByItsCut(t *testing.T) {
	for _, policy := range []string{"keep", "discard"} {
		t.Run(policy, func(t *testing.T) {
			ctx := context.Background()
			w := newPathWorld(t)
			// A claim outside the selector, snapshotted by someone: the old cut.
			if _, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "old-volume"}); err != nil {
				t.Fatal(err)
			}
			old := w.foreignSnapshot("old-cut", "old-volume", nil)
			content, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *old.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
			if err != nil || content.Status == nil || content.Status.SnapshotHandle == nil {
				t.Fatalf("setup: content of the old cut: %v", err)
			}
			nextSecond(old.Status.CreationTime.Time)
			w.claim("ws-c", "w", "", nil)
			nextSecond(time.Now())
			// The import: a content with the old handle, and a snapshot of it.
			name, class := "imported-"+w.ns, testenv.SnapshotClassRetain
			imp := &snapv1.VolumeSnapshotContent{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: snapv1.VolumeSnapshotContentSpec{Driver: testenv.DriverName, DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
					VolumeSnapshotClassName: &class,
					Source:                  snapv1.VolumeSnapshotContentSource{SnapshotHandle: content.Status.SnapshotHandle},
					VolumeSnapshotRef:       corev1.ObjectReference{Namespace: w.ns, Name: "imported"}},
			}
			if _, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, imp, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
			vs := &snapv1.VolumeSnapshot{
				ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "imported", Labels: map[string]string{"workspace": "w"}},
				Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class,
					Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &name}},
			}
			if _, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := w.f.WaitSnapshot(ctx, w.ns, "imported", 30*time.Second, testenv.Ready)
			if err != nil {
				t.Fatal(err)
			}
			c := w.claims["ws-c"]
			if got.Status.CreationTime == nil || !got.Status.CreationTime.Before(&metav1.Time{Time: c.Created}) ||
				!got.CreationTimestamp.After(c.Created) {
				t.Fatalf("setup: the import (created %s, cut %v) must be created after ws-c (%s) and cut before it",
					got.CreationTimestamp.UTC().Format(time.RFC3339), got.Status.CreationTime, c.Created.UTC().Format(time.RFC3339))
			}
			// By descent a pre-provisioned snapshot supersedes nothing: the
			// trap is the workspace's chronological line, under
			// --sessions-carry-data (docs/spec.md#rule-superseded).
			var r report
			if policy == "keep" {
				r = w.run(snapArgs(w.ns, "--sessions-carry-data"), 0, 4)
			} else {
				r = w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--superseded", "discard", "--sessions-carry-data"), 0, 4)
			}
			st, act, reason := entry(t, r, "ws-c")
			w.mustRescue("ws-c", "an old cut imported late made it look superseded: "+st+", "+act+": "+reason)
			w.noDataLost(policy)
		})
	}
}

// TestSafetyPath08DiscardNeedsDurableNewerData: under --superseded=discard
// --yes, an older claim of a workspace is deleted without a snapshot only on
// durable evidence of newer data. A Pending newer claim holds no data, and a
// newer claim whose every snapshot fails is not rescued: the older claim is
// kept.
func TestSafetyPath08DiscardNeedsDurableNewerData(t *testing.T) {
	for _, c := range []struct {
		name  string
		newer func(w *pathWorld)
	}{
		{"pending newer claim", func(w *pathWorld) {
			if _, err := w.f.BoundClaim(context.Background(), testenv.ClaimSpec{Namespace: w.ns, Name: "ws-b", Unbound: true,
				Labels: map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "w"}}); err != nil {
				w.t.Fatal(err)
			}
		}},
		{"newer claim on a broken volume", func(w *pathWorld) {
			if err := csidriver.SetFault(env.DriverStateDir, w.ns+"-ws-b", csidriver.Fault{PermanentError: "broken"}); err != nil {
				w.t.Fatal(err)
			}
			w.claim("ws-b", "w", "", nil)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newPathWorld(t)
			w.claim("ws-a", "w", "", nil)
			nextSecond(time.Now())
			c.newer(w)
			// ws-b is a newer session created empty: only the workspace's
			// chronological line (--sessions-carry-data) makes it supersede
			// ws-a, and the discard's evidence is what this test is about
			// (docs/spec.md#rule-superseded; by descent ws-a is rescued).
			r := w.run(w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--superseded", "discard", "--sessions-carry-data",
				"--snapshot-timeout", "10s", "--snapshot-error-grace", "1s", "--snapshot-attempts", "1"), 0, 4)
			st, act, reason := entry(t, r, "ws-a")
			w.mustKeep("ws-a", "discarded without durable newer data ("+st+", "+act+": "+reason+")")
			w.noDataLost("discard")
		})
	}
}

// TestSafetyPath10LostDeleteIsCountedAsDeleted: the server applies the
// claim's DELETE but its response is lost. The claim is gone (or
// Terminating): the report must say deleted, not skipped.
func TestSafetyPath10LostDeleteIsCountedAsDeleted(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(snapArgs(w.ns), 0)
	w.mustRescue("ws-a", "setup")
	p := env.StartFaultProxy(t, 10)
	p.Set(testenv.Faults{Rules: []testenv.Rule{{Verbs: []string{"delete"}, Resources: []string{"persistentvolumeclaims"}, Times: 1,
		Faults: testenv.Faults{RateLostResponse: 1}}}})
	code, out, stderr := proxyRun(p, w.args("reap", "0s", "--yes", "--max-deletion-percent", "100")...)
	if n := p.InjectedByKind()[testenv.KindLostResponse]; n != 1 {
		t.Fatalf("the proxy lost %d delete responses, want 1: the test proves nothing", n)
	}
	if code != 0 && code != 4 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	if !w.deleted("ws-a") {
		t.Fatal("setup: the lost delete did not delete ws-a")
	}
	if _, act, reason := entry(t, parse(t, out), "ws-a"); act != "deleted" {
		t.Errorf("ws-a was deleted (its response lost) but the report says %q: %s", act, reason)
	}
	w.noDataLost("reap")
}

// TestSafetyPath11NameReuseIsNeverLabelledForAnothersSnapshot: while a run
// waits for a slow rescue of ws-a, ws-a is deleted and a new claim of the
// same name appears. The run must write nothing on the new claim (it never
// classified it): no phase label, no mark, no attempt record.
func TestSafetyPath11NameReuseIsNeverLabelledForAnothersSnapshot(t *testing.T) {
	ctx := context.Background()
	w := newPathWorld(t)
	slow := w.ns + "-slow"
	if err := csidriver.SetFault(env.DriverStateDir, slow, csidriver.Fault{ReadyAfter: 15 * time.Second}); err != nil {
		t.Fatal(err)
	}
	w.claim("ws-a", "a", slow, nil)
	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut strings.Builder
		code := runWith(append(snapArgs(w.ns, "--snapshot-timeout", "90s"), "--kubeconfig", env.Kubeconfig, "--log-format", "json"), &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	// The rescue exists: the run is waiting for it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, s := range w.snaps() {
			if s.Source == "ws-a" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("setup: no snapshot of ws-a appeared: %v", err)
	}
	claims := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns)
	if err := claims.Delete(ctx, "ws-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its owner removes the finalizers by hand (docs/spec.md#the-problem), so the name is free.
	w.patchClaim("ws-a", `{"metadata":{"finalizers":null}}`)
	if err := w.f.WaitClaimGone(ctx, w.ns, "ws-a"); err != nil {
		t.Fatal(err)
	}
	pv := "pv-" + w.ns + "-ws-a"
	_ = w.f.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{})
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := w.f.Kube.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
		if err == nil {
			_, _ = w.f.Kube.CoreV1().PersistentVolumes().Patch(ctx, pv, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatalf("setup: PV %s not gone: %v", pv, err)
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "a"}
	fresh, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "ws-a", Labels: labels, VolumeHandle: w.ns + "-fresh"})
	if err != nil {
		t.Fatal(err)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the snapshot run did not end within 3m")
	}
	if res.code != 0 && res.code != 4 {
		t.Fatalf("snapshot exit %d: %s", res.code, res.stderr)
	}
	got, err := claims.Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != fresh.UID {
		t.Fatalf("setup: ws-a was replaced again (uid %s, want %s)", got.UID, fresh.UID)
	}
	var written []string
	for k, v := range got.Labels {
		if strings.HasPrefix(k, "pvc-janitor.io/") {
			written = append(written, "label "+k+"="+v)
		}
	}
	for k, v := range got.Annotations {
		if strings.HasPrefix(k, "pvc-janitor.io/") {
			written = append(written, "annotation "+k+"="+v)
		}
	}
	if len(written) > 0 {
		b, _ := json.Marshal(written)
		t.Errorf("the new claim ws-a (uid %s), created while a run rescued its namesake, got the run's writes: %s", fresh.UID, b)
	}
}

// TestSafetyPath13AttemptsCountAcrossRuns: a volume whose every snapshot
// fails. The first run spends its attempts and gives up: its failed
// snapshot is deleted (its pvc-as-source-protection finalizer must not
// keep the claim from its owner). A second run at once creates no snapshot:
// the next attempt is not due (--snapshot-retry-backoff, default 10m). Then the owner
// deletes the claim, and it goes.
func TestSafetyPath13AttemptsCountAcrossRuns(t *testing.T) {
	ctx := context.Background()
	w := newPathWorld(t)
	if err := csidriver.SetFault(env.DriverStateDir, w.ns+"-ws-a", csidriver.Fault{PermanentError: "broken"}); err != nil {
		t.Fatal(err)
	}
	w.claim("ws-a", "a", "", nil)
	flags := []string{"--snapshot-timeout", "20s", "--snapshot-error-grace", "1s", "--snapshot-attempts", "2"} // --snapshot-retry-backoff: its default, 10m
	w.run(snapArgs(w.ns, flags...), 0, 4)
	// The given-up snapshot goes (deletionTimestamp set, or gone).
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, s := range w.snaps() {
			if s.Source == "ws-a" && !s.Gone {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("the failed snapshot of ws-a the run gave up on is still there:%s", w.claims["ws-a"].describeSnaps(w.snaps()))
	}
	watcher, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := map[types.UID]bool{}
	for _, s := range w.snaps() {
		before[s.UID] = true
	}
	w.run(snapArgs(w.ns, flags...), 0, 4)
	watcher.Stop()
	var created []string
	for ev := range watcher.ResultChan() {
		if s, ok := ev.Object.(*snapv1.VolumeSnapshot); ok && !before[s.UID] && s.Spec.Source.PersistentVolumeClaimName != nil &&
			*s.Spec.Source.PersistentVolumeClaimName == "ws-a" {
			created = append(created, s.Name)
		}
	}
	if len(created) > 0 {
		t.Errorf("a second run right after the first gave up snapshotted the broken volume again: %v", created)
	}
	if err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Delete(ctx, "ws-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.f.WaitClaimGone(ctx, w.ns, "ws-a"); err != nil {
		c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, "ws-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var fin []string
		if c != nil {
			fin = c.Finalizers
		}
		t.Errorf("its owner deleted ws-a, but it stays Terminating (finalizers %v)", fin)
	}
}
