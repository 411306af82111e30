package cli_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/csidriver"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

const wsSel = "app.kubernetes.io/part-of=demo-workspaces"

// orphan creates a bound workspace claim and waits until its orphaned-since
// is known (the Unused condition), so that with a zero grace period it is
// Orphaned at once.
func orphan(t *testing.T, f *testenv.Fixtures, ns, name, ws, handle string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": ws}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: labels, VolumeHandle: handle}); err != nil {
		t.Fatal(err)
	}
	c, err := f.WaitUnused(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}

func snapArgs(ns string, extra ...string) []string {
	return append([]string{"snapshot", "-n", ns, "-l", wsSel, "--workspace-label", "workspace",
		"--min-age", "0s", "--grace-period", "0s", "-o", "json", "--lock-namespace", ns}, extra...)
}

func snapshots(t *testing.T, f *testenv.Fixtures, ns string) []snapv1.VolumeSnapshot {
	t.Helper()
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func entry(t *testing.T, r report, name string) (state, action, reason string) {
	t.Helper()
	for _, c := range r.Claims {
		if c.Name == name {
			return c.State, c.Action, c.Reason
		}
	}
	t.Fatalf("claim %s not in the report", name)
	return
}

func TestSnapshotRescuesOrphanOnceAndRerunCreatesNothing(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	code, out, stderr := run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	if st, act, _ := entry(t, r, "ws-a"); st != "Rescued" || act != rescue.ActionCreated {
		t.Fatalf("ws-a: state %s action %s, want Rescued snapshot-created", st, act)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots, want 1", len(snaps))
	}
	s := snaps[0]
	if s.Name != rescue.Name("ws-a", toUID(uid)) || s.Annotations["pvc-janitor.io/source-uid"] != uid ||
		s.Labels["app.kubernetes.io/managed-by"] != "pvc-janitor" || s.Labels["workspace"] != "a" ||
		s.Annotations["pvc-janitor.io/orphaned-since"] == "" || !testenv.Ready(&s) {
		t.Fatalf("rescue snapshot not as specified: %+v", s.ObjectMeta)
	}
	c, _ := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if c.Labels["pvc-janitor.io/phase"] != "Rescued" {
		t.Errorf("phase label %q, want Rescued", c.Labels["pvc-janitor.io/phase"])
	}
	for _, reason := range []string{"SnapshotCreated", "SnapshotReady"} {
		ev, _ := f.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,reason=" + reason})
		if len(ev.Items) != 1 {
			t.Errorf("%d %s events, want 1", len(ev.Items), reason)
		}
	}
	// Rerun: Rescued, nothing new.
	code, out, stderr = run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("rerun exit %d: %s", code, stderr)
	}
	if st, _, _ := entry(t, parse(t, out), "ws-a"); st != "Rescued" {
		t.Fatalf("rerun: state %s", st)
	}
	if n := len(snapshots(t, f, ns)); n != 1 {
		t.Fatalf("rerun made %d snapshots, want 1", n)
	}
}

func TestSnapshotDryRunCreatesNothing(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	code, out, stderr := run(t, snapArgs(ns, "--dry-run")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, act, _ := entry(t, parse(t, out), "ws-a"); act != rescue.ActionWould {
		t.Fatalf("action %q, want %s", act, rescue.ActionWould)
	}
	if n := len(snapshots(t, f, ns)); n != 0 {
		t.Fatalf("dry run made %d snapshots", n)
	}
}

func TestSnapshotWaitsForSlowDriverAndSurvivesTransientErrors(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-flaky", csidriver.Fault{TransientFailures: 2, TransientCode: "Unavailable"}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-slow", "slow", ns+"-slow")
	orphan(t, f, ns, "ws-flaky", "flaky", ns+"-flaky")
	start := time.Now()
	code, out, stderr := run(t, snapArgs(ns, "--snapshot-error-grace", "1s", "--snapshot-timeout", "2m")...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, stderr)
	}
	if time.Since(start) < 3*time.Second {
		t.Errorf("the run did not wait for the slow snapshot (%v)", time.Since(start))
	}
	r := parse(t, out)
	for _, n := range []string{"ws-slow", "ws-flaky"} {
		if st, act, reason := entry(t, r, n); st != "Rescued" || act != rescue.ActionCreated {
			t.Errorf("%s: state %s action %s (%s), want Rescued snapshot-created", n, st, act, reason)
		}
	}
}

