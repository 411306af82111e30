//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/ptytest"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The tests of this file cover behaviour the rest of the suite never ran
// (issue 12, "Untested behaviour"). Each judges outcomes on the API server.

func wsLabels(ws string) map[string]string {
	return map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": ws}
}

func getClaim(t *testing.T, f *testenv.Fixtures, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newerInUse creates claim name of workspace ws, created after claim older
// (to the API's second, by the server's clock), bound, and used by a pod:
// durable evidence that the workspace moved on.
func newerInUse(t *testing.T, f *testenv.Fixtures, ns, older, name, ws string) {
	t.Helper()
	ctx := context.Background()
	if err := f.WaitServerAfter(ctx, ns, getClaim(t, f, ns, older).CreationTimestamp.Time); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: wsLabels(ws)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-" + name, Claims: []string{name}}); err != nil {
		t.Fatal(err)
	}
	if n, o := getClaim(t, f, ns, name), getClaim(t, f, ns, older); !n.CreationTimestamp.After(o.CreationTimestamp.Time) {
		t.Fatalf("setup: %s (%s) is not newer than %s (%s)", name, n.CreationTimestamp, older, o.CreationTimestamp)
	}
}

// snapshotsOf lists the VolumeSnapshots in ns whose spec.source is claim.
func snapshotsOf(t *testing.T, f *testenv.Fixtures, ns, claim string) []string {
	t.Helper()
	var names []string
	for _, s := range snapshots(t, f, ns) {
		if s.Spec.Source.PersistentVolumeClaimName != nil && *s.Spec.Source.PersistentVolumeClaimName == claim {
			names = append(names, s.Name)
		}
	}
	return names
}

// reapUntilDeleted runs args (a reap) until the claim (by UID) is deleted
// or Terminating. The first run must delete it, or skip it only because it
// "changed since it was read" (the snapshot controller's finalizer churn,
// docs/spec.md#reap); then at most two more runs.
func reapUntilDeleted(t *testing.T, f *testenv.Fixtures, ns, name string, uid k8stypes.UID, args []string) report {
	t.Helper()
	var r report
	for i := 0; i < 3; i++ {
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("reap exit %d: %s\n%s", code, out, stderr)
		}
		r = parse(t, out)
		_, act, reason := entry(t, r, name)
		if deletedOrGoing(t, f, ns, name, uid) {
			if act != reap.ActionDeleted {
				t.Errorf("%s was deleted but the report says %q: %s", name, act, reason)
			}
			return r
		}
		if act != reap.ActionSkipped || !strings.Contains(reason, "changed since it was read") {
			t.Fatalf("%s not deleted: action %q: %s", name, act, reason)
		}
		t.Logf("run %d left %s to the next run: %s", i+1, name, reason)
	}
	t.Fatalf("%s was not deleted by three runs", name)
	return r
}

