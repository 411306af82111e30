//go:build integration

package testenv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

func fixtures(t *testing.T) *testenv.Fixtures {
	t.Helper()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestControlPlaneVersion(t *testing.T) {
	v, err := env.Clientset(t).Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Fatalf("server version %q, want v1.37.2", v.GitVersion)
	}
}

func TestClaimBindsAndSnapshotBecomesReady(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	claim, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a"})
	if err != nil {
		t.Fatal(err)
	}
	if claim.Spec.VolumeName != "pv-"+ns+"-ws-a" || claim.Status.Phase != corev1.ClaimBound {
		t.Fatalf("claim not bound to its PV: volume %q phase %q", claim.Spec.VolumeName, claim.Status.Phase)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-a", "ws-a", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s, err := f.WaitSnapshot(ctx, ns, "snap-a", 30*time.Second, testenv.Ready)
	if err != nil {
		t.Fatalf("%v (status %+v)", err, s)
	}
	t.Logf("snapshot ready after %v", time.Since(start))
	if s.Status.BoundVolumeSnapshotContentName == nil {
		t.Fatal("ready snapshot without a bound content")
	}
	content, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *s.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if content.Spec.Driver != testenv.DriverName || content.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain {
		t.Fatalf("content driver %q policy %q, want %q Retain (the default class)", content.Spec.Driver, content.Spec.DeletionPolicy, testenv.DriverName)
	}
	if content.Status == nil || content.Status.SnapshotHandle == nil || !strings.HasPrefix(*content.Status.SnapshotHandle, "snap-") {
		t.Fatalf("content has no driver snapshot handle: %+v", content.Status)
	}
}

func TestPermanentDriverErrorReachesSnapshotStatus(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	handle := ns + "-broken"
	if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{PermanentError: "disk on fire"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "broken", VolumeHandle: handle}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-broken", "broken", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	s, err := f.WaitSnapshot(ctx, ns, "snap-broken", 30*time.Second, testenv.Failed)
	if err != nil {
		t.Fatalf("%v (status %+v)", err, s)
	}
	if !strings.Contains(*s.Status.Error.Message, "disk on fire") {
		t.Fatalf("status.error %q does not carry the driver's message", *s.Status.Error.Message)
	}
	if testenv.Ready(s) {
		t.Fatal("a failed snapshot reports readyToUse")
	}
}

func TestTransientDriverErrorEndsReady(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	handle := ns + "-flaky"
	if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{TransientFailures: 2, TransientCode: "Unavailable"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "flaky", VolumeHandle: handle}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-flaky", "flaky", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := f.WaitSnapshot(ctx, ns, "snap-flaky", 60*time.Second, testenv.Ready); err != nil {
		t.Fatalf("%v (status %+v)", err, s)
	}
}

