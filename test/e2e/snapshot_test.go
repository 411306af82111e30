//go:build integration

package cli_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
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
	return string(idle(t, f, ns, name).UID)
}

// idle waits until the controller manager counts the claim unused (on a
// stack that maintains the Unused condition) or, on one that does not,
// marks it as a first scan would: either way the next run can rescue it.
func idle(t *testing.T, f *testenv.Fixtures, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.WaitIdle(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.MarkIdle(context.Background(), ns, name); err != nil {
		t.Fatal(err)
	}
	return c
}

// unusedSince is the claim's orphaned-since before any run has marked it:
// the end of the second its Unused condition's lastTransitionTime names.
func unusedSince(t *testing.T, f *testenv.Fixtures, ns, name string) time.Time {
	t.Helper()
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
			// The janitor dates the use by the end of the second the
			// condition names (the API keeps whole seconds).
			return cond.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
		}
	}
	if m, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"]); err == nil && !f.UnusedCondition {
		return m // MarkIdle's
	}
	t.Fatalf("claim %s has no Unused: True condition", name)
	return time.Time{}
}

// specName is the rescue name of docs/spec.md#rescue-name, computed here from the formula (not by
// rescue.Name): <claim>-rescue-<first 10 hex of sha256(uid "/" RFC 3339)>.
func specName(claim, uid string, since time.Time) string {
	sum := sha256.Sum256([]byte(uid + "/" + since.UTC().Format(time.RFC3339)))
	return claim + "-rescue-" + hex.EncodeToString(sum[:])[:10]
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
	f := fixtures(t)
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
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mark := c.Annotations["pvc-janitor.io/orphaned-since"]
	since, err := time.Parse(time.RFC3339, mark)
	if err != nil {
		t.Fatalf("claim mark %q: %v", mark, err)
	}
	if want := specName("ws-a", uid, since); s.Name != want {
		t.Errorf("rescue named %s, want %s (docs/spec.md#rescue-name, from the UID and the orphaned-since %s)", s.Name, want, mark)
	}
	if s.Annotations["pvc-janitor.io/source-uid"] != uid || s.Annotations["pvc-janitor.io/source-name"] != "ws-a" ||
		s.Labels["app.kubernetes.io/managed-by"] != "pvc-janitor" || s.Labels["workspace"] != "a" ||
		s.Annotations["pvc-janitor.io/orphaned-since"] != mark || !testenv.Ready(&s) {
		t.Fatalf("rescue snapshot not as specified: %+v", s.ObjectMeta)
	}
	if c.Labels["pvc-janitor.io/phase"] != "Rescued" {
		t.Errorf("phase label %q, want Rescued", c.Labels["pvc-janitor.io/phase"])
	}
	// One Event per rescue outcome (docs/spec.md#run-events).
	for reason, want := range map[string]int{"SnapshotCreated": 0, "SnapshotReady": 1} {
		ev, err := f.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Items) != want {
			t.Errorf("%d %s events, want %d", len(ev.Items), reason, want)
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
	f := fixtures(t)
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
	f := fixtures(t)
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

// TestSnapshotPermanentFailureIsSnapshotFailedAfterAttempts: a snapshot
// whose error outlasts every attempt is deleted (its finalizer must not keep
// the owner from deleting the claim), its error stays in the report, the
// Event and the claim's attempt record; the next run does not try before the
// record says, and then makes one attempt, not --snapshot-attempts.
func TestSnapshotPermanentFailureIsSnapshotFailedAfterAttempts(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-broken", csidriver.Fault{PermanentError: "disk on fire"}); err != nil {
		t.Fatal(err)
	}
	uid := orphan(t, f, ns, "ws-broken", "b", ns+"-broken")
	args := snapArgs(ns, "--snapshot-error-grace", "1s", "--snapshot-attempts", "2", "--snapshot-timeout", "60s", "--snapshot-retry-backoff", "1h")
	start := time.Now()
	code, out, stderr := run(t, args...)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, stderr)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Errorf("took %v, beyond the timeout", el)
	}
	st, act, reason := entry(t, parse(t, out), "ws-broken")
	if st != "SnapshotFailed" || act != rescue.ActionFailed || !strings.Contains(reason, "after 2 attempts") ||
		!strings.Contains(reason, "disk on fire") || !strings.Contains(reason, "deleted") {
		t.Fatalf("state %s action %s reason %q", st, act, reason)
	}
	if snaps := snapshots(t, f, ns); len(snaps) != 0 {
		t.Fatalf("the given-up snapshot %s is still there: its finalizer would hold the claim", snaps[0].Name)
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PersistentVolumeClaim,reason=SnapshotFailed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 || ev.Items[0].Type != "Warning" || !strings.Contains(ev.Items[0].Message, "disk on fire") {
		t.Errorf("SnapshotFailed events: %+v", ev.Items)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-broken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next, perr := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/next-attempt"])
	if c.Annotations["pvc-janitor.io/rescue-attempts"] != "2" || perr != nil ||
		next.Before(time.Now().Add(50*time.Minute)) || next.After(time.Now().Add(70*time.Minute)) {
		t.Fatalf("attempt record %v, want 2 attempts and the next in about 1h", c.Annotations)
	}
	if c.Labels["pvc-janitor.io/phase"] != "SnapshotFailed" {
		t.Errorf("phase label %q", c.Labels["pvc-janitor.io/phase"])
	}

	// Not due: the next run leaves it alone (and that is no failure of the run).
	code, out, stderr = run(t, args...)
	if code != 0 {
		t.Fatalf("run before the next attempt: exit %d: %s", code, stderr)
	}
	if st, act, reason := entry(t, parse(t, out), "ws-broken"); st != "SnapshotFailed" || act != rescue.ActionSkipped || !strings.Contains(reason, "next is due") {
		t.Fatalf("before the next attempt: state %s action %s reason %q", st, act, reason)
	}
	if n := len(snapshots(t, f, ns)); n != 0 {
		t.Fatalf("a run before the next attempt created %d snapshots", n)
	}

	// Due (the test moves the record back): one attempt, not two, and the
	// backoff doubles.
	patch := `{"metadata":{"annotations":{"pvc-janitor.io/next-attempt":"2000-01-01T00:00:00Z"}}}`
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-broken", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, args...)
	if code != 4 {
		t.Fatalf("due run: exit %d, want 4: %s", code, stderr)
	}
	if _, _, reason := entry(t, parse(t, out), "ws-broken"); !strings.Contains(reason, "after 3 attempts") {
		t.Fatalf("due run: reason %q, want 3 attempts in all (one in this run)", reason)
	}
	if c, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-broken", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	next, _ = time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/next-attempt"])
	if c.Annotations["pvc-janitor.io/rescue-attempts"] != "3" || next.Before(time.Now().Add(110*time.Minute)) {
		t.Fatalf("attempt record after the second failed run %v, want 3 attempts and the next in about 2h", c.Annotations)
	}

	// The volume recovers; once due, a rescue clears the record.
	if err := csidriver.ClearFault(env.DriverStateDir, ns+"-broken"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-broken", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, args...)
	if code != 0 {
		t.Fatalf("recovered run: exit %d: %s\n%s", code, out, stderr)
	}
	if c, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-broken", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/rescue-attempts"]; ok || c.Annotations["pvc-janitor.io/next-attempt"] != "" || string(c.UID) != uid {
		t.Errorf("a successful rescue must clear the attempt record: %v", c.Annotations)
	}
}