// TestBehaviourSupersededDiscardReapsWithDurableNewerClaim (docs/spec.md#rule-superseded,
// docs/spec.md#cmd-reap, docs/spec.md#rule-durable-evidence): ws-new, a
// newer claim of ws-old's workspace created empty, is used by a pod. Under
// the operator's statement --sessions-carry-data
// (docs/spec.md#rule-sessions-carry-data: the platform carries a
// workspace's data into each new session) ws-old is superseded by it: the
// default keep policy leaves it and records the Superseded Event, and
// --superseded=discard without --yes is refused off a terminal (exit 2,
// nothing deleted). By descent (the default) ws-new holds none of ws-old's
// data and supersedes nothing: ws-old is Orphaned, and discard --yes keeps
// it (no rescue yet). Under the statement the newer session in use is
// durable evidence: ws-old is deleted without a snapshot, and ws-new stays.
func TestBehaviourSupersededDiscardReapsWithDurableNewerClaim(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := k8stypes.UID(orphan(t, f, ns, "ws-old", "w", ""))
	newerInUse(t, f, ns, "ws-old", "ws-new", "w")

	// The workspace's line: the newer session supersedes ws-old only under
	// the operator's statement.
	code, out, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100", "--sessions-carry-data")...)
	if code != 0 {
		t.Fatalf("reap (keep) exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	if st, act, reason := entry(t, r, "ws-old"); st != "Superseded" || act == reap.ActionDeleted || !strings.Contains(reason, "ws-new") {
		t.Fatalf("keep: ws-old %s, action %q: %s; want Superseded by ws-new, kept", st, act, reason)
	}
	if st, _, _ := entry(t, r, "ws-new"); st != "InUse" {
		t.Fatalf("setup: ws-new is %s, want InUse", st)
	}
	if !exists(t, f, ns, "ws-old") {
		t.Fatal("--superseded=keep deleted ws-old")
	}
	ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Superseded,involvedObject.name=ws-old"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 || !strings.Contains(ev.Items[0].Message, "ws-new") {
		t.Errorf("Superseded events on ws-old: %d, want 1 naming ws-new (%+v)", len(ev.Items), ev.Items)
	}

	code, _, stderr = run(t, reapArgs("reap", ns, "--superseded", "discard", "--sessions-carry-data", "--max-deletion-percent", "100")...)
	if code != 2 || !strings.Contains(stderr, "--yes") {
		t.Fatalf("discard without --yes off a terminal: exit %d, want 2 naming --yes: %s", code, stderr)
	}
	if !exists(t, f, ns, "ws-old") {
		t.Fatal("a refused discard deleted ws-old")
	}

	// Without --sessions-carry-data a newer claim created empty supersedes
	// nothing (descent: nothing descends from ws-old's data): ws-old is
	// Orphaned, and reap keeps it until it is rescued.
	code, out, stderr = run(t, reapArgs("reap", ns, "--superseded", "discard", "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("reap --superseded discard --yes: exit %d: %s\n%s", code, out, stderr)
	}
	if st, act, reason := entry(t, parse(t, out), "ws-old"); st != "Orphaned" || act == reap.ActionDeleted || !exists(t, f, ns, "ws-old") {
		t.Fatalf("discard beside a newer claim created empty: ws-old %s, action %q: %s; want Orphaned (by descent), kept", st, act, reason)
	}
	code, out, stderr = run(t, "explain", ns+"/ws-old", "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s",
		"--grace-period", "0s", "-o", "json")
	var e explained
	if code != 0 || json.Unmarshal([]byte(out), &e) != nil || e.State != "Orphaned" {
		t.Errorf("explain ws-old: exit %d, want it Orphaned (a newer claim created empty supersedes nothing by descent):\n%s\n%s", code, out, stderr)
	}

	// The workspace line: the operator states that the platform carries a
	// workspace's data into each new session, so ws-new in use holds
	// ws-old's data (docs/spec.md#rule-sessions-carry-data).
	r = reapUntilDeleted(t, f, ns, "ws-old", uid, reapArgs("reap", ns, "--superseded", "discard", "--sessions-carry-data", "--yes", "--max-deletion-percent", "100"))
	if st, _, reason := entry(t, r, "ws-old"); st != "Superseded" || !strings.Contains(reason, "discarded without a snapshot") {
		t.Errorf("the discard's entry: %s: %s", st, reason)
	}
	if !exists(t, f, ns, "ws-new") {
		t.Error("ws-new, in use, was deleted")
	}
	if s := snapshotsOf(t, f, ns, "ws-old"); len(s) != 0 {
		t.Errorf("a discard took snapshots of ws-old: %v", s)
	}
}

// TestBehaviourSupersededArchiveThenReap (docs/spec.md#rule-superseded, docs/spec.md#cmd-reap): under
// --superseded=archive, snapshot rescues the superseded ws-old into a
// snapshot labelled pvc-janitor.io/superseded=true (ws-new, in use, gets
// none); once it is ready, reap deletes ws-old. ws-new is a newer session
// created empty: it supersedes ws-old by the workspace's line, so every run
// states --sessions-carry-data.
func TestBehaviourSupersededArchiveThenReap(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := k8stypes.UID(orphan(t, f, ns, "ws-old", "w", ""))
	newerInUse(t, f, ns, "ws-old", "ws-new", "w")

	// Before the archive, nothing makes ws-old reapable.
	code, out, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100", "--sessions-carry-data")...)
	if code != 0 {
		t.Fatalf("reap exit %d: %s", code, stderr)
	}
	if st, act, reason := entry(t, parse(t, out), "ws-old"); st != "Superseded" || !exists(t, f, ns, "ws-old") {
		t.Fatalf("before the archive: ws-old %s, action %q: %s", st, act, reason)
	}

	code, out, stderr = run(t, snapArgs(ns, "--superseded", "archive", "--sessions-carry-data")...)
	if code != 0 {
		t.Fatalf("snapshot --superseded archive exit %d: %s\n%s", code, out, stderr)
	}
	names := snapshotsOf(t, f, ns, "ws-old")
	if len(names) != 1 {
		t.Fatalf("snapshots of ws-old: %v, want one archive", names)
	}
	if s := snapshotsOf(t, f, ns, "ws-new"); len(s) != 0 {
		t.Errorf("ws-new, in use, was snapshotted: %v", s)
	}
	vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Labels["pvc-janitor.io/superseded"] != "true" {
		t.Errorf("archive %s labels %v: no pvc-janitor.io/superseded=true", vs.Name, vs.Labels)
	}
	if vs.Annotations["pvc-janitor.io/source-uid"] != string(uid) {
		t.Errorf("archive %s source-uid %q, want %s", vs.Name, vs.Annotations["pvc-janitor.io/source-uid"], uid)
	}
	if !testenv.Ready(vs) {
		t.Fatalf("snapshot returned 0 but its archive %s is not ready: %+v", vs.Name, vs.Status)
	}

	r := reapUntilDeleted(t, f, ns, "ws-old", uid, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100", "--sessions-carry-data"))
	if _, _, reason := entry(t, r, "ws-old"); !strings.Contains(reason, names[0]) {
		t.Errorf("the reap's reason does not name the archive %s: %s", names[0], reason)
	}
	if !exists(t, f, ns, "ws-new") {
		t.Error("ws-new, in use, was deleted")
	}
	if _, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), names[0], metav1.GetOptions{}); err != nil {
		t.Errorf("the archive is gone after the reap: %v", err)
	}
}

