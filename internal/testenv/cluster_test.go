package testenv_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/csidriver"
	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
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
	time.Sleep(2 * time.Second) // give the protection controller time to (wrongly) release it
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

func TestUnusedConditionIsSet(t *testing.T) {
	ctx := context.Background()
	f, ns := fixtures(t), env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "idle"}); err != nil {
		t.Fatal(err)
	}
	c, err := f.WaitClaim(ctx, ns, "idle", func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no Unused=True condition (KEP-5541) on an unused bound claim: %v; conditions %+v", err, c.Status.Conditions)
	}
}