func TestSupersededClaimsGetNoOrdinarySnapshot(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-old", "w1", "")
	orphan(t, f, ns, "ws-other", "w2", "")
	// Newer data is data from after the end of the second the claims'
	// Unused condition names (the API keeps whole seconds).
	nextSecond(unusedSince(t, f, ns, "ws-old"))
	nextSecond(unusedSince(t, f, ns, "ws-other"))
	// Workspace w1 moved on to a newer claim; workspace w2 has a newer
	// snapshot taken from another claim.
	orphan(t, f, ns, "ws-new", "w1", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-other-2", Labels: map[string]string{"workspace": "w2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "w2-newer", "ws-other-2", "", map[string]string{"workspace": "w2"}, nil); err != nil {
		t.Fatal(err)
	}
	// The workspaces' chronological line supersedes (a newer claim created
	// empty, another claim's snapshot): --sessions-carry-data, not descent
	// (docs/spec.md#rule-superseded).
	code, out, stderr := run(t, snapArgs(ns, "--sessions-carry-data")...)
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
	// docs/spec.md#runs: a Superseded Event on each, naming the newer claim or data.
	for n, want := range map[string]string{"ws-old": "superseded by newer claim", "ws-other": "superseded by newer"} {
		evs, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + n + ",reason=Superseded"})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs.Items) == 0 || !strings.Contains(evs.Items[0].Message, want) {
			t.Errorf("%s: Superseded events %v, want one saying %q", n, evs.Items, want)
		}
	}
	// archive: a snapshot labelled superseded.
	code, out, stderr = run(t, snapArgs(ns, "--sessions-carry-data", "--superseded", "archive")...)
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
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	name := specName("ws-a", uid, unusedSince(t, f, ns, "ws-a"))
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
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	code, _, stderr := run(t, snapArgs(ns, "--snapshot-class", "nope")...)
	if code != 2 || !strings.Contains(stderr, `"nope" not found`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok || len(snapshots(t, f, ns)) > 0 {
		t.Fatal("a usage error wrote to the cluster")
	}
}

