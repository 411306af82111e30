package rescue

import (
	"context"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/apistub"
	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// The create-and-wait loop against countStub (requests_test.go, on package
// apistub), a STUB
// that records requests and injects failures, not a model of the API
// server or of the snapshot controller: each test pins what the loop
// makes of one kind of answer. The real controller is met by the cluster
// tests (test/e2e, make bench).

// loopOptions are a rescue's options with bounds short enough for a test.
func loopOptions() Options {
	return Options{Policy: classify.Policy{WorkspaceLabel: "workspace"}, WorkspaceLabel: "workspace", Attempts: 2,
		Timeout: 2 * time.Second, ErrorGrace: time.Millisecond, Concurrency: 2, RecheckMaxAge: time.Minute,
		RetryBackoff: time.Hour}
}

// rescueOn runs Rescue on n orphans of s (set up by prepare, after the
// orphans exist) and returns the outcomes by claim name.
func rescueOn(t *testing.T, s *countStub, n int, o Options, prepare func(inv *inventory.Inventory, ds []classify.Decision)) map[string]Outcome {
	t.Helper()
	inv, ds, targets := orphans(s, n)
	if prepare != nil {
		prepare(inv, ds)
	}
	return rescueWith(t, context.Background(), s, inv, ds, targets, o)
}

func rescueWith(t *testing.T, ctx context.Context, s *countStub, inv *inventory.Inventory, ds []classify.Decision, targets []int, o Options) map[string]Outcome {
	t.Helper()
	c := apistub.Clients(t, s, apistub.Fast(200*time.Millisecond))
	// The server's clock: a first answer, as the scan's lists give it.
	if _, err := c.Snap.SnapshotV1().VolumeSnapshotClasses().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := SnapshotTargets(ctx, c, inv, ds, targets, o)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Outcome{}
	for _, x := range out {
		by[ds[x.Index].Claim.Name] = x
	}
	return by
}

// TestRescueChecksWhatWasCut (docs/spec.md#rescue-claim-template, safety
// R8): a snapshot created by the claim's name is cut from whatever claim
// has the name when the snapshot controller reads it. One cut from
// another volume is deleted and the claim skipped; the others are rescues.
func TestRescueChecksWhatWasCut(t *testing.T) {
	s := newCountStub()
	s.volumes = map[string]string{"ws-001": "vol-of-another-claim"}
	out := rescueOn(t, s, 3, loopOptions(), nil)
	if o := out["ws-001"]; o.Action != ActionSkipped || !strings.Contains(o.Message, "another claim took the name") ||
		!strings.Contains(o.Message, "it was deleted") {
		t.Errorf("ws-001: %s (%s), want skipped, its snapshot deleted", o.Action, o.Message)
	}
	for _, name := range []string{"ws-000", "ws-002"} {
		if o := out[name]; o.Action != ActionCreated {
			t.Errorf("%s: %s (%s), want %s", name, o.Action, o.Message, ActionCreated)
		}
	}
	if n := s.Count("DELETE volumesnapshots"); n != 1 {
		t.Errorf("%d snapshot deletes, want the one cut from another volume", n)
	}
	if n := s.Count("GET persistentvolumeclaims"); n != 0 {
		t.Errorf("%d claim reads, want none: the volumes tell", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.snaps) != 2 {
		t.Errorf("%d snapshots left, want the two rescues", len(s.snaps))
	}
}

// TestRescueReadsTheClaimWhenTheVolumesDoNotTell: without the claim's
// volume handle, the claim is read once its snapshot is ready. The UID the
// re-check saw proves the rescue; another claim under the name proves
// nothing either way: the claim is skipped and the snapshot, perhaps the
// only copy of its data, kept.
func TestRescueReadsTheClaimWhenTheVolumesDoNotTell(t *testing.T) {
	s := newCountStub()
	var replaced *corev1.PersistentVolumeClaim
	s.controller = func(vs *snapshotv1.VolumeSnapshot) bool {
		if *vs.Spec.Source.PersistentVolumeClaimName == "ws-001" {
			// Another claim takes the name before the controller cuts.
			replaced = s.claims["ws-001"].DeepCopy()
			s.claims["ws-001"].UID = "uid-another"
		}
		return true
	}
	out := rescueOn(t, s, 2, loopOptions(), func(inv *inventory.Inventory, _ []classify.Decision) {
		for k, pv := range inv.PVs {
			pv.VolumeHandle = ""
			inv.PVs[k] = pv
		}
	})
	if o := out["ws-000"]; o.Action != ActionCreated {
		t.Errorf("ws-000: %s (%s), want %s", o.Action, o.Message, ActionCreated)
	}
	if o := out["ws-001"]; o.Action != ActionSkipped || !strings.Contains(o.Message, "the snapshot is kept") {
		t.Errorf("ws-001: %s (%s), want skipped, the snapshot kept", o.Action, o.Message)
	}
	if replaced == nil {
		t.Fatal("the controller never cut ws-001")
	}
	if n := s.Count("GET persistentvolumeclaims"); n != 2 {
		t.Errorf("%d claim reads, want one per ready snapshot", n)
	}
	if n := s.Count("DELETE volumesnapshots"); n != 0 {
		t.Errorf("%d snapshot deletes, want none", n)
	}
}

// TestRescueGivesUpOnAPersistentError (docs/spec.md#rescue-give-up): a
// snapshot whose status.error outlasts --snapshot-error-grace is deleted
// and made again while the run has attempts left; then the janitor gives
// up: the snapshot deleted, one SnapshotFailed Event, and one claim patch
// with the attempt record and when the next attempt is due.
func TestRescueGivesUpOnAPersistentError(t *testing.T) {
	s := newCountStub()
	s.controller = func(vs *snapshotv1.VolumeSnapshot) bool {
		msg, at := "the driver failed", metav1.NewTime(time.Now().Add(-time.Minute))
		ready := false
		vs.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: &ready, Error: &snapshotv1.VolumeSnapshotError{Message: &msg, Time: &at}}
		return false
	}
	out := rescueOn(t, s, 1, loopOptions(), nil)
	o := out["ws-000"]
	if o.Action != ActionFailed || o.State != classify.SnapshotFailed || !strings.Contains(o.Message, "failed after 2 attempts: the driver failed") ||
		!strings.Contains(o.Message, "the failed snapshot was deleted") {
		t.Fatalf("ws-000: %s %s (%s), want failed after 2 attempts", o.Action, o.State, o.Message)
	}
	if c, d := s.Count("POST volumesnapshots"), s.Count("DELETE volumesnapshots"); c != 2 || d != 2 {
		t.Errorf("%d creates and %d deletes, want 2 of each", c, d)
	}
	if n := s.Count("POST events"); n != 1 {
		t.Errorf("%d Events, want one (SnapshotFailed)", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.patches) != 1 || !strings.Contains(s.patches[0], `"pvc-janitor.io/rescue-attempts":"2"`) ||
		!strings.Contains(s.patches[0], `"pvc-janitor.io/phase":"SnapshotFailed"`) {
		t.Errorf("claim patches %q, want one with the phase and 2 attempts", s.patches)
	}
	if len(s.snaps) != 0 {
		t.Errorf("%d snapshots left, want the failed ones deleted", len(s.snaps))
	}
}

// TestRescueWaitIsBounded (docs/spec.md#rescue-give-up): a snapshot that is
// only slow is never deleted; the wait ends at --snapshot-timeout, failed.
func TestRescueWaitIsBounded(t *testing.T) {
	s := newCountStub()
	s.controller = func(vs *snapshotv1.VolumeSnapshot) bool {
		ready := false
		vs.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: &ready}
		return false
	}
	o := loopOptions()
	o.Timeout = 300 * time.Millisecond
	start := time.Now()
	out := rescueOn(t, s, 1, o, nil)
	if x := out["ws-000"]; x.Action != ActionFailed || !strings.Contains(x.Message, "not ready after 300ms") {
		t.Errorf("ws-000: %s (%s), want failed, not ready after 300ms", x.Action, x.Message)
	}
	if n := s.Count("DELETE volumesnapshots"); n != 0 {
		t.Errorf("%d snapshot deletes, want none: slow is not failed", n)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the rescue took %s", d)
	}
}

// TestRescueDoesNotTakeAnotherClaimsSnapshot (docs/spec.md#rescue-name): a
// snapshot of the rescue's name that records another claim's UID is not
// overwritten, and not counted: the claim's outcome is a conflict.
func TestRescueDoesNotTakeAnotherClaimsSnapshot(t *testing.T) {
	s := newCountStub()
	out := rescueOn(t, s, 1, loopOptions(), func(_ *inventory.Inventory, ds []classify.Decision) {
		cl := ds[0].Claim
		name := Name(cl.Name, cl.UID, *ds[0].OrphanedSince)
		s.snaps[name] = &snapshotv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, UID: "uid-foreign",
			ResourceVersion: s.next(), Annotations: map[string]string{inventory.AnnotationSourceUID: "uid-someone-else"}}}
	})
	if o := out["ws-000"]; o.Action != ActionConflict || !o.Failed() {
		t.Errorf("ws-000: %s (%s), want a conflict", o.Action, o.Message)
	}
	if n := s.Count("DELETE volumesnapshots"); n != 0 {
		t.Errorf("%d snapshot deletes, want none", n)
	}
}

