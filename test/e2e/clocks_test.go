//go:build integration

package cli_test

// Issue 23 ("Safety v3"), findings 1 and 6, on the real control plane: a
// use the janitor saw while the Unused condition was frozen, and a storage
// clock behind the API server's. Deletions are judged by ground truth
// (safety_truth_test.go).

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
)

// defaultClockSkew is --clock-skew's default: a snapshot a test takes
// counts as a claim's rescue only when cut that long after its
// orphaned-since (docs/spec.md#rule-clock-skew).
const defaultClockSkew = 2 * time.Second

// TestUnusedConditionBeforeASeenUseIsNotTrusted: ws-a is rescued (R1).
// The controller manager goes down (SIGSTOP: an upgrade, a restart), so the
// claim's Unused condition stays True at its old time while pod p uses the
// claim and writes to it. A scan sees p (InUse) and removes the mark. p
// goes; the condition still says the old time. The next run must not date
// the orphan by that stale condition: R1, cut before p's writes, is no
// rescue, and the claim is deleted only on a rescue cut after p went
// (docs/spec.md#rule-last-used).
//
// Safety v3 (issue 23), finding 1.
func TestUnusedConditionBeforeASeenUseIsNotTrusted(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.run(snapArgs(w.ns), 0)
	w.mustRescue("ws-a", "setup: the first rescue R1")
	nextSecond(time.Now())
	// A frozen condition, not an absent one: the controller manager is
	// paused with the claim's Unused condition True since before R1.
	resume := pauseControllerManager(t)
	defer resume()
	stop := w.use("ws-a", "p")
	gens := newGenerations()
	gens.write(w.f, w.ns, "ws-a", "p")
	r := w.run(w.args("scan", "0s"), 0)
	if st, _, reason := entry(t, r, "ws-a"); st != "InUse" {
		t.Fatalf("setup: ws-a is %s (%s), want InUse: the scan did not see pod p", st, reason)
	}
	if m := w.mark("ws-a"); m != "" {
		t.Fatalf("setup: ws-a was seen in use, yet its orphaned-since mark %s stays", m)
	}
	c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lu, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/last-used"]); err != nil || lu.Before(w.claims["ws-a"].Created) {
		t.Errorf("ws-a was seen in use: last-used %q, want the server's time of that scan", c.Annotations["pvc-janitor.io/last-used"])
	}
	nextSecond(time.Now())
	stop()
	args := w.args("run", "0s", "--yes", "--max-deletion-percent", "100")
	w.run(args, 0, 4)
	w.noDataLost("after a use the janitor saw while the Unused condition was frozen")
	if w.deleted("ws-a") {
		return // deleted on a rescue after p's use (noDataLost said so)
	}
	// The claim was marked afresh (not dated by the stale condition): the
	// next run rescues it anew and may reap it on that rescue.
	w.run(args, 0, 4)
	w.noDataLost("in the run after")
	w.mustRescue("ws-a", "the run after the fresh mark rescues the claim with p's writes")
}

// TestStorageClockBehindTheAPIServer: the storage system's clock is
// behind the API server's. A rescue whose cut is within --clock-skew of
// orphaned-since is never reported Rescued nor left Orphaned in silence:
// it is SnapshotFailed, says why, and is taken again; none of it lets the
// claim be reaped (docs/spec.md#rescue-behind-clock). A storage clock behind
// by less than the skew is absorbed by the create's wait: the fresh rescue
// counts (docs/spec.md#rescue-after-orphaned-since).
//
// Safety v3 (issue 23), finding 6.
func TestStorageClockBehindTheAPIServer(t *testing.T) {
	w := newPathWorld(t)
	w.claim("ws-a", "a", "", nil)
	w.claim("ws-b", "b", "", nil)
	for handle, off := range map[string]time.Duration{w.ns + "-ws-a": -time.Hour, w.ns + "-ws-b": -time.Second} {
		if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{CutOffset: off}); err != nil {
			t.Fatal(err)
		}
	}
	r := w.run(snapArgs(w.ns, "--snapshot-attempts", "1", "--snapshot-retry-backoff", "1s"), 0, 4)
	if st, action, reason := entry(t, r, "ws-a"); st != "SnapshotFailed" || !strings.Contains(reason, "within --clock-skew 2s of orphaned-since") {
		t.Errorf("ws-a, cut an hour behind: %s (%s): %q; want SnapshotFailed naming the clock skew", st, action, reason)
	}
	if st, action, reason := entry(t, r, "ws-b"); st != "Rescued" {
		t.Errorf("ws-b, cut a second behind: %s (%s): %q; want Rescued: the create waits twice the skew", st, action, reason)
	}
	w.mustRescue("ws-b", "a storage clock a second behind")
	args := w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--snapshot-attempts", "1", "--snapshot-retry-backoff", "1s")
	r = w.run(args, 0, 4)
	if st, _, reason := entry(t, r, "ws-a"); st != "SnapshotFailed" {
		t.Errorf("ws-a in the next run: %s (%q), want SnapshotFailed: a rescue stuck behind the clock is reported", st, reason)
	}
	w.mustKeep("ws-a", "its only rescues were cut behind the clock")
	w.noDataLost("with the storage clock an hour behind")
	// The storage clock is fixed: the next attempt's rescue counts.
	if err := csidriver.ClearFault(env.DriverStateDir, w.ns+"-ws-a"); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now().Add(time.Second)) // past the attempt record's next attempt
	w.run(args, 0, 4)
	w.mustRescue("ws-a", "once the storage clock is right")
	w.noDataLost("once the storage clock is right")
}

