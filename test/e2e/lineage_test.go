//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// runUntilGone runs `run --yes` until the claim is gone (deleted or
// Terminating): a run may leave it to the next one while its rescue gets
// ready or the claim changed since it was read.
func runUntilGone(t *testing.T, f *testenv.Fixtures, ns, name string, extra ...string) {
	t.Helper()
	for i := 0; i < 4; i++ {
		code, out, stderr := run(t, reapArgs("run", ns, append([]string{"--yes", "--max-deletion-percent", "100"}, extra...)...)...)
		if code != 0 {
			t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
		}
		if !exists(t, f, ns, name) {
			if err := f.WaitClaimGone(context.Background(), ns, name); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s not reaped by four runs", name)
}

// restoreOlderBesideNewer is the sequence of finding 2 (docs/spec.md#rule-restored-data-time):
// alice-1 is reaped (rescue R1); alice-2, the workspace's newer claim, is
// orphaned with its newest work; a second later R1 is restored beside it as
// alice-old with --allow-older (a newer claim by creation, of older data).
func restoreOlderBesideNewer(t *testing.T, f *testenv.Fixtures, ns string) {
	t.Helper()
	orphan(t, f, ns, "alice-1", "alice", "")
	nextSecond(time.Now())
	runUntilGone(t, f, ns, "alice-1")
	r1 := snapshotsOf(t, f, ns, "alice-1")
	if len(r1) != 1 {
		t.Fatalf("rescues of alice-1: %v", r1)
	}
	orphan(t, f, ns, "alice-2", "alice", "")
	if err := f.WriteVolume(context.Background(), ns, "alice-2", "notes.txt", []byte("newest work")); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	if code, out, stderr := run(t, "restore", "-n", ns, "--from", r1[0], "--as", "alice-old", "--allow-older",
		"--workspace-label", "workspace", "-o", "json"); code != 0 {
		t.Fatalf("restore --allow-older: exit %d: %s\n%s", code, out, stderr)
	}
}

// TestRestoredOlderCopyIsNotNewerData is issue 23's
// finding 2 on a real cluster (docs/spec.md#restore-refusals,
// docs/spec.md#retention-last-copy, docs/spec.md#rule-restored-data-time): alice-2 holds
// the workspace's newest data and is reaped (rescue R2) after alice-1
// (rescue R1). `restore ns/alice-1` must refuse: R2 is newer data of the
// workspace. With --allow-older it restores R1 beside it, recording its
// provenance; the restored claim in use does not make R2 prunable.
func TestRestoredOlderCopyIsNotNewerData(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	write := func(claim, v string) {
		if err := f.WriteVolume(ctx, ns, claim, "notes.txt", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	orphan(t, f, ns, "alice-1", "alice", "")
	write("alice-1", "older work")
	nextSecond(time.Now())
	runUntilGone(t, f, ns, "alice-1")
	orphan(t, f, ns, "alice-2", "alice", "")
	write("alice-2", "newest work")
	nextSecond(time.Now())
	runUntilGone(t, f, ns, "alice-2")
	r2 := snapshotsOf(t, f, ns, "alice-2")
	if len(r2) != 1 {
		t.Fatalf("rescues of alice-2: %v, want one", r2)
	}

	restore := func(args ...string) (int, string, string) {
		return run(t, append([]string{"restore", "--workspace-label", "workspace", "--min-age", "0s", "-o", "json"}, args...)...)
	}
	code, out, stderr := restore(ns + "/alice-1")
	if code != 2 || !strings.Contains(stderr, "rescue "+ns+"/"+r2[0]+" of workspace alice holds newer data") {
		t.Fatalf("restore %s/alice-1 with R2 newer: exit %d, stdout %q, stderr %q; want 2 naming %s", ns, code, out, stderr, r2[0])
	}
	if exists(t, f, ns, "alice-1") {
		t.Fatal("the refused restore created alice-1")
	}
	if code, out, stderr := restore(ns+"/alice-1", "--as", "alice-old", "--allow-older"); code != 0 {
		t.Fatalf("restore --allow-older: exit %d: %s\n%s", code, out, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "alice-old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Annotations["pvc-janitor.io/restored-data-time"] == "" || c.Annotations["pvc-janitor.io/restored-from"] == "" {
		t.Errorf("alice-old carries no provenance: %v", c.Annotations)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"alice-old"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	code, out, stderr = run(t, "prune", "-n", ns, "--workspace-label", "workspace", "-o", "json", "--lock-namespace", ns,
		"--max-deletion-percent", "100", "--keep-for", "1s", "--delete-contents", "--yes")
	if code != 0 && code != 4 {
		t.Fatalf("prune: exit %d: %s\n%s", code, out, stderr)
	}
	for _, s := range parse(t, out).Snapshots {
		if s.Name == r2[0] && (s.Action != "kept" || !strings.Contains(s.Reason, "only copy")) {
			t.Errorf("prune --keep-for with alice-old (older data) in use: R2 %s %s (%s), want kept as the only copy", s.Name, s.Action, s.Reason)
		}
	}
	if n := len(snapshotsOf(t, f, ns, "alice-2")); n != 1 {
		t.Errorf("R2 is gone after prune: %d rescues of alice-2", n)
	}
}

// TestForeignDeleteSnapshotKeepsGateShut is issue 23's
// finding 4 on a real cluster (docs/spec.md#guard-only-copies): a backup tool's
// snapshot with deletionPolicy Delete rescues the claim; guard exits 3
// before the reap and, the claim reaped on it, still exits 3: that
// snapshot is now its only copy and would go with the cluster.
func TestForeignDeleteSnapshotKeepsGateShut(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-f", "f", "")
	// Cut past the claim's orphaned-since by more than --clock-skew, so
	// that it counts as the rescue (docs/spec.md#rule-clock-skew).
	if err := f.WaitServerAfter(ctx, ns, unusedSince(t, f, ns, "ws-f").Add(defaultClockSkew)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "backup-tool-ws-f", "ws-f", testenv.SnapshotClassDelete, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "backup-tool-ws-f", time.Minute, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	guard := []string{"guard", "-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s", "--grace-period", "0s",
		"-o", "json", "--lock-namespace", ns}
	if code, out, stderr := run(t, guard...); code != 3 {
		t.Fatalf("guard before the reap: exit %d, want 3: %s\n%s", code, out, stderr)
	}
	reapUntilDeleted(t, f, ns, "ws-f", k8stypes.UID(uid), reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100"))
	code, out, stderr := run(t, guard...)
	if code != 3 {
		t.Fatalf("guard after ws-f was reaped on a Delete-policy backup snapshot: exit %d, want 3: %s\n%s", code, out, stderr)
	}
	found := false
	for _, s := range parse(t, out).Snapshots {
		if s.Name == "backup-tool-ws-f" {
			found = s.Action == "at-risk" && strings.Contains(s.Reason, "deletionPolicy Delete")
		}
	}
	if !found {
		t.Errorf("the report does not list backup-tool-ws-f as at risk:\n%s", out)
	}
}

// TestRestoredClaimInUseDoesNotSupersede is the other half
// of issue 23's finding 2 on a real cluster (docs/spec.md#rule-superseded,
// docs/spec.md#rule-durable-evidence): alice-2 holds the newest data and is
// orphaned; alice-old, restored from alice-1's older rescue with
// --allow-older, is mounted. alice-2 is not Superseded, and `run
// --superseded discard` rescues it before it deletes it.
func TestRestoredClaimInUseDoesNotSupersede(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	restoreOlderBesideNewer(t, f, ns)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"alice-old"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	code, out, stderr := run(t, reapArgs("scan", ns, "--dry-run")...)
	if code != 0 {
		t.Fatalf("scan: exit %d: %s\n%s", code, out, stderr)
	}
	if st, _, reason := entry(t, parse(t, out), "alice-2"); st == "Superseded" {
		t.Errorf("alice-2 is Superseded by a restored copy of older data: %s", reason)
	}
	runUntilGone(t, f, ns, "alice-2", "--superseded", "discard")
	if n := len(snapshotsOf(t, f, ns, "alice-2")); n != 1 {
		t.Errorf("alice-2 was deleted with %d rescues under --superseded discard, want its rescue", n)
	}
}

// TestArchiveNeverShieldsItselfOverARescue is issue 23's
// finding 3 on a real cluster (docs/spec.md#retention-archives): a lingering pod
// keeps session 1 (alice-1) in use past the end of session 2 (alice-2).
// `run --superseded archive --sessions-carry-data` archives alice-1
// (superseded by the newer claim) with the later data time and rescues alice-2; `prune --keep-last 1`
// must keep alice-2's rescue, which the archive does not hold.
func TestArchiveNeverShieldsItselfOverARescue(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "alice-1", "alice", "")
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "lingering", Claims: []string{"alice-1"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	orphan(t, f, ns, "alice-2", "alice", "")
	if err := f.WriteVolume(ctx, ns, "alice-2", "notes.txt", []byte("session 2")); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	if err := f.ForceDeletePod(ctx, ns, "lingering"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitIdle(ctx, ns, "alice-1"); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	// alice-1 is superseded by alice-2, a newer session created empty: the
	// workspace's chronological line, under --sessions-carry-data
	// (docs/spec.md#rule-superseded); by descent it would be rescued.
	runUntilGone(t, f, ns, "alice-1", "--superseded", "archive", "--sessions-carry-data")
	runUntilGone(t, f, ns, "alice-2", "--superseded", "archive", "--sessions-carry-data")
	r2 := snapshotsOf(t, f, ns, "alice-2")
	a1 := snapshotsOf(t, f, ns, "alice-1")
	if len(r2) != 1 || len(a1) != 1 {
		t.Fatalf("rescues of alice-2 %v, archives of alice-1 %v: want one each", r2, a1)
	}
	code, out, stderr := run(t, "prune", "-n", ns, "--workspace-label", "workspace", "-o", "json", "--lock-namespace", ns,
		"--max-deletion-percent", "100", "--keep-last", "1", "--delete-contents", "--yes")
	if code != 0 && code != 4 {
		t.Fatalf("prune: exit %d: %s\n%s", code, out, stderr)
	}
	for _, s := range parse(t, out).Snapshots {
		if s.Name == r2[0] && s.Action != "kept" {
			t.Errorf("prune --keep-last 1 beside archive %s: alice-2's rescue %s %s (%s), want kept", a1[0], s.Name, s.Action, s.Reason)
		}
	}
	if n := len(snapshotsOf(t, f, ns, "alice-2")); n != 1 {
		t.Errorf("alice-2's rescue is gone after prune")
	}
}

// TestRescueOfARestoredClaimKeepsItsLineWhenTheClaimIsGone is the sequence
// a 500-iteration chaos run found (2026-12-03, seed 1796307327777729543):
// alice-1 is reaped (R1); alice-2, the workspace's newer claim, is used and
// orphaned; R1 is restored beside it as alice-old (--allow-older), used
// and orphaned later than alice-2. Both are reaped; alice-old's rescue has
// the later data time, but its line reaches only R1's data. Once alice-old
// is gone, `prune --keep-last 1` must keep alice-2's rescue, the only copy
// of the workspace's newest line: the rescue records the data time its
// claim was restored from (docs/spec.md#rule-restored-data-time).
func TestRescueOfARestoredClaimKeepsItsLineWhenTheClaimIsGone(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	restoreOlderBesideNewer(t, f, ns)
	// alice-old is used after alice-2's last use: its rescue's data time
	// is the later one.
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"alice-old"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitIdle(ctx, ns, "alice-old"); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now())
	runUntilGone(t, f, ns, "alice-2")
	runUntilGone(t, f, ns, "alice-old")
	r2, rOld := snapshotsOf(t, f, ns, "alice-2"), snapshotsOf(t, f, ns, "alice-old")
	if len(r2) != 1 || len(rOld) != 1 {
		t.Fatalf("rescues of alice-2 %v, of alice-old %v: want one each", r2, rOld)
	}
	vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, rOld[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Annotations["pvc-janitor.io/restored-data-time"] == "" {
		t.Errorf("the rescue %s of the restored claim alice-old does not record the data time it was restored from: %v", rOld[0], vs.Annotations)
	}
	code, out, stderr := run(t, "prune", "-n", ns, "--workspace-label", "workspace", "-o", "json", "--lock-namespace", ns,
		"--max-deletion-percent", "100", "--keep-last", "1", "--delete-contents", "--yes")
	if code != 0 && code != 4 {
		t.Fatalf("prune: exit %d: %s\n%s", code, out, stderr)
	}
	for _, s := range parse(t, out).Snapshots {
		if s.Name == r2[0] && s.Action != "kept" {
			t.Errorf("prune --keep-last 1 beside %s (alice-old's, later data time, older line): alice-2's rescue %s %s (%s), want kept", rOld[0], s.Name, s.Action, s.Reason)
		}
	}
	if n := len(snapshotsOf(t, f, ns, "alice-2")); n != 1 {
		t.Errorf("alice-2's rescue, the only copy of the workspace's newest line, is gone after prune")
	}
}