// TestRescueFailsClosedWithoutTheRecheck (docs/spec.md#rescue-recheck): a
// re-check that cannot read the namespace creates nothing.
func TestRescueFailsClosedWithoutTheRecheck(t *testing.T) {
	s := newCountStub()
	s.fail["LIST pods"] = []int{403, 403, 403}
	out := rescueOn(t, s, 1, loopOptions(), nil)
	if o := out["ws-000"]; o.Action != ActionFailed || !strings.Contains(o.Message, "could not re-check the claim") {
		t.Errorf("ws-000: %s (%s), want failed: could not re-check", o.Action, o.Message)
	}
	if n := s.Count("POST volumesnapshots"); n != 0 {
		t.Errorf("%d creates, want none", n)
	}
}

// TestRescueSkipsAClaimInUseAgain (docs/spec.md#rescue-recheck): a pod that
// uses the claim at the re-check stops the create and restarts its clock
// (the marks removed, the use recorded).
func TestRescueSkipsAClaimInUseAgain(t *testing.T) {
	s := newCountStub()
	s.pods = []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ide"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "home",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ws-000"}}}}}}}
	out := rescueOn(t, s, 2, loopOptions(), nil)
	if o := out["ws-000"]; o.Action != ActionSkipped || o.State != classify.InUse {
		t.Errorf("ws-000: %s %s (%s), want skipped, InUse", o.Action, o.State, o.Message)
	}
	if o := out["ws-001"]; o.Action != ActionCreated {
		t.Errorf("ws-001: %s (%s), want created", o.Action, o.Message)
	}
	if n := s.Count("POST volumesnapshots"); n != 1 {
		t.Errorf("%d creates, want ws-001's only", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for _, p := range s.patches {
		if strings.HasPrefix(p, "ws-000 ") && strings.Contains(p, `"pvc-janitor.io/orphaned-since":null`) {
			found = true
		}
	}
	if !found {
		t.Errorf("ws-000's orphaned-since mark not removed: %q", s.patches)
	}
}

// TestRescueWaitsForTheNextAttempt (docs/spec.md#rescue-attempts): a claim
// whose next attempt is not due is left alone, unread and unwritten.
func TestRescueWaitsForTheNextAttempt(t *testing.T) {
	s := newCountStub()
	out := rescueOn(t, s, 1, loopOptions(), func(_ *inventory.Inventory, ds []classify.Decision) {
		ds[0].Claim.Annotations[inventory.AnnotationRescueAttempts] = "3"
		ds[0].Claim.Annotations[inventory.AnnotationNextAttempt] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	})
	if o := out["ws-000"]; o.Action != ActionSkipped || o.State != classify.SnapshotFailed || !strings.Contains(o.Message, "3 failed snapshot attempts") {
		t.Errorf("ws-000: %s %s (%s), want skipped until the next attempt", o.Action, o.State, o.Message)
	}
	if n := s.Count("POST volumesnapshots") + s.Count("PATCH persistentvolumeclaims") + s.Count("POST events"); n != 0 {
		t.Errorf("%d writes, want none", n)
	}
}

// TestRescueWithoutAClass: a claim whose driver has no snapshot class
// fails without a create, recorded (Event, phase label).
func TestRescueWithoutAClass(t *testing.T) {
	s := newCountStub()
	out := rescueOn(t, s, 1, loopOptions(), func(inv *inventory.Inventory, _ []classify.Decision) {
		for k, pv := range inv.PVs {
			pv.CSIDriver = "other.csi"
			inv.PVs[k] = pv
		}
	})
	if o := out["ws-000"]; o.Action != ActionFailed || o.Snapshot != "" {
		t.Errorf("ws-000: %+v, want failed without a snapshot", o)
	}
	if c, e := s.Count("POST volumesnapshots"), s.Count("POST events"); c != 0 || e != 1 {
		t.Errorf("%d creates and %d Events, want none and one", c, e)
	}
}

// TestRescueInterrupted: a run whose context ends while it waits creates
// nothing more and reports every claim it did not finish as pending, the
// one it waited for with its snapshot.
func TestRescueInterrupted(t *testing.T) {
	s := newCountStub()
	inv, ds, targets := orphans(s, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.controller = func(vs *snapshotv1.VolumeSnapshot) bool {
		ready := false
		vs.Status = &snapshotv1.VolumeSnapshotStatus{ReadyToUse: &ready}
		return false
	}
	s.onRecord = func(entry string) {
		// The wait's first read or watch of the snapshot: the create
		// was answered, and the run ends while it waits.
		if entry == "WATCH volumesnapshots" || entry == "GET volumesnapshots" {
			cancel()
		}
	}
	o := loopOptions()
	o.Concurrency = 1
	out := rescueWith(t, ctx, s, inv, ds, targets, o)
	for name, x := range out {
		if x.Action != ActionPending {
			t.Errorf("%s: %s (%s), want pending", name, x.Action, x.Message)
		}
	}
	if x := out["ws-000"]; x.Snapshot == "" || x.State != classify.Snapshotting {
		t.Errorf("ws-000: %+v, want pending on its snapshot", x)
	}
	if n := s.Count("POST volumesnapshots"); n != 1 {
		t.Errorf("%d creates, want only the first", n)
	}
}

// TestValidateClass: an unknown --snapshot-class is a configuration error
// before anything is written; no class asks nothing.
func TestValidateClass(t *testing.T) {
	s := newCountStub()
	c := apistub.Clients(t, s, kube.RetryPolicy{})
	if err := ValidateClass(context.Background(), c, Options{}); err != nil {
		t.Errorf("no class: %v", err)
	}
	err := ValidateClass(context.Background(), c, Options{Class: "nope"})
	if err == nil || !strings.Contains(err.Error(), `VolumeSnapshotClass "nope" not found`) {
		t.Errorf("unknown class: %v", err)
	}
}

// TestRescueRecordsItsIntentBeforeDelete (docs/spec.md#retention-intent,
// safety row 40.G8): with --delete-contents, a failed attempt given up on
// gets the intent annotation before its Retain content is set to Delete,
// and is deleted after both. A run killed between the content's patch and
// the delete leaves the record, so the next run puts the content back to
// Retain if the attempt became ready after all (the chaos oracle found such
// a rescue kept with a Delete content). What is pinned is the order of
// what the loop sends.
func TestRescueRecordsItsIntentBeforeDelete(t *testing.T) {
	s := newCountStub()
	s.controller = func(vs *snapshotv1.VolumeSnapshot) bool {
		msg, at := "the driver failed", metav1.NewTime(time.Now().Add(-time.Minute))
		ready := false
		vs.Status.ReadyToUse, vs.Status.Error = &ready, &snapshotv1.VolumeSnapshotError{Message: &msg, Time: &at}
		return true // its content is made, Retain
	}
	o := loopOptions()
	o.Attempts, o.DeleteContents = 1, true
	if out := rescueOn(t, s, 1, o, nil)["ws-000"]; out.Action != ActionFailed {
		t.Fatalf("ws-000: %s (%s), want failed", out.Action, out.Message)
	}
	var order []string
	for _, e := range s.Requests() {
		switch {
		case strings.HasPrefix(e, "PATCH volumesnapshots"), strings.HasPrefix(e, "PATCH volumesnapshotcontents"), strings.HasPrefix(e, "DELETE volumesnapshots"):
			order = append(order, e)
		}
	}
	want := []string{"PATCH volumesnapshots", "PATCH volumesnapshotcontents", "DELETE volumesnapshots"}
	if len(order) != len(want) {
		t.Fatalf("requests %q, want %q", order, want)
	}
	for i := range want {
		if !strings.HasPrefix(order[i], want[i]) {
			t.Fatalf("requests %q, want %q: the intent first, then Delete, then the delete", order, want)
		}
	}
}