func TestSnapshotRetriesThrottlingAndServerErrors(t *testing.T) {
	f := fixtures(t)
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

// TestSnapshotKilledWhileWaitingThenRerunCompletes: a run killed while its
// snapshot is pending leaves its lease; the rerun, once that lease has
// expired, finds the snapshot (ready by then) and creates none.
func TestSnapshotKilledWhileWaitingThenRerunCompletes(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	// Pending until the test clears the fault, however slow the machine.
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-slow", "s", ns+"-slow")
	// A short lease: the killed run cannot release it, the rerun waits it out.
	cmd := exec.Command(binary(t), append(snapArgs(ns), "--kubeconfig", env.Kubeconfig, "--log-format", "json", "--lock-duration", "2s")...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once its snapshot exists (it stays pending).
	for deadline := time.Now().Add(60 * time.Second); len(snapshots(t, f, ns)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the run created no snapshot within a minute")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 || testenv.Ready(&snaps[0]) {
		t.Fatalf("want one pending snapshot at the kill, got %d", len(snaps))
	}
	if err := csidriver.ClearFault(env.DriverStateDir, ns+"-slow"); err != nil {
		t.Fatal(err)
	}
	// The rerun is refused (exit 5, nothing done) while the killed run's
	// lease lives: rerun until it is not, rather than sleeping for the
	// lease and guessing the server's clock.
	var code int
	var out, stderr string
	held := 0
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if code, out, stderr = run(t, snapArgs(ns)...); code != exitcode.LockHeld {
			break
		}
		held++
		if time.Now().After(deadline) {
			t.Fatalf("the killed run's 2s lease still held after a minute: %s", stderr)
		}
	}
	if code != 0 {
		t.Fatalf("rerun exit %d: %s", code, stderr)
	}
	t.Logf("rerun refused %d times while the killed run's lease lived", held)
	// Found, not created: waited for (snapshot-ready) or, when it became
	// ready before the rerun's scan, the claim is marked Rescued by it.
	if st, act, _ := entry(t, parse(t, out), "ws-slow"); st != "Rescued" || (act != rescue.ActionReady && act != string(mark.Marked)) {
		t.Fatalf("rerun: state %s action %s, want Rescued, snapshot-ready or marked (found, not created)", st, act)
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
	f := fixtures(t)
	ns := env.Namespace(t)
	handle := ns + "-sick"
	if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{PermanentError: "try later"}); err != nil {
		t.Fatal(err)
	}
	uid := orphan(t, f, ns, "ws-sick", "s", handle)
	// Past orphaned-since by more than --clock-skew: a snapshot cut within
	// the skew would not count as this period's rescue
	// (docs/spec.md#rescue-behind-clock), and the janitor would take a new
	// one beside it (the snapshotter retries the failed one by itself).
	if err := f.WaitServerAfter(ctx, ns, unusedSince(t, f, ns, "ws-sick").Add(defaultClockSkew)); err != nil {
		t.Fatal(err)
	}
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
		var names []string
		for _, s := range snaps {
			names = append(names, fmt.Sprintf("%s (ready %v, deleting %v, orphaned-since %q)", s.Name, testenv.Ready(&s), s.DeletionTimestamp != nil, s.Annotations["pvc-janitor.io/orphaned-since"]))
		}
		t.Fatalf("want legacy-rescue recreated and ready, alone; got %d snapshots: %v\n%s\n%s", len(snaps), names, out, stderr)
	}
}

