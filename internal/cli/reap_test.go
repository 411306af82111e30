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

	"github.com/pvc-janitor/pvc-janitor/internal/csidriver"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
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
	f, _ := env.NewFixtures()
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

	code, out, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("reap exit %d: %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	if r.Summary.Claims != 5 {
		t.Fatalf("report has %d claims", r.Summary.Claims)
	}
	want := map[string]bool{"ws-rescued": false, "ws-pending": true, "ws-stale": true, "ws-foreign": true, "ws-used": true}
	for name, keep := range want {
		if got := exists(t, f, ns, name); got != keep {
			t.Errorf("%s exists=%v, want %v", name, got, keep)
		}
	}
	if _, act, reason := entry(t, r, "ws-rescued"); act != reap.ActionDeleted || !strings.Contains(reason, "rescued by VolumeSnapshot") {
		t.Errorf("ws-rescued: action %q reason %q", act, reason)
	}
	ev, _ := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reaped"})
	if len(ev.Items) != 1 || ev.Items[0].InvolvedObject.Name != "ws-rescued" {
		t.Errorf("Reaped events: %d", len(ev.Items))
	}
	// Dry run on what is left deletes nothing.
	if code, _, _ := run(t, reapArgs("reap", ns, "--dry-run")...); code != 0 {
		t.Fatalf("reap --dry-run exit %d", code)
	}
}

// TestReapSkipsClaimUsedJustBeforeDelete: a pod starts using the claim
// after the re-read, just before its DELETE reaches the server; the delete's
// precondition (the claim's resourceVersion moves when the controller
// manager marks it used) saves it, and the report says why.
func TestReapSkipsClaimUsedJustBeforeDelete(t *testing.T) {
	ctx := context.Background()
	f, _ := env.NewFixtures()
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
	ev, _ := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ReapSkipped"})
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

func TestBlastRadiusStopsBeforeTheFirstDelete(t *testing.T) {
	f, _ := env.NewFixtures()
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
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	for _, cmd := range []string{"reap", "run"} {
		code, out, stderr := run(t, reapArgs(cmd, ns)...)
		if code != 2 || out != "" || !strings.Contains(stderr, "--yes") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", cmd, code, out, stderr)
		}
	}
	c, _ := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-a", metav1.GetOptions{})
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok {
		t.Fatal("a refused reap marked the claim")
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused reap touched the lease: %v", err)
	}
}

func TestRunScansSnapshotsAndReaps(t *testing.T) {
	f, _ := env.NewFixtures()
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

func TestLeaseOneRunAtATime(t *testing.T) {
	f, _ := env.NewFixtures()
	ns := env.Namespace(t)
	if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 4 * time.Second}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-slow", "s", ns+"-slow")

	// Two runs started together: one acts, the other exits 5.
	a, _, aErr := startRun(t, ns)
	b, _, bErr := startRun(t, ns)
	codes := []int{exitCode(a.Wait()), exitCode(b.Wait())}
	if !((codes[0] == 0 && codes[1] == 5) || (codes[0] == 5 && codes[1] == 0)) {
		t.Fatalf("exit codes %v, want one 0 and one 5\n%s\n%s", codes, aErr, bErr)
	}
	loser := aErr.String()
	if codes[1] == 5 {
		loser = bErr.String()
	}
	if !strings.Contains(loser, "is held by") {
		t.Errorf("the losing run does not name the holder: %s", loser)
	}
	if exists(t, f, ns, "ws-slow") {
		t.Error("the winning run did not reap")
	}

	// A holder killed with SIGKILL leaves its lease; the next run is refused
	// until it expires, then takes it over.
	orphan(t, f, ns, "ws-slow2", "s2", ns+"-slow")
	k, _, _ := startRun(t, ns, "--lock-duration", "3s")
	waitLease(t, f, ns)
	_ = k.Process.Signal(syscall.SIGKILL)
	_ = k.Wait()
	if code, _, _ := run(t, reapArgs("scan", ns)...); code != 5 {
		t.Fatalf("run while a dead holder's lease is live: exit %d, want 5", code)
	}
	time.Sleep(3500 * time.Millisecond)
	if code, _, stderr := run(t, reapArgs("scan", ns)...); code != 0 {
		t.Fatalf("run after the lease expired: exit %d: %s", code, stderr)
	}

	// SIGTERM mid-run: the report is printed, the lease released, exit 143.
	orphan(t, f, ns, "ws-slow3", "s3", ns+"-slow")
	term, out, errOut := startRun(t, ns, "--snapshot-timeout", "1m")
	waitLease(t, f, ns)
	time.Sleep(500 * time.Millisecond)
	_ = term.Process.Signal(syscall.SIGTERM)
	if code := exitCode(term.Wait()); code != 143 {
		t.Fatalf("SIGTERM: exit %d, want 143: %s", code, errOut)
	}
	if !strings.Contains(out.String(), `"kind": "Report"`) {
		t.Errorf("no report after SIGTERM: %q", out.String())
	}
	if _, err := f.Kube.CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lease not released after SIGTERM: %v", err)
	}
}
