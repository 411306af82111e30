//go:build integration

package cli_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

func reapArgs(cmd, ns string, extra ...string) []string {
	return append([]string{cmd, "-n", ns, "-l", wsSel, "--workspace-label", "workspace",
		"--min-age", "0s", "--grace-period", "0s", "-o", "json", "--lock-namespace", ns}, extra...)
}

func exists(t *testing.T, f *testenv.Fixtures, ns, name string) bool {
	t.Helper()
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.DeletionTimestamp == nil
}

func waitUsed(t *testing.T, f *testenv.Fixtures, ns, name string) {
	t.Helper()
	if _, err := f.WaitClaim(context.Background(), ns, name, func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionFalse {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
}

// TestReapDeletesExactlyTheRescuedClaims: a rescued claim goes; a claim
// whose snapshot is not ready, one whose ready snapshot predates its
// orphaned-since, one whose snapshot is of another claim, and one in use
// stay.
func TestReapDeletesExactlyTheRescuedClaims(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-rescued", "r", "")
	orphan(t, f, ns, "ws-pending", "p", ns+"-slow")
	orphan(t, f, ns, "ws-used", "u", "")
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-u", Claims: []string{"ws-used"}}); err != nil {
		t.Fatal(err)
	}
	// ws-rescued and ws-used: janitor rescues (ws-used gets none: in use).
	if code, _, stderr := run(t, snapArgs(ns, "--snapshot-timeout", "5s")...); code != 4 {
		// ws-pending cannot become ready: exit 4 is expected.
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	// Created after the janitor's snapshot step, which would rescue them.
	orphan(t, f, ns, "ws-stale", "s", "")
	orphan(t, f, ns, "ws-foreign", "x", "")
	// ws-stale: a ready snapshot, then the claim is used again and released:
	// its orphaned-since moves after the snapshot.
	if _, err := f.Snapshot(ctx, ns, "stale-backup", "ws-stale", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "stale-backup", 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-s", Claims: []string{"ws-stale"}}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, f, ns, "ws-stale")
	if err := f.ForceDeletePod(ctx, ns, "ide-s"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitUnused(ctx, ns, "ws-stale"); err != nil {
		t.Fatal(err)
	}
	// ws-foreign: a ready snapshot whose source is another claim of the
	// same name's predecessor (source-uid of someone else).
	if _, err := f.Snapshot(ctx, ns, "foreign-backup", "ws-foreign", "", nil, map[string]string{"pvc-janitor.io/source-uid": "not-this-claim"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "foreign-backup", 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}

	want := map[string]bool{"ws-rescued": false, "ws-pending": true, "ws-stale": true, "ws-foreign": true, "ws-used": true}
	// A dry run first, while ws-rescued is reapable: it says it would
	// delete exactly ws-rescued, and deletes nothing.
	code, out, stderr := run(t, reapArgs("reap", ns, "--dry-run")...)
	if code != 0 {
		t.Fatalf("reap --dry-run exit %d: %s\n%s", code, out, stderr)
	}
	if dry := parse(t, out); !dry.DryRun || len(dry.Claims) != len(want) {
		t.Errorf("dry run report: dryRun %v, %d claims; want true, %d", dry.DryRun, len(dry.Claims), len(want))
	} else {
		for _, c := range dry.Claims {
			wouldDelete := !want[c.Name] // want: kept by the real run
			if (c.Action == reap.ActionWould) != wouldDelete || c.Action == reap.ActionDeleted {
				t.Errorf("dry run: %s action %q, want would-delete only for ws-rescued", c.Name, c.Action)
			}
		}
	}
	for name := range want {
		if !exists(t, f, ns, name) {
			t.Fatalf("the dry run deleted %s", name)
		}
	}

	code, out, stderr = run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("reap exit %d: %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	if r.Summary.Claims != 5 {
		t.Fatalf("report has %d claims", r.Summary.Claims)
	}
	for name, keep := range want {
		if got := exists(t, f, ns, name); got != keep {
			t.Errorf("%s exists=%v, want %v", name, got, keep)
		}
	}
	if _, act, reason := entry(t, r, "ws-rescued"); act != reap.ActionDeleted || !strings.Contains(reason, "rescued by VolumeSnapshot") {
		t.Errorf("ws-rescued: action %q reason %q", act, reason)
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reaped"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 || ev.Items[0].InvolvedObject.Name != "ws-rescued" {
		t.Errorf("Reaped events: %d", len(ev.Items))
	}
	// A dry run on what is left, where nothing is reapable, says that
	// nothing would be deleted and deletes nothing.
	code, out, stderr = run(t, reapArgs("reap", ns, "--dry-run")...)
	if code != 0 {
		t.Fatalf("reap --dry-run exit %d: %s\n%s", code, out, stderr)
	}
	left := parse(t, out)
	if len(left.Claims) == 0 {
		t.Error("dry run on what is left: no claims in the report")
	}
	for _, c := range left.Claims {
		if c.Action == reap.ActionWould || c.Action == reap.ActionDeleted {
			t.Errorf("dry run on what is left: %s action %q, want no deletion", c.Name, c.Action)
		}
		// ws-rescued may still be listed while its finalizers go
		// (Terminating); every other claim must still be there.
		if keep, known := want[c.Name]; !known || keep != exists(t, f, ns, c.Name) {
			t.Errorf("dry run on what is left: %s (%s, %q) exists=%v, want %v", c.Name, c.State, c.Action, !keep, keep)
		}
	}
}

// TestReapSkipsClaimUsedJustBeforeDelete: a pod starts using the claim
// after the re-read, just before its DELETE reaches the server; the delete's
// precondition (the claim's resourceVersion moves when the controller
// manager marks it used) saves it, and the report says why.
func TestReapSkipsClaimUsedJustBeforeDelete(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	p := env.StartFaultProxy(t, 1)
	var once sync.Once
	p.OnRequest = func(r *http.Request) {
		if r.Method != http.MethodDelete || !strings.HasSuffix(r.URL.Path, "/persistentvolumeclaims/ws-a") {
			return
		}
		once.Do(func() {
			if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "late", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
				t.Error(err)
			}
			waitUsed(t, f, ns, "ws-a")
		})
	}
	var out, errOut strings.Builder
	code := runWith(append(reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100"), "--kubeconfig", p.Kubeconfig, "--log-format", "json"), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !exists(t, f, ns, "ws-a") {
		t.Fatal("a claim used just before its delete was deleted")
	}
	if _, act, reason := entry(t, parse(t, out.String()), "ws-a"); act != reap.ActionSkipped || !strings.Contains(reason, "changed since it was read") {
		t.Fatalf("action %q reason %q", act, reason)
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ReapSkipped"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 {
		t.Errorf("%d ReapSkipped events, want 1", len(ev.Items))
	}
	// And the re-read path: a pod that exists before the reap starts.
	code2, out2, _ := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if code2 != 0 || !exists(t, f, ns, "ws-a") {
		t.Fatalf("second reap exit %d or claim gone", code2)
	}
	if st, _, _ := entry(t, parse(t, out2), "ws-a"); st != "InUse" {
		t.Errorf("state %s, want InUse", st)
	}
}

// TestReapListsPodsRightBeforeEachDelete: a pod starts using the claim
// after the reap's re-read, before its delete: the pods of the namespace are
// listed again right before the DELETE is sent, and a pod there stops it,
// with no need of the precondition (on a cluster without the Unused
// condition nothing moves the claim's resourceVersion when a pod starts).
// The pod is created just before the reap's third pod list reaches the
// server: the scan's, the re-read's, then the one before the delete.
func TestReapListsPodsRightBeforeEachDelete(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	p := env.StartFaultProxy(t, 1)
	var mu sync.Mutex
	lists, created := 0, false
	p.OnRequest = func(r *http.Request) {
		if info := testenv.ParseRequest(r); info.Verb != "list" || info.Resource != "pods" || info.Continue {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if lists++; lists != 3 {
			return
		}
		if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "late", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
			t.Error(err)
			return
		}
		created = true
	}
	var out, errOut strings.Builder
	code := runWith(append(reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100"), "--kubeconfig", p.Kubeconfig, "--log-format", "json"), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if !created {
		t.Fatalf("the reap listed pods %d times; the test creates its pod before the third", lists)
	}
	if !exists(t, f, ns, "ws-a") {
		t.Fatal("a claim used just before its delete was deleted")
	}
	if st, act, reason := entry(t, parse(t, out.String()), "ws-a"); st != "InUse" || act != reap.ActionSkipped || !strings.Contains(reason, "in use again since it was read (pod late)") {
		t.Fatalf("state %s, action %q, reason %q; want InUse, skipped, in use again (pod late)\n%s", st, act, reason, errOut.String())
	}
}

func TestBlastRadiusStopsBeforeTheFirstDelete(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	for _, n := range []string{"ws-1", "ws-2", "ws-3", "ws-4"} {
		orphan(t, f, ns, n, n, "")
	}
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		flags []string
		msg   string
	}{
		{[]string{"--max-deletions", "3", "--max-deletion-percent", "100"}, "over --max-deletions 3"},
		{[]string{"--max-deletions", "50", "--max-deletion-percent", "50"}, "4 of 4 claims in scope (100.0%)"},
	} {
		code, out, stderr := run(t, reapArgs("reap", ns, append(c.flags, "--yes")...)...)
		if code != 4 {
			t.Fatalf("%v: exit %d, want 4: %s", c.flags, code, stderr)
		}
		if !strings.Contains(out, c.msg) || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: the report and the error must say %q:\n%s\n%s", c.flags, c.msg, out, stderr)
		}
		for _, n := range []string{"ws-1", "ws-2", "ws-3", "ws-4"} {
			if !exists(t, f, ns, n) {
				t.Fatalf("%v: %s was deleted", c.flags, n)
			}
		}
	}
}

func TestReapWithoutTerminalOrYesRefusesAndChangesNothing(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	for _, cmd := range []string{"reap", "run"} {
		code, out, stderr := run(t, reapArgs(cmd, ns)...)
		if code != 2 || out != "" || !strings.Contains(stderr, "--yes") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", cmd, code, out, stderr)
		}
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok {
		t.Fatal("a refused reap marked the claim")
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused reap touched the lease: %v", err)
	}
}

func TestRunScansSnapshotsAndReaps(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	orphan(t, f, ns, "ws-b", "b", "")
	if _, err := f.Pod(context.Background(), testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	if _, act, reason := entry(t, r, "ws-a"); act != reap.ActionDeleted {
		// The snapshot controller drops its pvc-as-source-protection
		// finalizer from the claim right after the rescue; a delete racing
		// that update fails its precondition and is left to the next run.
		if act != reap.ActionSkipped || !strings.Contains(reason, "changed since it was read") {
			t.Fatalf("ws-a action %q (%s), want deleted", act, reason)
		}
		if code, out, stderr = run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 {
			t.Fatalf("second run exit %d: %s", code, stderr)
		}
		r = parse(t, out)
		if _, act, _ := entry(t, r, "ws-a"); act != reap.ActionDeleted {
			t.Fatalf("ws-a action %q on the next run, want deleted", act)
		}
	}
	if r.Command != "run" || exists(t, f, ns, "ws-a") || !exists(t, f, ns, "ws-b") {
		t.Fatalf("run: command %q, ws-a exists %v, ws-b exists %v", r.Command, exists(t, f, ns, "ws-a"), exists(t, f, ns, "ws-b"))
	}
	if n := len(snapshots(t, f, ns)); n != 1 {
		t.Errorf("%d snapshots, want 1 (ws-a's, kept after the claim is gone)", n)
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease not released: %v", err)
	}
}

// startRun starts `janitor run` as a process.
func startRun(t *testing.T, ns string, extra ...string) (*exec.Cmd, *strings.Builder, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary(t), append(reapArgs("run", ns, "--yes", "--max-deletion-percent", "100", "--kubeconfig", env.Kubeconfig, "--log-format", "json"), extra...)...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &errOut
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

func waitLease(t *testing.T, f *testenv.Fixtures, ns string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := f.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{}); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no lease appeared")
}

// deletedOrGoing reports whether the claim named name with uid was deleted:
// gone, or Terminating (the snapshot controller's and pvc-protection
// finalizers may keep it for a while).
func deletedOrGoing(t *testing.T, f *testenv.Fixtures, ns, name string, uid k8stypes.UID) bool {
	t.Helper()
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return c.UID != uid || c.DeletionTimestamp != nil
}

// TestLeaseOneRunAtATime: of two runs started together one acts and the
// other exits 5 and deletes nothing (the winner holds the lease until the
// test lets its rescue become ready); whichever wins, every rescued claim
// ends up deleted, by the winner or (should the snapshot controller change
// the claim twice while the winner deletes it) by a following run.
func TestLeaseOneRunAtATime(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	// The slow volume keeps the run that wins the lease holding it until
	// the test clears the fault: the other run, started at the same time,
	// must have been refused by then, however slow the machine is.
	slow := func() {
		t.Helper()
		if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	slow()
	uid := k8stypes.UID(orphan(t, f, ns, "ws-slow", "s", ns+"-slow"))

	a, aOut, aErr := startRun(t, ns)
	b, bOut, bErr := startRun(t, ns)
	codes := make([]int, 2)
	exited := make(chan int, 2)
	for i, c := range []*exec.Cmd{a, b} {
		go func() {
			codes[i] = exitCode(c.Wait())
			exited <- i
		}()
	}
	select {
	case first := <-exited:
		// The winner waits for its pending rescue: the first to end is
		// the one refused.
		if codes[first] != 5 {
			_ = a.Process.Kill()
			_ = b.Process.Kill()
			t.Fatalf("the first run to end exited %d, want 5 (refused: the other holds the lease)\n%s\n%s", codes[first], aErr, bErr)
		}
	case <-time.After(5 * time.Minute):
		_ = a.Process.Kill()
		_ = b.Process.Kill()
		t.Fatal("neither run ended within 5 minutes: neither was refused")
	}
	if err := csidriver.ClearFault(env.DriverStateDir, ns+"-slow"); err != nil {
		t.Fatal(err)
	}
	<-exited
	if !((codes[0] == 0 && codes[1] == 5) || (codes[0] == 5 && codes[1] == 0)) {
		t.Fatalf("exit codes %v, want one 0 and one 5\n%s\n%s", codes, aErr, bErr)
	}
	winOut, loseOut, loseErr := aOut.String(), bOut.String(), bErr.String()
	if codes[0] == 5 {
		winOut, loseOut, loseErr = bOut.String(), aOut.String(), aErr.String()
	}
	if !strings.Contains(loseErr, "is held by") {
		t.Errorf("the losing run does not name the holder: %s", loseErr)
	}
	// The loser never held the lease: it printed no report (so no action)
	// and wrote nothing.
	if strings.Contains(loseOut, `"action"`) {
		t.Errorf("the losing run acted: %s", loseOut)
	}
	if _, act, reason := entry(t, parse(t, winOut), "ws-slow"); act != reap.ActionDeleted {
		// Only a second change of the claim between the retry's read and
		// its delete leaves it to the next run; the reason must say so.
		if act != reap.ActionSkipped || !strings.Contains(reason, "changed since it was read") {
			t.Fatalf("winning run: ws-slow action %q (%s), want deleted", act, reason)
		}
		t.Logf("the winning run left ws-slow to the next run: %s", reason)
	}
	for i := 0; !deletedOrGoing(t, f, ns, "ws-slow", uid); i++ {
		if i == 5 {
			t.Fatal("the rescued claim was not deleted by the winning run nor by five following runs")
		}
		if code, _, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 {
			t.Fatalf("following run: exit %d: %s", code, stderr)
		}
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reaped"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 {
		t.Errorf("%d Reaped events, want 1: one deletion, by one run", len(ev.Items))
	}

	// A holder killed with SIGKILL leaves its lease; later runs are refused
	// while it is live and take it over once it has expired.
	slow() // pending again: the holders below wait on their rescues
	orphan(t, f, ns, "ws-slow2", "s2", ns+"-slow")
	k, _, _ := startRun(t, ns, "--lock-duration", "3s")
	waitLease(t, f, ns)
	_ = k.Process.Signal(syscall.SIGKILL)
	_ = k.Wait()
	dead, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, lock.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expires := dead.Spec.RenewTime.Add(time.Duration(*dead.Spec.LeaseDurationSeconds) * time.Second)
	refused := 0
	for i := 0; ; i++ {
		before := time.Now()
		code, _, stderr := run(t, reapArgs("scan", ns)...)
		if code == 0 {
			// Taken over: only once the dead holder's lease had expired
			// (same host, same clock as the API server).
			if time.Now().Before(expires) {
				t.Fatalf("a run took over a live lease (expires %s)", expires)
			}
			break
		}
		if code != 5 {
			t.Fatalf("run while a dead holder's lease exists: exit %d: %s", code, stderr)
		}
		if before.After(expires.Add(3 * time.Second)) { // the server clock is known to the second
			t.Fatalf("a run was refused a lease that had expired at %s: %s", expires, stderr)
		}
		refused++
		if i == 100 {
			t.Fatal("the dead holder's lease was never taken over")
		}
		time.Sleep(100 * time.Millisecond) // poll interval, not a wait for an outcome
	}
	t.Logf("%d runs refused while the dead holder's lease was live", refused)

	// SIGTERM mid-run: the report is printed, the lease released, exit 143.
	orphan(t, f, ns, "ws-slow3", "s3", ns+"-slow")
	term, out, errOut := startRun(t, ns, "--snapshot-timeout", "1m")
	// Mid-run: the run has created its rescue of ws-slow3 and waits for it.
	for i := 0; ; i++ {
		found := false
		for _, s := range snapshots(t, f, ns) {
			if s.Spec.Source.PersistentVolumeClaimName != nil && *s.Spec.Source.PersistentVolumeClaimName == "ws-slow3" {
				found = true
			}
		}
		if found {
			break
		}
		if i == 600 {
			t.Fatal("the run never created its rescue of ws-slow3")
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	_ = term.Process.Signal(syscall.SIGTERM)
	if code := exitCode(term.Wait()); code != 143 {
		t.Fatalf("SIGTERM: exit %d, want 143: %s", code, errOut)
	}
	if !strings.Contains(out.String(), `"kind": "Report"`) {
		t.Errorf("no report after SIGTERM: %q", out.String())
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, lock.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease not released after SIGTERM: %v", err)
	}
}

// rescued makes ws-a in ns an orphan rescued by the janitor and returns its UID.
func rescued(t *testing.T, f *testenv.Fixtures, ns string) k8stypes.UID {
	t.Helper()
	uid := orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	return k8stypes.UID(uid)
}

// TestReapRetriesAfterFinalizerChurn (docs/spec.md#reap): a finalizer dropped from
// the claim between the read and its delete (as the snapshot controller
// drops pvc-as-source-protection) fails the delete's precondition; only
// finalizers changed, no pod uses it, so the delete is retried once and the
// claim is deleted in this run. Any other change (a label here) leaves it.
func TestReapRetriesAfterFinalizerChurn(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  string // merge patch applied just before the DELETE reaches the server
		deleted bool
		reason  string
	}{
		{"finalizer dropped", `{"metadata":{"finalizers":["kubernetes.io/pvc-protection"]}}`, true, "rescued by VolumeSnapshot"},
		{"label added", `{"metadata":{"labels":{"example.com/owner":"someone"}}}`, false, "labels changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := fixtures(t)
			ns := env.Namespace(t)
			uid := rescued(t, f, ns)
			// A second finalizer, for the change to remove; the test's own,
			// not the snapshot controller's, so that it cannot race us.
			if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", k8stypes.MergePatchType,
				[]byte(`{"metadata":{"finalizers":["kubernetes.io/pvc-protection","example.com/test"]}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_, _ = f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), "ws-a", k8stypes.JSONPatchType,
					[]byte(`[{"op":"replace","path":"/metadata/finalizers","value":["kubernetes.io/pvc-protection"]}]`), metav1.PatchOptions{})
			})
			p := env.StartFaultProxy(t, 1)
			deletes := 0
			var mu sync.Mutex
			p.OnRequest = func(r *http.Request) {
				if r.Method != http.MethodDelete || !strings.HasSuffix(r.URL.Path, "/persistentvolumeclaims/ws-a") {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if deletes++; deletes == 1 {
					if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", k8stypes.MergePatchType, []byte(c.change), metav1.PatchOptions{}); err != nil {
						t.Error(err)
					}
				}
			}
			code, out, stderr := proxyRun(p, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
			if code != 0 {
				t.Fatalf("reap exit %d: %s", code, stderr)
			}
			_, act, reason := entry(t, parse(t, out), "ws-a")
			if got := deletedOrGoing(t, f, ns, "ws-a", uid); got != c.deleted {
				t.Fatalf("deleted %v, want %v (action %q: %s)", got, c.deleted, act, reason)
			}
			want := reap.ActionSkipped
			if c.deleted {
				want = reap.ActionDeleted
			}
			if act != want || !strings.Contains(reason, c.reason) {
				t.Fatalf("action %q (%s), want %q (%s)", act, reason, want, c.reason)
			}
			if c.deleted && (strings.Contains(reason, "gone") || strings.Contains(reason, "freed")) {
				t.Errorf("a deleted claim may stay Terminating: the report must not say gone or freed: %s", reason)
			}
			mu.Lock()
			defer mu.Unlock()
			if wantDeletes := map[bool]int{true: 2, false: 1}[c.deleted]; deletes != wantDeletes {
				t.Errorf("%d DELETE requests, want %d", deletes, wantDeletes)
			}
		})
	}
}

// TestReapSettlesALostDeleteResponse (docs/spec.md#reap): the server applies the
// DELETE but the response is lost; the retry meets a claim that is
// Terminating (409) or gone (404). A read of the claim settles it: the same
// UID being deleted, or gone, is reported deleted, not skipped.
func TestReapSettlesALostDeleteResponse(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := rescued(t, f, ns)
	p := env.StartFaultProxy(t, 3)
	p.Set(testenv.Faults{Rules: []testenv.Rule{{Verbs: []string{"delete"}, Resources: []string{"persistentvolumeclaims"}, Times: 1,
		Faults: testenv.Faults{RateLostResponse: 1}}}})
	code, out, stderr := proxyRun(p, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if n := p.InjectedByKind()[testenv.KindLostResponse]; n != 1 {
		t.Fatalf("the proxy lost %d delete responses, want 1: the test proves nothing", n)
	}
	if code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	if !deletedOrGoing(t, f, ns, "ws-a", uid) {
		t.Fatal("the claim was not deleted")
	}
	if _, act, reason := entry(t, parse(t, out), "ws-a"); act != reap.ActionDeleted || !strings.Contains(reason, "response") {
		t.Fatalf("action %q (%s), want deleted, saying the response was lost", act, reason)
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reaped"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 {
		t.Errorf("%d Reaped events, want 1", len(ev.Items))
	}
}

// TestReapKeepsTheGracePeriodDespiteAForeignSnapshot (path 5): a claim
// marked moments ago, with a ready snapshot someone else took since, is
// Rescued, but is not deleted before its grace period has passed.
func TestReapKeepsTheGracePeriodDespiteAForeignSnapshot(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	// The claim's orphaned-since: the Unused condition's transition (the
	// scan marks the claim with it).
	if code, _, stderr := run(t, reapArgs("scan", ns, "--grace-period", "1h")...); code != 0 {
		t.Fatalf("scan exit %d: %s", code, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	since, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"])
	if err != nil {
		t.Fatalf("the scan did not mark the claim: %v", err)
	}
	// The foreign snapshot must be created after the mark plus
	// --clock-skew to count as a rescue at all (else the test would pass
	// for the wrong reason).
	for !time.Now().After(since.Add(defaultClockSkew)) {
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := f.Snapshot(ctx, ns, "someone-elses", "ws-a", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "someone-elses", 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100", "--grace-period", "1h")...)
	if code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	st, act, reason := entry(t, parse(t, out), "ws-a")
	if st != "Rescued" {
		t.Fatalf("state %s (%s), want Rescued: the test proves nothing", st, reason)
	}
	if deletedOrGoing(t, f, ns, "ws-a", k8stypes.UID(uid)) {
		t.Fatalf("a claim within its grace period was deleted on someone else's snapshot (action %q: %s)", act, reason)
	}
	// Past the grace period (0s), the same evidence is enough.
	if code, out, stderr = run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	if !deletedOrGoing(t, f, ns, "ws-a", k8stypes.UID(uid)) {
		_, act, reason := entry(t, parse(t, out), "ws-a")
		t.Fatalf("a rescued claim past its grace period was not deleted: %q: %s", act, reason)
	}
}

// TestReapRereadUseRemovesMarks (path 2): a pod that starts using a
// rescued claim between reap's scan and its fresh re-read makes the claim
// InUse there: it is not deleted, and its marks are removed at once, so
// that its clock restarts (a snapshot taken before this use can no longer
// count as its rescue).
func TestReapRereadUseRemovesMarks(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := rescued(t, f, ns)
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; !ok {
		t.Fatal("the rescued claim carries no mark: the test proves nothing")
	}
	p := env.StartFaultProxy(t, 1)
	var mu sync.Mutex
	claimLists := 0
	p.OnRequest = func(r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/persistentvolumeclaims") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		// The second list of claims is reap's re-read: the pod appears
		// just before it.
		if claimLists++; claimLists == 2 {
			if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "back", Claims: []string{"ws-a"}}); err != nil {
				t.Error(err)
			}
		}
	}
	code, out, stderr := proxyRun(p, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	mu.Lock()
	n := claimLists
	mu.Unlock()
	if n < 2 {
		t.Fatalf("%d claim lists: the re-read was not seen, the test proves nothing", n)
	}
	if deletedOrGoing(t, f, ns, "ws-a", uid) {
		t.Fatal("a claim in use at the re-read was deleted")
	}
	if st, act, _ := entry(t, parse(t, out), "ws-a"); st != "InUse" || act != reap.ActionSkipped {
		t.Errorf("state %s action %s, want InUse, %s", st, act, reap.ActionSkipped)
	}
	c, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range c.Annotations {
		if k == "pvc-janitor.io/orphaned-since" {
			t.Errorf("the orphaned-since mark survived a use seen by reap's re-read")
		}
	}
	if _, ok := c.Labels["pvc-janitor.io/phase"]; ok {
		t.Errorf("the phase label survived a use seen by reap's re-read")
	}
}

// TestMarkPatchCarriesTheUID (path 11): the API server refuses a mark patch
// whose UID is not the claim's, so a claim recreated under the same name is
// never marked with another claim's evidence.
func TestMarkPatchCarriesTheUID(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := classify.Marks{Phase: classify.Set, PhaseValue: classify.Orphaned}
	wrong, err := mark.Patch(m, "00000000-0000-0000-0000-000000000000", c.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", k8stypes.MergePatchType, wrong, metav1.PatchOptions{})
	if !mark.OtherClaim(err) {
		t.Fatalf("a patch with another claim's UID: %v, want it refused as another claim's", err)
	}
	right, _ := mark.Patch(m, c.UID, c.ResourceVersion)
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", k8stypes.MergePatchType, right, metav1.PatchOptions{}); err != nil {
		t.Fatalf("a patch with the claim's own UID: %v", err)
	}
}

// TestRunStopsWhenItsLeaseCannotBeRenewed (path 12, docs/spec.md#runs): every lease
// renewal hangs; two thirds of --lock-duration after the last renewal the
// run stops acting (no delete) and exits 1 naming the cause.
func TestRunStopsWhenItsLeaseCannotBeRenewed(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 6 * time.Second}); err != nil {
		t.Fatal(err)
	}
	uid := k8stypes.UID(orphan(t, f, ns, "ws-a", "a", ns+"-slow"))
	p := env.StartFaultProxy(t, 7)
	p.Set(testenv.Faults{Rules: []testenv.Rule{{Verbs: []string{"update"}, Resources: []string{"leases"},
		Faults: testenv.Faults{RateHang: 1, HangFor: 2 * time.Minute}}}})
	code, _, stderr := proxyRun(p, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100", "--lock-duration", "3s")...)
	if p.InjectedByKind()[testenv.KindHang] == 0 {
		t.Fatal("no renewal hung: the test proves nothing")
	}
	if code != 1 || !strings.Contains(stderr, "lease") || !strings.Contains(stderr, "not renewed") {
		t.Fatalf("exit %d, want 1 naming the unrenewed lease: %s", code, stderr)
	}
	if deletedOrGoing(t, f, ns, "ws-a", uid) {
		t.Fatal("a run that could not renew its lease deleted a claim")
	}
}
