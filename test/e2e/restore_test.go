//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestRestoreRoundTrip (issue 14, docs/spec.md#restore) on real bytes: a workspace's
// claim is rescued, used again (new bytes), rescued again, and reaped. By
// workspace and by claim, restore brings back the newest bytes; the older
// rescue only with --allow-older; -o yaml and --dry-run create nothing; each
// refusal exits 2 with one line and writes nothing.
func TestRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	write := func(v string) {
		if err := f.WriteVolume(ctx, ns, "ws-a", "notes.txt", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	write("first draft")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	first := snapshots(t, f, ns)
	if len(first) != 1 {
		t.Fatalf("%d snapshots after the first rescue", len(first))
	}
	// Used again: a pod, new bytes, the pod goes.
	nextSecond(time.Now())
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	write("final version")
	if code, _, stderr := run(t, reapArgs("scan", ns)...); code != 0 { // sees the use: the mark goes
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
	if code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 {
		t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
	}
	if n := len(snapshots(t, f, ns)); n != 2 {
		t.Fatalf("%d snapshots, want the first rescue and the one after the second use", n)
	}
	restore := func(args ...string) (int, string, string) {
		return run(t, append([]string{"restore", "--workspace-label", "workspace", "--min-age", "0s", "-o", "json"}, args...)...)
	}
	read := func(claim string) string {
		b, err := f.ReadVolume(ctx, ns, claim, "notes.txt")
		if err != nil {
			t.Fatalf("read %s: %v", claim, err)
		}
		return string(b)
	}

	// By workspace: the newest data.
	code, out, stderr := restore("-n", ns, "--workspace", "a", "--as", "by-ws")
	if code != 0 {
		t.Fatalf("restore --workspace: exit %d: %s\n%s", code, out, stderr)
	}
	if _, act, _ := entry(t, parse(t, out), "by-ws"); act != "restored" {
		t.Errorf("action %q, want restored", act)
	}
	if got := read("by-ws"); got != "final version" {
		t.Errorf("restored by workspace: %q, want the newest bytes", got)
	}
	claims := func() int {
		l, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	before := claims()

	// Refusals: exit 2, one line, nothing written.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{ns + "/ws-a", "--as", "by-ws"}, "claim " + ns + "/by-ws exists"},
		{[]string{ns + "/ws-a", "--as", "by-claim"}, "claim " + ns + "/by-ws of workspace a may hold newer data"},
		{[]string{"-n", ns, "--from", "nope", "--as", "x"}, "snapshot " + ns + "/nope not found"},
		{[]string{ns + "/nope"}, "no rescue of claim " + ns + "/nope found"},
		{[]string{ns + "/ws-a", "--workspace", "a"}, "exactly one of"},
		{[]string{"-n", ns, "--workspace", "a", "--workspace-label", ""}, "--workspace needs --workspace-label"},
		{[]string{"-A", "--workspace", "a"}, "one namespace"},
	} {
		code, out, stderr := restore(c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
			t.Errorf("restore %v: exit %d, stdout %q, stderr %q; want 2 and one line saying %q", c.args, code, out, stderr, c.want)
		}
	}
	// -o yaml and --dry-run create nothing.
	code, out, stderr = run(t, "restore", ns+"/ws-a", "--as", "manifest", "--allow-older", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "kind: PersistentVolumeClaim") || !strings.Contains(out, "dataSourceRef:") ||
		!strings.Contains(out, "pvc-janitor.io/restored-from:") || strings.Contains(out, "kind: Report") {
		t.Errorf("-o yaml: exit %d\n%s\n%s", code, out, stderr)
	}
	if code, out, stderr := restore(ns+"/ws-a", "--as", "dry", "--allow-older", "--dry-run"); code != 0 || !strings.Contains(out, "would-restore") {
		t.Errorf("--dry-run: exit %d\n%s\n%s", code, out, stderr)
	}
	if after := claims(); after != before {
		t.Fatalf("%d claims after the refusals, -o yaml and --dry-run; %d before", after, before)
	}

	// By claim beside newer data, and the older rescue by name.
	if code, out, stderr := restore(ns+"/ws-a", "--as", "by-claim", "--allow-older"); code != 0 {
		t.Fatalf("restore by claim: exit %d: %s\n%s", code, out, stderr)
	}
	if got := read("by-claim"); got != "final version" {
		t.Errorf("restored by claim: %q, want the newest rescue's bytes", got)
	}
	if code, out, stderr := restore("-n", ns, "--from", first[0].Name, "--as", "older", "--allow-older"); code != 0 {
		t.Fatalf("restore --from: exit %d: %s\n%s", code, out, stderr)
	}
	if got := read("older"); got != "first draft" {
		t.Errorf("restored from the first rescue: %q, want its bytes", got)
	}
	// A restored claim starts a fresh life: no mark, no phase.
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "older", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range c.Annotations {
		if strings.HasPrefix(k, "pvc-janitor.io/") && k != "pvc-janitor.io/restored-from" && k != "pvc-janitor.io/restored-data-time" {
			t.Errorf("restored claim carries %s", k)
		}
	}
	if c.Labels["workspace"] != "a" || c.Annotations["pvc-janitor.io/restored-from"] != first[0].Name {
		t.Errorf("restored claim labels %v annotations %v", c.Labels, c.Annotations)
	}
	// Bound: the restore removed its mark from the source
	// (docs/spec.md#restore-protects-source).
	src, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, first[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := src.Annotations["pvc-janitor.io/restoring"]; ok {
		t.Errorf("the source %s still carries pvc-janitor.io/restoring=%s after a Bound restore", src.Name, v)
	}
}

// TestRestoreWaitsForBindingOrTimesOut (docs/spec.md#restore): a restore into a
// StorageClass that binds on first use is created and not waited for
// (exit 0, the report says why); one whose claim no provisioner binds
// fails after --restore-timeout with exit 4, and the report and stderr
// say it was created but not Bound.
func TestRestoreWaitsForBindingOrTimesOut(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	class := func(name, provisioner string, mode storagev1.VolumeBindingMode) string {
		t.Helper()
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + ns}, Provisioner: provisioner, VolumeBindingMode: &mode}
		if _, err := f.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.Kube.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
		})
		return sc.Name
	}
	restoreAs := func(as, sc string, extra ...string) (int, report, string) {
		code, out, stderr := run(t, append([]string{"restore", ns + "/ws-a", "--as", as, "--storage-class", sc,
			"--workspace-label", "workspace", "--min-age", "0s", "-o", "json"}, extra...)...)
		if !strings.Contains(out, `"kind"`) {
			t.Fatalf("restore --as %s: exit %d, no report: %s\n%s", as, code, out, stderr)
		}
		return code, parse(t, out), stderr
	}

	wffc := class("wffc", testenv.DriverName, storagev1.VolumeBindingWaitForFirstConsumer)
	code, r, stderr := restoreAs("ws-a-wffc", wffc)
	if _, act, reason := entry(t, r, "ws-a-wffc"); code != 0 || act != "restored" || !strings.Contains(reason, "WaitForFirstConsumer") {
		t.Errorf("restore into a WaitForFirstConsumer class: exit %d, %s (%s); want 0, restored, saying it binds on first use: %s", code, act, reason, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-wffc", metav1.GetOptions{})
	if err != nil || c.Status.Phase == corev1.ClaimBound {
		t.Errorf("the WaitForFirstConsumer claim: %v, phase %v; want it created and not Bound", err, c.Status.Phase)
	}

	stuck := class("stuck", "example.invalid/no-provisioner", storagev1.VolumeBindingImmediate)
	// --allow-older: ws-a-wffc, of the same workspace, is newer than the rescue.
	code, r, stderr = restoreAs("ws-a-stuck", stuck, "--restore-timeout", "2s", "--allow-older")
	_, act, reason := entry(t, r, "ws-a-stuck")
	if code != 4 || act == "restored" || !strings.Contains(reason, "not Bound after 2s") || !strings.Contains(stderr, "not Bound after 2s") {
		t.Errorf("restore no provisioner binds: exit %d, %s (%s); want 4, naming the timeout: %s", code, act, reason, stderr)
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-stuck", metav1.GetOptions{}); err != nil {
		t.Errorf("the timed-out restore's claim: %v; want it created (and left)", err)
	}
}