func TestSnapshotPermanentFailureIsSnapshotFailedAfterAttempts(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-broken", csidriver.Fault{PermanentError: "disk on fire"}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-broken", "b", ns+"-broken")
	start := time.Now()
	code, out, stderr := run(t, snapArgs(ns, "--snapshot-error-grace", "1s", "--snapshot-attempts", "2", "--snapshot-timeout", "60s")...)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, stderr)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Errorf("took %v, beyond the timeout", el)
	}
	st, act, reason := entry(t, parse(t, out), "ws-broken")
	if st != "SnapshotFailed" || act != rescue.ActionFailed || !strings.Contains(reason, "after 2 attempts") || !strings.Contains(reason, "disk on fire") {
		t.Fatalf("state %s action %s reason %q", st, act, reason)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 || snaps[0].Annotations["pvc-janitor.io/attempt"] != "2" {
		t.Fatalf("want the second attempt's snapshot left for inspection, got %d", len(snaps))
	}
	ev, _ := f.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,reason=SnapshotFailed"})
	if len(ev.Items) != 1 || ev.Items[0].Type != "Warning" {
		t.Errorf("SnapshotFailed events: %+v", ev.Items)
	}
}

func TestSupersededClaimsGetNoOrdinarySnapshot(t *testing.T) {
	ctx := context.Background()
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-old", "w1", "")
	orphan(t, f, ns, "ws-other", "w2", "")
	time.Sleep(1100 * time.Millisecond)
	// Workspace w1 moved on to a newer claim; workspace w2 has a newer
	// snapshot taken from another claim.
	orphan(t, f, ns, "ws-new", "w1", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-other-2", Labels: map[string]string{"workspace": "w2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "w2-newer", "ws-other-2", "", map[string]string{"workspace": "w2"}, nil); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	for _, n := range []string{"ws-old", "ws-other"} {
		if st, act, _ := entry(t, r, n); st != "Superseded" || act == rescue.ActionCreated {
			t.Errorf("%s: state %s action %s, want Superseded and no snapshot", n, st, act)
		}
	}
	for _, s := range snapshots(t, f, ns) {
		if src := *s.Spec.Source.PersistentVolumeClaimName; src == "ws-old" || src == "ws-other" {
			t.Errorf("snapshot %s taken of superseded claim %s", s.Name, src)
		}
	}
	// archive: a snapshot labelled superseded.
	code, out, stderr = run(t, snapArgs(ns, "--superseded", "archive")...)
	if code != 0 {
		t.Fatalf("archive exit %d: %s", code, stderr)
	}
	if _, act, _ := entry(t, parse(t, out), "ws-old"); act != rescue.ActionArchived {
		t.Errorf("archive action %q", act)
	}
	found := false
	for _, s := range snapshots(t, f, ns) {
		if *s.Spec.Source.PersistentVolumeClaimName == "ws-old" {
			found = s.Labels["pvc-janitor.io/superseded"] == "true"
		}
	}
	if !found {
		t.Error("no archive snapshot labelled pvc-janitor.io/superseded=true for ws-old")
	}
}

func TestSnapshotNameTakenByAnotherClaimIsAConflict(t *testing.T) {
	ctx := context.Background()
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	name := rescue.Name("ws-a", toUID(uid))
	squatter, err := f.Snapshot(ctx, ns, name, "someone-else", "", nil, map[string]string{"pvc-janitor.io/source-uid": "another-uid"})
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, snapArgs(ns)...)
	if code != 4 {
		t.Fatalf("exit %d, want 4", code)
	}
	st, act, reason := entry(t, parse(t, out), "ws-a")
	if st != "SnapshotFailed" || act != rescue.ActionConflict || !strings.Contains(reason, "not this claim's") {
		t.Fatalf("state %s action %s reason %q", st, act, reason)
	}
	got, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || got.UID != squatter.UID || *got.Spec.Source.PersistentVolumeClaimName != "someone-else" {
		t.Fatalf("the other claim's snapshot was touched: %v %+v", err, got)
	}
}

func TestUnknownSnapshotClassIsUsageErrorAndWritesNothing(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	code, _, stderr := run(t, snapArgs(ns, "--snapshot-class", "nope")...)
	if code != 2 || !strings.Contains(stderr, `"nope" not found`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	c, _ := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok || len(snapshots(t, f, ns)) > 0 {
		t.Fatal("a usage error wrote to the cluster")
	}
}

func TestSnapshotRetriesThrottlingAndServerErrors(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	orphan(t, f, ns, "ws-b", "b", "")
	p := env.StartFaultProxy(t, 42)
	p.Set(testenv.Faults{Rate429: 0.15, Rate500: 0.15})
	var out, errOut strings.Builder
	args := append(snapArgs(ns), "--kubeconfig", p.Kubeconfig, "--log-format", "json")
	code := runWith(args, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d through the fault proxy: %s", code, errOut.String())
	}
	inj := p.Injected()
	if inj[429] == 0 || inj[500] == 0 {
		t.Fatalf("the proxy injected %v: the test proves nothing", inj)
	}
	r := parse(t, out.String())
	for _, n := range []string{"ws-a", "ws-b"} {
		if st, _, _ := entry(t, r, n); st != "Rescued" {
			t.Errorf("%s: %s", n, st)
		}
	}
	if n := len(snapshots(t, f, ns)); n != 2 {
		t.Errorf("%d snapshots, want exactly 2 (retries must not duplicate)", n)
	}
	t.Logf("injected %v", inj)
}

var buildOnce sync.Once
var janitorBin string

// binary builds cmd/janitor once per test run, for the tests that need a
// real process (SIGKILL).
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir, err := os.MkdirTemp("", "janitor-bin-")
		if err != nil {
			t.Fatal(err)
		}
		janitorBin = filepath.Join(dir, "janitor")
		cmd := exec.Command("go", "build", "-o", janitorBin, "./cmd/janitor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build janitor: %v\n%s", err, out)
		}
	})
	return janitorBin
}