// TestBehaviourSIGINTExits130 (docs/spec.md#runs, docs/spec.md#output): SIGINT while `janitor run`
// waits for a slow rescue: exit 130, the report on stdout, the lease
// released, and nothing deleted.
func TestBehaviourSIGINTExits130(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	slow := ns + "-slow"
	if err := csidriver.SetFault(env.DriverStateDir, slow, csidriver.Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	orphan(t, f, ns, "ws-slow", "s", slow)
	cmd, out, errOut := startRun(t, ns, "--snapshot-timeout", "10m")
	exited := make(chan int, 1)
	go func() { exited <- exitCode(cmd.Wait()) }()

	// Mid-run: the lease is held and the rescue of ws-slow exists (and
	// cannot be ready for an hour): the run is waiting for it.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case code := <-exited:
			t.Fatalf("the run ended (exit %d) before its rescue appeared: %s", code, errOut)
		default:
		}
		return len(snapshotsOf(t, f, ns, "ws-slow")) == 1, nil
	}); err != nil {
		t.Fatalf("the run never created its rescue of ws-slow: %v\n%s", err, errOut)
	}
	l, err := f.Kube.CoordinationV1().Leases(ns).Get(ctx, lock.Name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		t.Fatalf("setup: no held lease mid-run: %v %+v", err, l)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var code int
	select {
	case code = <-exited:
	case <-time.After(2 * time.Minute): // a hang, not a timing assertion
		_ = cmd.Process.Kill()
		t.Fatalf("the run did not end after SIGINT: %s", errOut)
	}
	if code != 130 {
		t.Fatalf("SIGINT: exit %d, want 130: %s", code, errOut)
	}
	if !strings.Contains(errOut.String(), "interrupted") {
		t.Errorf("stderr does not say it was interrupted: %s", errOut)
	}
	r := parse(t, out.String())
	if r.Kind != "Report" || r.Command != "run" {
		t.Errorf("report after SIGINT: kind %q command %q", r.Kind, r.Command)
	}
	entry(t, r, "ws-slow")
	l, err = f.Kube.CoordinationV1().Leases(ns).Get(ctx, lock.Name, metav1.GetOptions{})
	if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		t.Errorf("lease still held by %q after SIGINT", *l.Spec.HolderIdentity)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if !exists(t, f, ns, "ws-slow") {
		t.Error("an interrupted run deleted ws-slow, whose rescue is not ready")
	}
}