// TestStorageClockAheadOfTheAPIServer: the storage system's clock is 8 s
// ahead of the API server's and the controller manager's, within
// --clock-skew 10s. A backup tool's snapshot is cut while pod p still uses
// the claim; p writes after it, then goes. On the storage clock that cut
// reads seconds after the use ended: without the margin it would count as
// the claim's rescue, and the claim would be reaped without p's last write.
// With it, the janitor takes a rescue of its own (after orphaned-since plus
// twice the skew) and reaps on that one (docs/spec.md#rule-clock-skew).
// Ground truth takes the offset back out of every cut time.
//
// Safety v3 (issue 23), finding 6.
func TestStorageClockAheadOfTheAPIServer(t *testing.T) {
	const ahead, skew = 8 * time.Second, 10 * time.Second
	ctx := context.Background()
	w := newPathWorld(t)
	c := w.claim("ws-a", "a", "", nil)
	if err := csidriver.SetFault(env.DriverStateDir, c.Handle, csidriver.Fault{CutOffset: ahead}); err != nil {
		t.Fatal(err)
	}
	stop := w.use("ws-a", "p")
	waitUsed(t, w.f, w.ns, "ws-a")
	w.foreignSnapshot("backup-a", "ws-a", nil)
	// p writes and goes in a later second than the backup's cut (ground
	// truth judges cuts to the second).
	nextSecond(time.Now())
	gens := newGenerations()
	gens.write(w.f, w.ns, "ws-a", "p")
	stop()
	if _, err := w.f.WaitUnused(ctx, w.ns, "ws-a"); err != nil {
		t.Fatal(err)
	}
	trueSnaps := func() []truthSnap {
		snaps := w.snaps()
		for i := range snaps {
			if snaps[i].VolumeHandle == c.Handle {
				snaps[i].Cut = snaps[i].Cut.Add(-ahead)
			}
		}
		return snaps
	}
	for _, s := range w.snaps() {
		if s.Name != "backup-a" {
			continue
		}
		// The setup proves something only when the backup's cut reads
		// after the end of the use, though it was taken before it.
		if !s.Cut.Add(-ahead).Before(c.usedUntil) || s.Cut.Before(c.usedUntil.Add(2*time.Second)) {
			t.Fatalf("setup: backup-a cut %s on the storage clock (%s on the real one); the use ended at %s: want a cut before the end that reads at least 2 s after it",
				s.Cut.UTC().Format(time.RFC3339Nano), s.Cut.Add(-ahead).UTC().Format(time.RFC3339Nano), c.usedUntil.UTC().Format(time.RFC3339Nano))
		}
	}
	args := w.args("run", "0s", "--yes", "--max-deletion-percent", "100", "--clock-skew", skew.String())
	w.run(args, 0, 4)
	if !w.deleted("ws-a") {
		w.run(args, 0, 4) // the snapshot controller's finalizer can fail the first delete's precondition
	}
	snaps := trueSnaps()
	_, ok := c.rescueAfter(snaps, c.usedUntil)
	switch {
	case !w.deleted("ws-a"):
		t.Errorf("ws-a was not reaped on a rescue of its own after two runs:%s", c.describeSnaps(snaps))
	case !ok:
		t.Errorf("ws-a was deleted without an intact snapshot cut (on the real clock) after its last use ended (%s): the backup's cut, read on a clock %s ahead, counted:%s",
			c.usedUntil.UTC().Format(time.RFC3339Nano), ahead, c.describeSnaps(snaps))
	}
}