func TestSnapshotKilledWhileWaitingThenRerunCompletes(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 6 * time.Second}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-slow", "s", ns+"-slow")
	// A short lease: the killed run cannot release it, the rerun waits it out.
	cmd := exec.Command(binary(t), append(snapArgs(ns), "--kubeconfig", env.Kubeconfig, "--log-format", "json", "--lock-duration", "2s")...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once its snapshot exists and is still pending.
	deadline := time.Now().Add(30 * time.Second)
	for len(snapshots(t, f, ns)) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 || testenv.Ready(&snaps[0]) {
		t.Fatalf("want one pending snapshot at the kill, got %d", len(snaps))
	}
	time.Sleep(2500 * time.Millisecond)
	code, out, stderr := run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("rerun exit %d: %s", code, stderr)
	}
	if st, act, _ := entry(t, parse(t, out), "ws-slow"); st != "Rescued" || act != rescue.ActionReady {
		t.Fatalf("rerun: state %s action %s, want Rescued snapshot-ready (found, not created)", st, act)
	}
	if after := snapshots(t, f, ns); len(after) != 1 || after[0].UID != snaps[0].UID {
		t.Fatalf("rerun duplicated or replaced the snapshot")
	}
}

// TestFailedOwnSnapshotIsRecreatedNotDuplicated: a claim whose own snapshot
// failed (here under a name an older version chose) gets that snapshot
// deleted and recreated once the driver recovers; never a second one.
func TestFailedOwnSnapshotIsRecreatedNotDuplicated(t *testing.T) {
	ctx := context.Background()
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	handle := ns + "-sick"
	if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{PermanentError: "try later"}); err != nil {
		t.Fatal(err)
	}
	uid := orphan(t, f, ns, "ws-sick", "s", handle)
	if _, err := f.Snapshot(ctx, ns, "legacy-rescue", "ws-sick", "", map[string]string{"app.kubernetes.io/managed-by": "pvc-janitor"},
		map[string]string{"pvc-janitor.io/source-uid": uid}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "legacy-rescue", 30*time.Second, testenv.Failed); err != nil {
		t.Fatal(err)
	}
	if err := csidriver.ClearFault(env.DriverStateDir, handle); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, snapArgs(ns, "--snapshot-error-grace", "1s", "--snapshot-attempts", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, out, stderr)
	}
	if st, _, reason := entry(t, parse(t, out), "ws-sick"); st != "Rescued" {
		t.Fatalf("state %s (%s)", st, reason)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 || snaps[0].Name != "legacy-rescue" || !testenv.Ready(&snaps[0]) {
		t.Fatalf("want legacy-rescue recreated and ready, alone; got %d snapshots", len(snaps))
	}
}

func TestGuardRescueSnapshotsFirst(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	base := []string{"guard", "-n", ns, "--workspace-label", "workspace", "--min-age", "0s", "--grace-period", "0s", "-o", "json", "--lock-namespace", ns}
	if code, _, stderr := run(t, append(base, "--rescue")...); code != 2 || !strings.Contains(stderr, "selector") {
		t.Fatalf("guard --rescue without a selector: exit %d %q, want 2", code, stderr)
	}
	if code, _, _ := run(t, append(base, "-l", wsSel)...); code != 3 {
		t.Fatalf("guard before rescue: exit %d, want 3", code)
	}
	code, out, stderr := run(t, append(base, "-l", wsSel, "--rescue")...)
	if code != 0 {
		t.Fatalf("guard --rescue: exit %d, want 0: %s\n%s", code, out, stderr)
	}
	g := parse(t, out)
	if st, act, _ := entry(t, g, "ws-a"); st != "Rescued" || act != "snapshot-created" {
		t.Fatalf("state %s action %s", st, act)
	}
	if g.DryRun {
		t.Error("guard --rescue acted but its report says dry run")
	}
}
