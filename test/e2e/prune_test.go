//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestPruneCommand: janitor prune without retention prunes nothing; with
// --keep-last 1 it prunes the older rescue of a reaped claim and keeps the
// newest (the only copy); run with --keep-last does the same in its
// retention step. Under the Retain class, without --delete-contents the
// older rescue is kept and the report says why.
func TestPruneCommand(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	snap := func(extra ...string) {
		if code, _, stderr := run(t, snapArgs(ns, extra...)...); code != 0 {
			t.Fatalf("snapshot exit %d: %s", code, stderr)
		}
	}
	snap("--snapshot-class", testenv.SnapshotClassRetain)
	// Used again, then rescued again: two rescues of ws-a.
	nextSecond(time.Now())
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, reapArgs("scan", ns)...); code != 0 {
		t.Fatalf("scan exit %d: %s", code, stderr)
	}
	// The use outlasts the second the scan recorded as its last use
	// (last-used, rounded up) by --clock-skew: an Unused condition dated
	// before that is stale and the claim would only be marked afresh
	// (docs/spec.md#rule-last-used).
	pastLastUse(time.Now())
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	idle(t, f, ns, "ws-a")
	nextSecond(time.Now())
	if code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100", "--snapshot-class", testenv.SnapshotClassDelete)...); code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots, want two rescues", len(snaps))
	}
	older, newer := snaps[0].Name, snaps[1].Name
	if snaps[0].CreationTimestamp.After(snaps[1].CreationTimestamp.Time) {
		older, newer = newer, older
	}
	// The rescue of the earlier orphan period is labelled stale once the
	// new one is ready, and kept (docs/spec.md#retention); the new one is not.
	for _, s := range snaps {
		if got, want := s.Labels[inventory.LabelStale] == "true", s.Name == older; got != want {
			t.Errorf("%s: stale label %v, want %v (older %s)", s.Name, got, want, older)
		}
	}
	prune := func(extra ...string) (int, report, string) {
		code, out, stderr := run(t, append([]string{"prune", "-n", ns, "--workspace-label", "workspace", "-o", "json", "--lock-namespace", ns,
			"--max-deletion-percent", "100"}, extra...)...)
		if code != 0 && code != 4 {
			t.Fatalf("prune %v: exit %d: %s\n%s", extra, code, out, stderr)
		}
		return code, parse(t, out), stderr
	}
	action := func(r report, name string) (string, string) {
		for _, s := range r.Snapshots {
			if s.Name == name {
				return s.Action, s.Reason
			}
		}
		t.Fatalf("snapshot %s not in the report", name)
		return "", ""
	}
	// Without a retention prune refuses before reading (exit 2:
	// TestRefusedBeforeAnyRequest); one that keeps both prunes nothing.
	_, r, _ := prune("--keep-last", "2", "--yes")
	if a, why := action(r, older); a != "kept" {
		t.Errorf("--keep-last 2: %s %s (%s), want kept", older, a, why)
	}
	// The summary's rescues: both, their bytes as the objects say (0 here:
	// the driver sizes only the volumes it provisioned; the sums are
	// report's TestRescuesSummary), and both under a day old.
	var held int64
	for _, s := range snaps {
		if s.Status != nil && s.Status.RestoreSize != nil {
			held += s.Status.RestoreSize.Value()
		}
	}
	if rs := r.Summary.Rescues; rs == nil || rs.Count != 2 || rs.Bytes != held || rs.ByAge["under-1d"] != 2 {
		t.Errorf("summary.rescues %+v, want 2 of %d bytes, both under-1d", rs, held)
	}
	// The older rescue is Retain: kept without --delete-contents.
	_, r, _ = prune("--keep-last", "1", "--yes")
	if a, why := action(r, older); a != "kept" || !strings.Contains(why, "Retain") {
		t.Errorf("Retain without --delete-contents: %s %s (%s)", older, a, why)
	}
	if a, why := action(r, newer); a != "kept" {
		t.Errorf("newest: %s %s (%s)", newer, a, why)
	}
	// Each entry says what the rescue is, as scan's and guard's do: both
	// are ready, of ws-a, with the data time and their content's policy.
	policy := map[string]string{older: "Retain", newer: "Delete"}
	for _, s := range r.Snapshots {
		if !s.ReadyToUse || s.SourceUID != uid || s.DataTime == nil || s.DeletionPolicy != policy[s.Name] {
			t.Errorf("prune's entry of %s: readyToUse %v, sourceUID %q, dataTime %v, deletionPolicy %q; want true, %q, set, %q",
				s.Name, s.ReadyToUse, s.SourceUID, s.DataTime, s.DeletionPolicy, uid, policy[s.Name])
		}
	}
	if code, _, stderr := run(t, "prune", "-n", ns, "--keep-last", "1"); code != 2 || !strings.Contains(stderr, "pass --yes") {
		t.Errorf("prune without --yes off a terminal: exit %d: %s", code, stderr)
	}
	// The blast radius holds prune back: pruning one of two rescues is
	// 50%, over --max-deletion-percent 10; nothing is deleted, exit 4.
	code, r, _ := prune("--keep-last", "1", "--delete-contents", "--yes", "--max-deletion-percent", "10")
	if a, why := action(r, older); code != 4 || a != "prune-limited" || !strings.Contains(why, "--max-deletion-percent 10") {
		t.Errorf("prune over --max-deletion-percent 10: exit %d, %s %s (%s); want 4, prune-limited naming the limit", code, older, a, why)
	}
	if len(snapshots(t, f, ns)) != 2 {
		t.Fatalf("the blast radius deleted a rescue")
	}
	// With --delete-contents, through run's retention step.
	code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100", "--keep-last", "1", "--delete-contents")...)
	if code != 0 {
		t.Fatalf("run --keep-last 1 --delete-contents: exit %d: %s\n%s", code, out, stderr)
	}
	r = parse(t, out)
	if a, why := action(r, older); a != "pruned" || r.Summary.SnapshotsPruned != 1 {
		t.Errorf("run's retention: %s %s (%s), summary %+v", older, a, why, r.Summary)
	}
	if rs := r.Summary.Rescues; rs == nil || rs.Count != 1 || rs.ByAge["under-1d"] != 1 {
		t.Errorf("summary.rescues after pruning one of two: %+v, want 1", rs)
	}
	if a, _ := action(r, newer); a != "kept" {
		t.Errorf("the only copy %s: %s", newer, a)
	}
	if _, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, newer, metav1.GetOptions{}); err != nil {
		t.Errorf("the newest rescue: %v", err)
	}
	// One Pruned Event, on the pruned rescue.
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Pruned"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 || ev.Items[0].InvolvedObject.Kind != "VolumeSnapshot" || ev.Items[0].InvolvedObject.Name != older {
		t.Errorf("Pruned events %+v, want one on VolumeSnapshot %s", ev.Items, older)
	}
}