// TestBehaviourWorkloadTemplatesMakeInUse (docs/spec.md#rule-in-use): a ReplicaSet's,
// a DaemonSet's and a CronJob's pod template naming a claim make it InUse,
// the reason naming the kind and the workload; a claim none names is not.
func TestBehaviourWorkloadTemplatesMakeInUse(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	for _, n := range []string{"ws-rs", "ws-ds", "ws-cj", "ws-free"} {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: n, Labels: wsLabels(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.ReplicaSet(ctx, ns, "rs-ide", "ws-rs"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DaemonSet(ctx, ns, "ds-ide", "ws-ds"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CronJob(ctx, ns, "cj-ide", "ws-cj"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, reapArgs("scan", ns, "--dry-run")...)
	if code != 0 {
		t.Fatalf("scan exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	for claim, ref := range map[string]string{"ws-rs": "ReplicaSet " + ns + "/rs-ide", "ws-ds": "DaemonSet " + ns + "/ds-ide", "ws-cj": "CronJob " + ns + "/cj-ide"} {
		if st, _, reason := entry(t, r, claim); st != "InUse" || !strings.Contains(reason, ref) {
			t.Errorf("%s: %s (%s), want InUse naming %s", claim, st, reason, ref)
		}
	}
	if st, _, reason := entry(t, r, "ws-free"); st == "InUse" {
		t.Errorf("ws-free, named by no workload, is InUse: %s", reason)
	}
}

// TestBehaviourDefaultSnapshotClass (docs/spec.md#rescue-class): with no
// --snapshot-class, the rescue's spec.volumeSnapshotClassName is the
// driver's default class (csi-hostpath-retain, not csi-hostpath-delete of
// the same driver).
func TestBehaviourDefaultSnapshotClass(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if code, out, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s\n%s", code, out, stderr)
	}
	names := snapshotsOf(t, f, ns, "ws-a")
	if len(names) != 1 {
		t.Fatalf("snapshots of ws-a: %v", names)
	}
	vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), names[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Spec.VolumeSnapshotClassName == nil || *vs.Spec.VolumeSnapshotClassName != testenv.SnapshotClassRetain {
		t.Errorf("rescue class %v, want the default %s", vs.Spec.VolumeSnapshotClassName, testenv.SnapshotClassRetain)
	}
}

// TestBehaviourNoSnapshotClass (docs/spec.md#rescue-class): a claim whose PV is not a
// CSI volume (hostPath), and one whose CSI driver has no default
// VolumeSnapshotClass, end SnapshotFailed with a reason naming why (and a
// Warning Event): no snapshot is taken with a guessed class.
func TestBehaviourNoSnapshotClass(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	const driver = "nodefault.pvc-janitor.io"
	for name, src := range map[string]corev1.PersistentVolumeSource{
		"ws-hostpath": {HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/pvc-janitor-" + ns}},
		"ws-other":    {CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: ns + "-other"}},
	} {
		if _, err := f.BoundClaimFrom(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: wsLabels(name)}, src); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WaitUnused(ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := run(t, snapArgs(ns)...)
	if code != 4 {
		t.Fatalf("snapshot exit %d, want 4 (rescues failed): %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	want := map[string]string{
		"ws-hostpath": `PersistentVolume "pv-` + ns + `-ws-hostpath" is not a CSI volume`,
		"ws-other":    "no default VolumeSnapshotClass for CSI driver " + driver,
	}
	for name, why := range want {
		if st, _, reason := entry(t, r, name); st != "SnapshotFailed" || !strings.Contains(reason, why) {
			t.Errorf("%s: %s (%s), want SnapshotFailed: %s", name, st, reason, why)
		}
		ev, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=SnapshotFailed,involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Items) != 1 || ev.Items[0].Type != corev1.EventTypeWarning || !strings.Contains(ev.Items[0].Message, why) {
			t.Errorf("%s: SnapshotFailed events %+v, want one Warning saying %q", name, ev.Items, why)
		}
	}
	if s := snapshots(t, f, ns); len(s) != 0 {
		t.Errorf("%d snapshots were created without a class", len(s))
	}
}

// janitorEvents lists the Events in ns the janitor wrote (by its source,
// its reporting controller or one of its reasons), as name -> count.
func janitorEvents(t *testing.T, f *testenv.Fixtures, ns string) map[string]int32 {
	t.Helper()
	l, err := f.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{"OrphanDetected": true, "SnapshotCreated": true, "SnapshotReady": true, "SnapshotFailed": true,
		"Superseded": true, "Reaped": true, "ReapSkipped": true}
	got := map[string]int32{}
	for _, e := range l.Items {
		if e.Source.Component == "pvc-janitor" || strings.Contains(e.ReportingController, "pvc-janitor") ||
			(e.InvolvedObject.Kind == "PersistentVolumeClaim" && reasons[e.Reason]) {
			got[e.Name+" "+e.Reason] = e.Count
		}
	}
	return got
}

// TestBehaviourDryRunWritesNoEvents (docs/spec.md#commands): scan, snapshot and reap with
// --dry-run, each with something it would do (mark ws-o, rescue ws-o,
// delete ws-r), create no Event.
func TestBehaviourDryRunWritesNoEvents(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-r", "r", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	orphan(t, f, ns, "ws-o", "o", "")
	before := janitorEvents(t, f, ns)
	if len(before) == 0 {
		t.Fatal("setup: the real snapshot run wrote no Event: the comparison would prove nothing")
	}
	for _, c := range []struct {
		cmd, claim, action string
	}{
		{"scan", "ws-o", "would-mark"},
		{"snapshot", "ws-o", "would-snapshot"},
		{"reap", "ws-r", "would-delete"},
	} {
		args := reapArgs(c.cmd, ns, "--dry-run")
		if c.cmd == "reap" { // the only one of the three that takes it
			args = append(args, "--max-deletion-percent", "100")
		}
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("%s --dry-run exit %d: %s", c.cmd, code, stderr)
		}
		if _, act, reason := entry(t, parse(t, out), c.claim); act != c.action {
			t.Errorf("%s --dry-run: %s action %q (%s), want %q: the dry run had nothing to do", c.cmd, c.claim, act, reason, c.action)
		}
		after := janitorEvents(t, f, ns)
		for k, n := range after {
			if m, ok := before[k]; !ok || m != n {
				t.Errorf("%s --dry-run wrote an Event: %s (count %d, before %d)", c.cmd, k, n, m)
			}
		}
	}
	if !exists(t, f, ns, "ws-r") || len(snapshotsOf(t, f, ns, "ws-o")) != 0 {
		t.Error("a dry run deleted ws-r or rescued ws-o")
	}
}

// TestBehaviourLogFormatAutoIsJSONOffATerminal (docs/spec.md#output): with
// --log-format auto and stderr not a terminal, every log line is a JSON
// object; --log-format console on the same writer is not (so the check
// can tell them apart).
func TestBehaviourLogFormatAutoIsJSONOffATerminal(t *testing.T) {
	ns := env.Namespace(t)
	args := func(format string) []string {
		return []string{"scan", "-n", ns, "-l", wsSel, "--dry-run", "-o", "json", "--kubeconfig", env.Kubeconfig,
			"--log-level", "debug", "--log-format", format}
	}
	var out, errOut bytes.Buffer
	if code := runWith(args("auto"), &out, &errOut); code != 0 {
		t.Fatalf("scan exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no log lines at debug level: the check would prove nothing")
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["level"] == nil || v["message"] == nil {
			t.Errorf("log line is not a zerolog JSON object (%v): %q", err, l)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := runWith(args("console"), &out, &errOut); code != 0 {
		t.Fatalf("scan exit %d: %s", code, errOut.String())
	}
	if json.Valid([]byte(strings.SplitN(strings.TrimSpace(errOut.String()), "\n", 2)[0])) {
		t.Errorf("--log-format console wrote JSON: %q", errOut.String())
	}
}

// TestBehaviourKubeconfigFromEnv (docs/spec.md#configuration): a janitor process with only
// KUBECONFIG (and an empty HOME) in its environment, no --kubeconfig,
// reads the cluster; without KUBECONFIG the same command has no cluster
// (exit 2), unless the HOME it is given has a ~/.kube/config.
func TestBehaviourKubeconfigFromEnv(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-b", Labels: wsLabels("b")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}}); err != nil {
		t.Fatal(err)
	}
	scan := func(envv ...string) (int, string, string) {
		cmd := exec.Command(binary(t), "scan", "-n", ns, "-l", wsSel, "--workspace-label", "workspace",
			"--min-age", "0s", "--grace-period", "0s", "--dry-run", "-o", "json")
		cmd.Env = append([]string{"HOME=" + t.TempDir()}, envv...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		return exitCode(cmd.Run()), out.String(), errOut.String()
	}
	code, out, stderr := scan("KUBECONFIG=" + env.Kubeconfig)
	if code != 0 {
		t.Fatalf("scan with KUBECONFIG: exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	if r.Summary.Claims != 2 {
		t.Errorf("report has %d claims, want 2", r.Summary.Claims)
	}
	if st, _, _ := entry(t, r, "ws-a"); st != "Orphaned" {
		t.Errorf("ws-a: %s, want Orphaned", st)
	}
	if st, _, _ := entry(t, r, "ws-b"); st != "InUse" {
		t.Errorf("ws-b: %s, want InUse", st)
	}
	if code, out, stderr := scan(); code != 2 || strings.Contains(out, `"kind"`) {
		t.Errorf("scan without KUBECONFIG: exit %d, want 2 and no report: %s\n%s", code, out, stderr)
	}
	// Without KUBECONFIG, ~/.kube/config is the kubeconfig.
	home := t.TempDir()
	kc, err := os.ReadFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = scan("HOME=" + home) // the later HOME wins
	if code != 0 {
		t.Fatalf("scan with ~/.kube/config: exit %d: %s", code, stderr)
	}
	if r := parse(t, out); r.Summary.Claims != 2 {
		t.Errorf("scan with ~/.kube/config: %d claims, want 2", r.Summary.Claims)
	}
}

// TestBehaviourReapPromptOnTerminal (docs/spec.md#commands): reap without --yes on a real
// terminal asks on stderr; "no" deletes nothing, "yes" deletes the rescued
// claim.
func TestBehaviourReapPromptOnTerminal(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := k8stypes.UID(orphan(t, f, ns, "ws-a", "a", ""))
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	master, slave := ptytest.Open(t)
	reapOn := func(typed string) (int, report, string) {
		if _, err := master.Write([]byte(typed)); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := cli.Run(context.Background(), append(reapArgs("reap", ns, "--max-deletion-percent", "100"), "--kubeconfig", env.Kubeconfig, "--log-format", "json"),
			cli.Streams{In: slave, Out: &out, ErrOut: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return code, parse(t, out.String()), errOut.String()
	}
	code, r, stderr := reapOn("no\n")
	if code != 0 || !strings.Contains(stderr, "Delete 1 rescued claim(s)?") {
		t.Fatalf("declined reap: exit %d, stderr %s", code, stderr)
	}
	if _, act, reason := entry(t, r, "ws-a"); act != reap.ActionSkipped || reason != "declined" || !exists(t, f, ns, "ws-a") {
		t.Fatalf("declined: ws-a action %q (%s), exists %v", act, reason, exists(t, f, ns, "ws-a"))
	}
	for i := 0; ; i++ {
		code, r, stderr = reapOn("yes\n")
		if code != 0 {
			t.Fatalf("confirmed reap: exit %d: %s", code, stderr)
		}
		_, act, reason := entry(t, r, "ws-a")
		if deletedOrGoing(t, f, ns, "ws-a", uid) {
			if act != reap.ActionDeleted {
				t.Errorf("ws-a deleted, report says %q", act)
			}
			break
		}
		if i == 2 || !strings.Contains(reason, "changed since it was read") {
			t.Fatalf("confirmed with yes, ws-a not deleted: %q: %s", act, reason)
		}
	}
}
