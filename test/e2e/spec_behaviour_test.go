//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// Behaviours of docs/spec.md that issue 24 found no test exercising: the
// server's clock for marks, --qps and --burst as an effect, and the
// restore's provisioning failure and --size refusal.

// runVia runs one janitor command line through the fault proxy p (its
// kubeconfig is the last, so it wins), bounded by ctx.
func runVia(ctx context.Context, p *testenv.FaultProxy, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = cli.Run(ctx, append(args, "--kubeconfig", p.Kubeconfig, "--log-format", "json"),
		cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	return code, out.String(), errOut.String()
}

// TestMarkTakesTheServerClockNotTheHost (docs/spec.md#rule-mark-time): the
// API server's clock, as the Date of its responses says, runs 49 h 13 min
// ahead of the janitor host's (the fault proxy rewrites every Date). A claim
// whose last run saw it Attached is marked afresh with the server's clock,
// never the condition's time (docs/spec.md#rule-attached): its mark must be
// the proxied Date, not time.Now(). On a control plane without the Unused
// condition, a plain idle claim is marked the same way.
func TestMarkTakesTheServerClockNotTheHost(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	const skew = 49*time.Hour + 13*time.Minute
	lbl := wsLabels("a")
	lbl[inventory.LabelPhase] = "Attached"
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-detached", Labels: lbl}); err != nil {
		t.Fatal(err)
	}
	names := []string{"ws-detached"}
	if !env.UnusedCondition() {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-idle", Labels: wsLabels("b")}); err != nil {
			t.Fatal(err)
		}
		names = append(names, "ws-idle")
	}
	// The controller manager's first update of a new claim (its Unused
	// condition) must land first: a mark patch racing it is skipped for
	// the next run (resourceVersion precondition).
	for _, name := range names {
		if _, err := f.WaitIdle(ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
	p := env.StartFaultProxy(t, 1)
	p.Set(testenv.Faults{DateOffset: skew})

	before := time.Now()
	code, out, stderr := runVia(ctx, p, reapArgs("scan", ns)...)
	after := time.Now()
	if code != 0 {
		t.Fatalf("scan through the skewed proxy: exit %d: %s\n%s", code, out, stderr)
	}
	// The Date header is cut to the second and the mark rounded up to the
	// next one after the lists: the mark lies in the run's span on the
	// server's clock, give or take two seconds.
	lo, hi := before.Add(skew-2*time.Second), after.Add(skew+2*time.Second)
	for _, name := range names {
		raw := getClaim(t, f, ns, name).Annotations[inventory.AnnotationOrphanedSince]
		mark, err := time.Parse(time.RFC3339, raw)
		if err != nil {
			t.Fatalf("%s: orphaned-since %q: %v (report: %s)", name, raw, err, out)
		}
		if mark.Before(lo) || mark.After(hi) {
			t.Errorf("%s: orphaned-since %s, want the server's clock (%s to %s), not the host's (%s): off by %s",
				name, raw, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339),
				after.UTC().Format(time.RFC3339), mark.Sub(after).Round(time.Second))
		}
	}
}

// requestLog records when the fault proxy received each request.
type requestLog struct {
	mu    sync.Mutex
	times []time.Time
}

func (l *requestLog) note(*http.Request) {
	l.mu.Lock()
	l.times = append(l.times, time.Now())
	l.mu.Unlock()
}

func (l *requestLog) span() (int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.times) == 0 {
		return 0, 0
	}
	return len(l.times), l.times[len(l.times)-1].Sub(l.times[0])
}

// TestQPSAndBurstBoundTheRequests (docs/spec.md#rescue-concurrency): --qps and --burst
// reach the janitor's one shared client rate limiter, observed at the
// proxy, with lower bounds only (a loaded machine makes a run slower, never
// faster). With --qps 1 --burst 1, the N requests of a scan cannot arrive
// within less than N-1 seconds (N-2 allowed, for the first one's own delay);
// without the limiter, or with one per client, they take well under a
// second. With --burst 1000 and --qps 0.001 (one token per 1000 s) the same
// scan ends within two minutes: every request it makes fits in the burst.
func TestQPSAndBurstBoundTheRequests(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-b", Labels: wsLabels("b")}); err != nil {
		t.Fatal(err)
	}
	scan := func(qps, burst string) (int, time.Duration) {
		t.Helper()
		p := env.StartFaultProxy(t, 1)
		log := &requestLog{}
		p.OnRequest = log.note
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		code, out, stderr := runVia(ctx, p, reapArgs("scan", ns, "--dry-run", "--qps", qps, "--burst", burst)...)
		if code != 0 {
			t.Fatalf("scan --qps %s --burst %s: exit %d: %s\n%s", qps, burst, code, out, stderr)
		}
		if r := parse(t, out); r.Summary.Claims != 2 {
			t.Fatalf("scan --qps %s --burst %s: %d claims, want 2", qps, burst, r.Summary.Claims)
		}
		return log.span()
	}

	n, span := scan("1", "1")
	t.Logf("--qps 1 --burst 1: %d requests over %s", n, span.Round(time.Millisecond))
	if n < 5 {
		t.Fatalf("the scan made %d requests through the proxy: too few for the bound to mean anything", n)
	}
	if min := time.Duration(n-2) * time.Second; span < min {
		t.Errorf("--qps 1 --burst 1: %d requests arrived within %s, want at least %s (one per second)", n, span.Round(time.Millisecond), min)
	}

	n, span = scan("0.001", "1000")
	t.Logf("--qps 0.001 --burst 1000: %d requests over %s", n, span.Round(time.Millisecond))
}