func TestSlowDriverReportsNotReadyThenReady(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	handle := ns + "-slow"
	if err := csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{ReadyAfter: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "slow", VolumeHandle: handle}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-slow", "slow", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	// First the content exists but is not ready …
	s, err := f.WaitSnapshot(ctx, ns, "snap-slow", 30*time.Second, func(s *snapv1.VolumeSnapshot) bool {
		return s.Status != nil && s.Status.BoundVolumeSnapshotContentName != nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if testenv.Ready(s) {
		t.Fatal("slow snapshot ready at once")
	}
	// … then it becomes ready.
	if s, err := f.WaitSnapshot(ctx, ns, "snap-slow", 60*time.Second, testenv.Ready); err != nil {
		t.Fatalf("%v (status %+v)", err, s)
	}
}

func TestClaimUsedByScheduledPodStaysTerminating(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "used"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"used"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	// pvc-protection adds its finalizer on creation (admission) already.
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "used", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Once a later claim has been released, the protection controller has
	// processed this one too (and must have kept it).
	protectionBarrier(t, f, ns)
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "used", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim in use was deleted: %v", err)
	}
	if c.DeletionTimestamp == nil {
		t.Fatal("claim has no deletionTimestamp")
	}
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitClaimGone(ctx, ns, "used"); err != nil {
		t.Fatalf("claim not released once its pod was gone: %v", err)
	}
}

func protectionBarrier(t *testing.T, f *testenv.Fixtures, ns string) {
	t.Helper()
	if err := f.ProtectionBarrier(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// idleClaims makes, in a fresh namespace, the two claims the Unused
// condition is about: "idle", bound and never used, and "released", used by
// a pod that is then deleted. It returns when the controller manager has
// processed both (protectionBarrier) and how long that took.
func idleClaims(t *testing.T, c *testenv.Cluster) (*testenv.Fixtures, string, time.Duration) {
	t.Helper()
	ctx := context.Background()
	f, err := c.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	start := time.Now()
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "idle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "released"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"released"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if c.UnusedCondition() {
		// The pod's use is recorded (Unused=False) before the pod goes.
		// kube-controller-manager's pvc-protection controller decides the
		// condition on its informer's copy of the claim: a pod deleted
		// before that copy shows Unused=False is judged against the older
		// Unused=True, which looks right already, and the claim is left
		// False for good (seen under load: make test, 2026-12-03;
		// pvc_protection_controller.go processPVC reads pvcLister).
		if _, err := f.WaitClaim(ctx, ns, "released", func(pvc *corev1.PersistentVolumeClaim) bool {
			cond := testenv.UnusedCondition(pvc)
			return cond != nil && cond.Status == corev1.ConditionFalse
		}); err != nil {
			t.Fatalf("released: the pod's use never showed as Unused=False: %v", err)
		}
		// A claim created after that write has been processed: the
		// controller's informer has the write too (one watch, in order).
		protectionBarrier(t, f, ns)
	}
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	protectionBarrier(t, f, ns)
	return f, ns, time.Since(start)
}

// TestUnusedConditionFollowsFeatureGate runs the same claims on the
// package's stack and on a second one started with the KEP-5541 gate set the
// other way (JANITOR_CLUSTER_FEATURE_GATES picks the package's): the
// controller manager sets Unused=True on the stack with the gate, and
// leaves no Unused condition at all on the one with
// PersistentVolumeClaimUnusedSinceTime=false, even after it has processed
// those very claims and after three times as long as the gated stack took.
func TestUnusedConditionFollowsFeatureGate(t *testing.T) {
	ctx := context.Background()
	otherGates := testenv.UnusedSinceGate + "=false"
	if !env.UnusedCondition() {
		otherGates = ""
	}
	start := time.Now()
	other, err := testenv.Start(ctx, testenv.Options{Dir: t.TempDir(), FeatureGates: otherGates})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := other.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("second stack (--feature-gates=%q) up in %s", otherGates, time.Since(start).Round(100*time.Millisecond))
	with, without := env, other
	if !env.UnusedCondition() {
		with, without = other, env
	}
	if !with.UnusedCondition() || without.UnusedCondition() {
		t.Fatalf("stacks: with %q, without %q", with.FeatureGates, without.FeatureGates)
	}

	// The gate is on: both claims get Unused=True, already by the time the
	// barrier has passed (logged) and at the latest within WaitUnused's 30 s.
	f, ns, took := idleClaims(t, with)
	for _, name := range []string{"idle", "released"} {
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("gate on: %s at the barrier: Unused %+v", name, testenv.UnusedCondition(c))
		if c, err = f.WaitUnused(ctx, ns, name); err != nil {
			t.Fatalf("gate on (--feature-gates=%q): no Unused=True on %s: %v; conditions %+v", with.FeatureGates, name, err, c.Status.Conditions)
		}
		if cond := testenv.UnusedCondition(c); cond.LastTransitionTime.IsZero() {
			t.Errorf("gate on: %s: Unused=True without a lastTransitionTime", name)
		}
	}
	t.Logf("gate on: conditions set within %s", took.Round(time.Millisecond))

	// The gate is off: the controller manager has processed both claims
	// (the barrier), and three times as long as above has passed, yet no
	// Unused condition, neither True nor False.
	f, ns, _ = idleClaims(t, without)
	barrier := time.Now()
	margin := max(3*took, 10*time.Second)
	looked := 0 // reads that saw both claims
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, margin, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"idle", "released"} {
			c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				// A read cut by the poll's own deadline (the client's rate
				// limiter refuses to wait past it) is no evidence either way.
				return false, nil
			}
			if cond := testenv.UnusedCondition(c); cond != nil {
				return false, fmt.Errorf("gate off (--feature-gates=%q): %s has an Unused condition: %+v", without.FeatureGates, name, *cond)
			}
		}
		looked++
		return false, nil
	}); !wait.Interrupted(err) {
		t.Fatal(err)
	}
	if looked == 0 {
		t.Fatal("gate off: the claims could not be read once in the whole wait")
	}
	// The controller manager really ran with the gate off (it logs its flags).
	logText, err := os.ReadFile(filepath.Join(without.Dir, "logs", "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	var flagLine string
	for _, line := range strings.Split(string(logText), "\n") {
		if strings.Contains(line, "FLAG: --feature-gates=") {
			flagLine = line
		}
	}
	if !strings.Contains(flagLine, testenv.UnusedSinceGate+"=false") {
		t.Errorf("kube-controller-manager.log: the gate is not in its --feature-gates: %q", flagLine)
	}
	t.Logf("gate off: kube-controller-manager.log: %s", flagLine)
	t.Logf("gate off: no Unused condition on idle and released claims %s after the barrier", time.Since(barrier).Round(time.Millisecond))
}