func TestGuardRescueSnapshotsFirst(t *testing.T) {
	f := fixtures(t)
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

// TestSnapshotRechecksEachClaimJustBeforeItsCreate (issue 12 paths 1 and 3):
// the pods were listed once, at the scan; while the run waits for its first
// snapshot (one at a time), a pod starts using the second claim and a newer
// claim of the third one's workspace appears. Each claim is re-checked just
// before its own create: neither gets a snapshot. The first snapshot stays
// pending until both changes are in place and the first re-check's read has
// expired (the test then clears its fault), so no timeout decides whether
// they land in time.
func TestSnapshotRechecksEachClaimJustBeforeItsCreate(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-a-slow", "a", ns+"-slow")
	orphan(t, f, ns, "ws-b", "b", "")
	orphan(t, f, ns, "ws-c", "c", "")
	wsC, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		// ws-c-2 is created empty: only the workspace's chronological line
		// (--sessions-carry-data) makes it supersede ws-c (docs/spec.md#rule-superseded).
		code, out, stderr := run(t, snapArgs(ns, "--concurrency", "1", "--snapshot-timeout", "10m", "--sessions-carry-data")...)
		done <- result{code, out, stderr}
	}()
	// The run is waiting for ws-a-slow's snapshot (pending until the fault
	// is cleared): ws-b's and ws-c's have not been created yet.
	deadline := time.Now().Add(60 * time.Second)
	for len(snapshots(t, f, ns)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the run created no snapshot")
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := time.Now() // after ws-a-slow's re-check read started
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	// Creation times are whole seconds: the newer claim is created once
	// the second of ws-c's creation is over.
	nextSecond(wsC.CreationTimestamp.Time)
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "c"}
	newer, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-c-2", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if !newer.CreationTimestamp.After(wsC.CreationTimestamp.Time) {
		t.Fatalf("ws-c-2 created at %s, not after ws-c (%s)", newer.CreationTimestamp, wsC.CreationTimestamp)
	}
	// Both changes are in. The re-checks of one run share a namespace read
	// for kube.DefaultRecheckMaxAge: once ws-a-slow's read is surely older
	// than that, let its snapshot become ready, so that ws-b's and ws-c's
	// re-checks read the namespace again.
	time.Sleep(time.Until(seen.Add(kube.DefaultRecheckMaxAge)))
	if err := csidriver.ClearFault(env.DriverStateDir, ns+"-slow"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.code != 0 {
		t.Fatalf("exit %d, want 0: %s\n%s", res.code, res.out, res.err)
	}
	if st, act, _ := entry(t, parse(t, res.out), "ws-a-slow"); st != "Rescued" || act != rescue.ActionCreated {
		t.Errorf("ws-a-slow: state %s action %s, want Rescued, %s", st, act, rescue.ActionCreated)
	}
	r := parse(t, res.out)
	if st, act, reason := entry(t, r, "ws-b"); st != "InUse" || act != rescue.ActionSkipped || !strings.Contains(reason, "ide-b") {
		t.Errorf("ws-b: state %s action %s reason %q, want InUse, skipped, naming the pod", st, act, reason)
	}
	if st, act, reason := entry(t, r, "ws-c"); st != "Superseded" || act != rescue.ActionSkipped || !strings.Contains(reason, "ws-c-2") {
		t.Errorf("ws-c: state %s action %s reason %q, want Superseded, skipped, naming ws-c-2", st, act, reason)
	}
	for _, s := range snapshots(t, f, ns) {
		if src := *s.Spec.Source.PersistentVolumeClaimName; src != "ws-a-slow" {
			t.Errorf("snapshot %s of %s taken after the re-check should have stopped it", s.Name, src)
		}
	}
	if snaps := snapshots(t, f, ns); len(snaps) != 1 {
		t.Errorf("%d snapshots, want the slow one's only", len(snaps))
	}
}