// TestRestoreProvisioningFailureExitsFour (docs/spec.md#restore-wait): a rescue
// of a Block claim is restored through a driver that serves folders only:
// CreateVolume refuses block access, csi-provisioner records a
// ProvisioningFailed event on the new claim, and the restore fails after
// --restore-timeout with exit 4, naming that event's message in its report
// and on stderr.
func TestRestoreProvisioningFailureExitsFour(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	blockClaim(t, f, ns, "ws-blk", "blk")
	if _, err := f.WaitUnused(ctx, ns, "ws-blk"); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s\n%s", code, out, stderr)
	}
	code, out, stderr := run(t, "restore", ns+"/ws-blk", "--as", "ws-blk-back", "--workspace-label", "workspace",
		"--min-age", "0s", "--restore-timeout", "30s", "-o", "json")
	if !strings.Contains(out, `"kind"`) {
		t.Fatalf("restore: exit %d, no report: %s\n%s", code, out, stderr)
	}
	const why = "block access is not supported"
	_, act, reason := entry(t, parse(t, out), "ws-blk-back")
	t.Logf("restore: exit %d, %s: %s", code, act, reason)
	if code != 4 || act == "restored" || !strings.Contains(reason, "ProvisioningFailed") || !strings.Contains(reason, why) ||
		!strings.Contains(stderr, why) {
		t.Errorf("restore the driver cannot provision: exit %d, %s (%s); want 4 and the ProvisioningFailed event's message: %s", code, act, reason, stderr)
	}
	c := getClaim(t, f, ns, "ws-blk-back")
	if c.Status.Phase == corev1.ClaimBound {
		t.Errorf("the restored claim is Bound: the driver was to refuse it")
	}
}

// blockClaim makes a pre-bound claim of a CSI volume in Block mode.
func blockClaim(t *testing.T, f *testenv.Fixtures, ns, name, ws string) {
	t.Helper()
	ctx := context.Background()
	block := corev1.PersistentVolumeBlock
	sc := testenv.StorageClassName
	pvName := "pv-" + ns + "-" + name
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: rwo, VolumeMode: &block, StorageClassName: sc,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: testenv.DriverName, VolumeHandle: ns + "-" + name}},
		},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: wsLabels(ws)},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo, VolumeMode: &block, StorageClassName: &sc, VolumeName: pvName,
			Resources: corev1.VolumeResourceRequirements{Requests: size}},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitClaim(ctx, ns, name, func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound }); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreWithoutSizeIsRefused (docs/spec.md#restore-refusals): a snapshot that
// carries no claim template (one made by hand) and no restoreSize (the
// driver did not know its volume's size) cannot be restored without
// --size: exit 2, one line naming the snapshot and --size, nothing
// created. With --size the same restore goes ahead.
func TestRestoreWithoutSizeIsRefused(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "src", Labels: wsLabels("s")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "manual", "src", testenv.SnapshotClassRetain, nil, nil); err != nil {
		t.Fatal(err)
	}
	vs, err := f.WaitSnapshot(ctx, ns, "manual", time.Minute, testenv.Ready)
	if err != nil {
		t.Fatal(err)
	}
	if rs := vs.Status.RestoreSize; rs != nil && !rs.IsZero() {
		t.Fatalf("the hand-made snapshot has restoreSize %s: the case needs none", rs.String())
	}
	restore := func(extra ...string) (int, string, string) {
		return run(t, append([]string{"restore", "-n", ns, "--from", "manual", "--as", "back", "--storage-class",
			testenv.ProvisionedStorageClassName, "--workspace-label", "workspace", "--min-age", "0s", "-o", "json"}, extra...)...)
	}
	code, out, stderr := restore()
	line := strings.TrimSpace(stderr)
	t.Logf("restore without --size (restoreSize %v): exit %d: %s", vs.Status.RestoreSize, code, line)
	if code != 2 || out != "" || strings.Contains(line, "\n") || !strings.Contains(line, "--size") || !strings.Contains(line, "snapshot "+ns+"/manual") {
		t.Errorf("restore without --size: exit %d, stdout %q, stderr %q; want 2 and one line naming the snapshot and --size", code, out, stderr)
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "back", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused restore created its claim: %v", err)
	}
	if code, out, stderr := restore("--size", "1Gi"); code != 0 {
		t.Errorf("restore with --size: exit %d: %s\n%s", code, out, stderr)
	}
}