// TestFailedSnapshotContentsLeakOnlyWithoutTheGrant (docs/spec.md#retention): a snapshot
// the janitor gives up on is deleted; under the Retain class its content
// stays behind and the report names it (summary.leakedContents); with
// --delete-contents the content goes too.
func TestFailedSnapshotContentsLeakOnlyWithoutTheGrant(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	for _, name := range []string{"ws-a", "ws-b"} {
		if err := csidriver.SetFault(env.DriverStateDir, ns+"-"+name, csidriver.Fault{PermanentError: "volume is corrupted"}); err != nil {
			t.Fatal(err)
		}
		orphan(t, f, ns, name, name, "")
	}
	args := func(claimSel string, extra ...string) []string {
		return append([]string{"snapshot", "-n", ns, "-l", wsSel + ",workspace=" + claimSel, "--workspace-label", "workspace",
			"--min-age", "0s", "--grace-period", "0s", "-o", "json", "--lock-namespace", ns, "--snapshot-attempts", "1",
			"--snapshot-error-grace", "1s", "--snapshot-class", testenv.SnapshotClassRetain}, extra...)
	}
	contentGone := func(name string) bool {
		_, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	code, out, stderr := run(t, args("ws-a")...)
	if code != 4 {
		t.Fatalf("snapshot of a broken volume: exit %d, want 4: %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	var leaked []string
	for _, c := range r.Claims {
		if c.Name == "ws-a" {
			leaked = c.LeakedContents
		}
	}
	if len(leaked) != 1 || r.Summary.LeakedContents != 1 || contentGone(leaked[0]) {
		t.Fatalf("without --delete-contents: leaked %v, summary %+v: want the content named, counted and still there", leaked, r.Summary)
	}
	code, out, stderr = run(t, args("ws-b", "--delete-contents")...)
	if code != 4 {
		t.Fatalf("snapshot --delete-contents: exit %d: %s\n%s", code, out, stderr)
	}
	r = parse(t, out)
	if r.Summary.LeakedContents != 0 {
		t.Errorf("with --delete-contents: summary %+v, want no leak", r.Summary)
	}
	// The content of ws-b's failed snapshot is gone (its deletion is
	// asynchronous: the snapshot controller deletes it).
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := f.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, c := range l.Items {
			if c.Spec.VolumeSnapshotRef.Namespace == ns && strings.HasPrefix(c.Spec.VolumeSnapshotRef.Name, "ws-b-") {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d contents of ws-b's failed snapshot left after 30s with --delete-contents", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