// TestSnapshotBeingDeletedIsNoRescue (issue 12 path 9): a snapshot of ours
// under the rescue's name that is being deleted is never reported as ready;
// the run waits for it to go, then creates the rescue anew.
func TestSnapshotBeingDeletedIsNoRescue(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	name := specName("ws-a", uid, unusedSince(t, f, ns, "ws-a"))
	old, err := f.Snapshot(ctx, ns, name, "ws-a", "", map[string]string{"app.kubernetes.io/managed-by": "pvc-janitor", "workspace": "a"},
		map[string]string{"pvc-janitor.io/source-uid": uid, "pvc-janitor.io/source-name": "ws-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, name, 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	// A finalizer of the test's keeps it in deletion.
	hold := `{"metadata":{"finalizers":["example.com/hold"]}}`
	if _, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, "application/merge-patch+json", []byte(hold), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, snapArgs(ns, "--snapshot-timeout", "3s")...)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s\n%s", code, out, stderr)
	}
	if st, _, reason := entry(t, parse(t, out), "ws-a"); st == "Rescued" || !strings.Contains(reason, "still exists") {
		t.Fatalf("a snapshot being deleted was taken for a rescue: state %s reason %q", st, reason)
	}
	// Let it go: the rerun makes a new one.
	release := `{"metadata":{"finalizers":null}}`
	if _, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Patch(ctx, name, "application/merge-patch+json", []byte(release), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("rerun exit %d: %s\n%s", code, out, stderr)
	}
	if st, act, _ := entry(t, parse(t, out), "ws-a"); st != "Rescued" || act != rescue.ActionCreated {
		t.Fatalf("rerun: state %s action %s, want Rescued snapshot-created", st, act)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 || snaps[0].UID == old.UID || snaps[0].Name != name {
		t.Fatalf("want one new snapshot %s, got %d", name, len(snaps))
	}
}

// TestRescueOfAnEarlierOrphanedSinceStaysBeside: a claim rescued, used
// again and orphaned anew gets a new rescue under a new name; the stale one
// (ready, ours) is left for retention, never replaced under its name.
func TestRescueOfAnEarlierOrphanedSinceStaysBeside(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	first := snapshots(t, f, ns)
	if len(first) != 1 {
		t.Fatalf("%d snapshots after the first rescue", len(first))
	}
	before := unusedSince(t, f, ns, "ws-a")
	// Used again (a second later at least: times are whole seconds), then
	// orphaned anew.
	time.Sleep(1100 * time.Millisecond)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-a", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitClaim(ctx, ns, "ws-a", func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.ForceDeletePod(ctx, ns, "ide-a"); err != nil {
		t.Fatal(err)
	}
	c, err := f.WaitClaim(ctx, ns, "ws-a", func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.After(before) {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	since := unusedSince(t, f, ns, "ws-a")
	code, out, stderr := run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("second rescue: exit %d: %s\n%s", code, out, stderr)
	}
	if st, act, _ := entry(t, parse(t, out), "ws-a"); st != "Rescued" || act != rescue.ActionCreated {
		t.Fatalf("second rescue: state %s action %s", st, act)
	}
	want := specName("ws-a", uid, since)
	var sawOld, sawNew bool
	for _, s := range snapshots(t, f, ns) {
		switch {
		case s.UID == first[0].UID:
			sawOld = true
		case s.Name == want && testenv.Ready(&s):
			sawNew = true
		default:
			t.Errorf("unexpected snapshot %s", s.Name)
		}
	}
	if !sawOld || !sawNew || first[0].Name == want {
		t.Fatalf("want the stale rescue %s kept beside the new %s (claim %s): old %v new %v", first[0].Name, want, c.UID, sawOld, sawNew)
	}
}

// TestSnapshotConcurrencyIsABound (docs/spec.md#rescue-concurrency): with every rescue
// pending until the test releases it, the run can never have more
// snapshots than the rescues released plus --concurrency 2 (a worker holds
// its slot until its snapshot is ready). The test releases one pending
// rescue at a time, each time once the run has created as many as it may,
// and checks the count on the API server at every poll.
func TestSnapshotConcurrencyIsABound(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	names := []string{"ws-a", "ws-b", "ws-c", "ws-d", "ws-e"}
	for _, n := range names {
		if err := csidriver.SetFault(env.DriverStateDir, ns+"-"+n, csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
		orphan(t, f, ns, n, n[len("ws-"):], ns+"-"+n)
	}
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := run(t, snapArgs(ns, "--concurrency", "2", "--snapshot-timeout", "10m")...)
		done <- result{code, out, stderr}
	}()
	sources := func() []string {
		var s []string
		for _, vs := range snapshots(t, f, ns) {
			s = append(s, *vs.Spec.Source.PersistentVolumeClaimName)
		}
		return s
	}
	released := map[string]bool{}
	peak := 0
	for len(released) < len(names) {
		want := min(len(released)+2, len(names))
		var srcs []string
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			srcs = sources()
			peak = max(peak, len(srcs)-len(released))
			if len(srcs) > len(released)+2 {
				t.Fatalf("%d rescues created with %d released (%v): more than --concurrency 2 at once", len(srcs), len(released), srcs)
			}
			if len(srcs) >= want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d rescues created with %d released, want %d: the run stopped creating", len(srcs), len(released), want)
			}
		}
		for _, s := range srcs {
			if !released[s] {
				if err := csidriver.ClearFault(env.DriverStateDir, ns+"-"+s); err != nil {
					t.Fatal(err)
				}
				released[s] = true
				break
			}
		}
	}
	res := <-done
	if res.code != 0 {
		t.Fatalf("exit %d: %s\n%s", res.code, res.out, res.err)
	}
	r := parse(t, res.out)
	for _, n := range names {
		if st, act, _ := entry(t, r, n); st != "Rescued" || act != rescue.ActionCreated {
			t.Errorf("%s: state %s action %s, want Rescued, %s", n, st, act, rescue.ActionCreated)
		}
	}
	if peak != 2 {
		t.Errorf("at most %d rescues pending at once, want 2: the bound was not reached", peak)
	}
}
