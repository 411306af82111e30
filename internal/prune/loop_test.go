package prune

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/apistub"
	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
)

var stubPolicy = classify.Policy{WorkspaceLabel: "workspace", MinAge: time.Minute, GracePeriod: time.Hour, SessionsCarryData: true}

// run prunes namespace ws of the stub.
func run(t *testing.T, s *apiStub, c *kube.Clients, o Options) *Result {
	t.Helper()
	o.Scope = kube.Scope{Namespaces: []string{"ws"}, WorkspaceLabel: "workspace"}
	o.Policy = stubPolicy
	if o.MaxDeletions == 0 {
		o.MaxDeletions, o.MaxDeletionPercent = 100, 100
	}
	res, err := DeleteByRetention(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func byName(res *Result) map[string]Outcome {
	m := map[string]Outcome{}
	for _, o := range res.Outcomes {
		m[o.Name] = o
	}
	return m
}

// TestPruneSendsChecksThenPreconditions (docs/spec.md#retention,
// docs/spec.md#restore-protects-source): the plain path. Of two rescues of
// a gone claim, --keep-last 1 prunes the older: right before its delete
// prune reads it again and lists the namespace's claims; the delete
// carries the UID and resourceVersion of the read; an Event says so. The
// newer rescue gets no request at all.
func TestPruneSendsChecksThenPreconditions(t *testing.T) {
	s := newStub()
	a1 := s.rescue("a1", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	res := run(t, s, s.clients(t), Options{Retention: retention.Policy{KeepLast: 1}})
	got := byName(res)
	if o := got["a1"]; o.Action != ActionPruned || !strings.Contains(o.Reason, "older than the 1 newest of its workspace") || o.RestoreSize != 1<<30 || o.DeletionPolicy != "Delete" {
		t.Errorf("a1: %+v, want pruned by --keep-last 1", o)
	}
	if o := got["a2"]; o.Action != ActionKept || !strings.Contains(o.Reason, "kept by --keep-last 1") {
		t.Errorf("a2: %+v, want kept", o)
	}
	if res.Rescues != 2 || res.Blocked != "" || len(res.Snapshots["ws"]) != 2 || res.Now.IsZero() {
		t.Errorf("result: %d rescues, blocked %q, %d snapshots read, now %v", res.Rescues, res.Blocked, len(res.Snapshots["ws"]), res.Now)
	}
	apistub.CheckRequests(t, "requests", s.Requests(),
		"LIST volumesnapshots",
		"LIST persistentvolumeclaims",
		"GET volumesnapshots/a1",
		"LIST persistentvolumeclaims",
		"DELETE volumesnapshots/a1 uid=uid-a1 rv="+a1.ResourceVersion,
		"POST events Pruned")
	if _, ok := s.snaps["a1"]; ok {
		t.Error("a1 is still there")
	}
	if _, ok := s.snaps["a2"]; !ok {
		t.Error("a2 is gone")
	}
	if s.scans == 0 {
		t.Error("prune did not scan")
	}
}

// TestPruneDeletesNothingWhenItMustNot: a dry run, the blast radius and a
// declined prompt send no write at all (a dry run does not even settle an
// earlier prune's intent); a failed prompt fails the run.
func TestPruneDeletesNothingWhenItMustNot(t *testing.T) {
	declined := func(int) (bool, error) { return false, nil }
	for _, c := range []struct {
		name    string
		o       Options
		action  string
		blocked string
	}{
		{"dry run", Options{DryRun: true}, ActionWouldPrune, ""},
		{"over --max-deletions", Options{MaxDeletions: 1, MaxDeletionPercent: 100}, ActionLimited, "2 rescues would be deleted, over --max-deletions 1"},
		{"over --max-deletion-percent", Options{MaxDeletions: 10, MaxDeletionPercent: 50}, ActionLimited, "2 of 3 rescues in scope (66.7%)"},
		{"declined at the prompt", Options{Confirm: declined}, ActionKept, "declined at the prompt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStub()
			for i, n := range []string{"a1", "a2", "a3"} {
				s.rescue(n, "a", time.Duration(3-i)*time.Hour, snapshotv1.VolumeSnapshotContentDelete)
			}
			s.snaps["a3"].Annotations[inventory.AnnotationPruneIntent] = "2026-01-01T00:00:00Z"
			c.o.Retention = retention.Policy{KeepLast: 1}
			res := run(t, s, s.clients(t), c.o)
			got := byName(res)
			for _, n := range []string{"a1", "a2"} {
				if got[n].Action != c.action || (c.blocked != "" && !strings.Contains(got[n].Reason, c.blocked)) {
					t.Errorf("%s: %s (%s), want %s", n, got[n].Action, got[n].Reason, c.action)
				}
			}
			if got["a3"].Action != ActionKept {
				t.Errorf("a3: %+v, want kept", got["a3"])
			}
			if c.blocked != "" && !strings.Contains(res.Blocked, c.blocked) {
				t.Errorf("blocked %q, want %q", res.Blocked, c.blocked)
			}
			want := []string(nil)
			if !c.o.DryRun { // the intent of a3 is settled all the same: its content back to Retain
				want = []string{"PATCH volumesnapshotcontents/content-a3 deletionPolicy=Retain", "PATCH volumesnapshots/a3 -" + inventory.AnnotationPruneIntent}
			}
			apistub.CheckRequests(t, "writes", s.Writes(), want...)
			if len(s.snaps) != 3 {
				t.Errorf("%d rescues left, want 3", len(s.snaps))
			}
		})
	}
	t.Run("the prompt fails", func(t *testing.T) {
		s := newStub()
		s.rescue("a1", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentDelete)
		s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
		_, err := DeleteByRetention(context.Background(), s.clients(t), Options{Scope: kube.Scope{Namespaces: []string{"ws"}}, Policy: stubPolicy,
			Retention: retention.Policy{KeepLast: 1}, MaxDeletions: 10, MaxDeletionPercent: 100,
			Confirm: func(int) (bool, error) { return false, errors.New("no terminal") }})
		if err == nil || !strings.Contains(err.Error(), "no terminal") || s.Count("DELETE") != 0 {
			t.Errorf("err %v, %d DELETEs; want the prompt's error and none", err, s.Count("DELETE"))
		}
	})
}

// TestPruneReadErrors: a list prune makes itself that fails fails the run
// closed, before any delete.
func TestPruneReadErrors(t *testing.T) {
	for _, c := range []struct{ fail, want string }{
		{"LIST volumesnapshots", "read the janitor's snapshots"},
		{"LIST persistentvolumeclaims", "read claims in ws"},
	} {
		t.Run(c.fail, func(t *testing.T) {
			s := newStub()
			s.rescue("a1", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentDelete)
			s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
			s.fail[c.fail] = []int{403}
			_, err := DeleteByRetention(context.Background(), s.clients(t), Options{Scope: kube.Scope{Namespaces: []string{"ws"}}, Policy: stubPolicy,
				Retention: retention.Policy{KeepLast: 1}, MaxDeletions: 10, MaxDeletionPercent: 100})
			var re *kube.ReadError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want a ReadError: %s", err, c.want)
			}
			apistub.CheckRequests(t, "writes", s.Writes())
		})
	}
}

// TestPruneKeepsTheSourceClaimsRescue: namespaceClaims gives retention the
// namespace's claims as this run classified them: the rescue of a claim
// that exists is kept, and a claim outside the selector counts as in use.
func TestPruneKeepsTheSourceClaimsRescue(t *testing.T) {
	s := newStub()
	s.claim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "src-c", Labels: map[string]string{"workspace": "c"}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-c"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	s.claim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
	s.rescue("c1", "c", 2*time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	s.rescue("c2", "c", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	s.snaps["c1"].Annotations[inventory.AnnotationSourceUID] = "uid-src-c"
	sel, err := labels.Parse("workspace")
	if err != nil {
		t.Fatal(err)
	}
	res, err := DeleteByRetention(context.Background(), s.clients(t), Options{
		Scope:  kube.Scope{Namespaces: []string{"ws"}, WorkspaceLabel: "workspace", Selector: sel},
		Policy: stubPolicy, Retention: retention.Policy{KeepLast: 1}, MaxDeletions: 10, MaxDeletionPercent: 100})
	if err != nil {
		t.Fatal(err)
	}
	if o := byName(res)["c1"]; o.Action != ActionKept || !strings.Contains(o.Reason, "its source claim src-c exists") {
		t.Errorf("c1: %s (%s), want kept: its source claim exists", o.Action, o.Reason)
	}
	apistub.CheckRequests(t, "writes", s.Writes())
}

// TestPruneReleasesRetainContents (docs/spec.md#retention,
// docs/spec.md#retention-intent): a rescue whose content is Retain is kept
// without --delete-contents; with it, prune records its intent on the
// rescue at the resourceVersion it read, sets the content to Delete (bound
// to the rescue's UID), waits kube.ContentSettle, checks, deletes at the
// resourceVersion its own patch returned, then waits for the rescue to be
// gone and looks for its content: one that outlives it is named.
func TestPruneReleasesRetainContents(t *testing.T) {
	intent := "+" + inventory.AnnotationPruneIntent
	t.Run("without --delete-contents", func(t *testing.T) {
		s := newStub()
		s.rescue("a1", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentRetain)
		s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
		got := byName(run(t, s, s.clients(t), Options{Retention: retention.Policy{KeepLast: 1}}))
		if o := got["a1"]; o.Action != ActionKept || !strings.Contains(o.Reason, "is Retain") || o.DeletionPolicy != "Retain" {
			t.Errorf("a1: %s (%s), want kept", o.Action, o.Reason)
		}
		apistub.CheckRequests(t, "writes", s.Writes())
	})
	for _, c := range []struct {
		name   string
		setup  func(s *apiStub)
		leaked string
		want   []string
	}{
		{name: "deleted, content and all", want: []string{
			"PATCH volumesnapshots/a1 " + intent + " rv=1", "PATCH volumesnapshotcontents/content-a1 deletionPolicy=Delete",
			"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=5", "POST events Pruned",
			"GET volumesnapshots/a1", "LIST volumesnapshotcontents metadata.name=content-a1"}},
		{name: "the content outlives it", setup: func(s *apiStub) { s.leak = true }, leaked: "content-a1", want: []string{
			"PATCH volumesnapshots/a1 " + intent + " rv=1", "PATCH volumesnapshotcontents/content-a1 deletionPolicy=Delete",
			"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=5", "POST events Pruned",
			"GET volumesnapshots/a1", "LIST volumesnapshotcontents metadata.name=content-a1"}},
		{name: "the snapshot controller's update: read again, deleted at the new version", setup: func(s *apiStub) { s.controllerBump = true }, want: []string{
			"PATCH volumesnapshots/a1 " + intent + " rv=1", "PATCH volumesnapshotcontents/content-a1 deletionPolicy=Delete",
			"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=5",
			"GET volumesnapshots/a1",
			"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=7", "POST events Pruned",
			"GET volumesnapshots/a1", "LIST volumesnapshotcontents metadata.name=content-a1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits kube.ContentSettle
			s := newStub()
			s.rescue("a1", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentRetain)
			s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
			if c.setup != nil {
				c.setup(s)
			}
			cl := s.clients(t)
			got := byName(run(t, s, cl, Options{Retention: retention.Policy{KeepLast: 1, DeleteContents: true}}))
			if o := got["a1"]; o.Action != ActionPruned || o.LeakedContent != c.leaked || o.DeletionPolicy != "Retain" {
				t.Errorf("a1: %s (%s), leaked %q; want pruned, leaked %q", o.Action, o.Reason, o.LeakedContent, c.leaked)
			}
			all := s.Requests()
			apistub.CheckRequests(t, "requests after the scan's", all[2:], c.want...)
			if _, ok := s.snaps["a1"]; ok {
				t.Error("a1 is still there")
			}
			if _, ok := s.contents["content-a1"]; ok != (c.leaked != "") {
				t.Errorf("content-a1 there: %v, want %v", ok, c.leaked != "")
			}
		})
	}
}

// prunes runs prune with --keep-last 1 over a1 (the one to prune, its
// content of policy) and a2 (newer, kept), after setup.
func prunes(t *testing.T, policy snapshotv1.DeletionPolicy, setup func(s *apiStub)) (*apiStub, Outcome) {
	t.Helper()
	s := newStub()
	s.rescue("a1", "a", 2*time.Hour, policy)
	s.rescue("a2", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	if setup != nil {
		setup(s)
	}
	res := run(t, s, s.clients(t), Options{Retention: retention.Policy{KeepLast: 1, DeleteContents: true}})
	return s, byName(res)["a1"]
}

// on runs f (locked, in the stub) before the n-th request (from 1) that
// starts with prefix is served.
func on(prefix string, n int, f func(s *apiStub)) func(*apiStub, string) {
	seen := 0
	return func(s *apiStub, entry string) {
		if strings.HasPrefix(entry, prefix) {
			if seen++; seen == n {
				f(s)
			}
		}
	}
}

// TestPruneKeepsWhatChanged (docs/spec.md#retention,
// docs/spec.md#restore-protects-source): what prune finds right before the
// delete, or meets in it, keeps the rescue; a check that cannot be made is
// no check; nothing is deleted in either case.
func TestPruneKeepsWhatChanged(t *testing.T) {
	dts := metav1.NewTime(time.Now())
	for _, c := range []struct {
		name   string
		setup  func(s *apiStub)
		action string
		reason string
	}{
		{"held since it was read", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" })
			})
		}, ActionKept, "held (pvc-janitor.io/hold) since it was read"},
		{"a restore marked it since", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) {
					vs.Annotations[inventory.AnnotationRestoring] = inventory.RestoringValue("ws", "back", time.Now())
				})
			})
		}, ActionKept, "a restore is reading it"},
		{"a claim restores from it since, not Bound yet", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				g := "snapshot.storage.k8s.io"
				s.claims["back"] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "back", UID: "uid-back"},
					Spec:   corev1.PersistentVolumeClaimSpec{DataSourceRef: &corev1.TypedObjectReference{APIGroup: &g, Kind: "VolumeSnapshot", Name: "a1"}},
					Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
			})
		}, ActionKept, "claim back restores from it and is not Bound yet"},
		{"gone since it was read", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) { delete(s.snaps, "a1") })
		}, ActionKept, "gone since it was read"},
		{"another snapshot has its name", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) { s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.UID = "uid-new" }) })
		}, ActionKept, "another snapshot has its name now"},
		{"being deleted by someone else", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) { s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.DeletionTimestamp = &dts }) })
		}, ActionKept, "being deleted by someone else"},
		{"deleted between the check and the delete", func(s *apiStub) {
			s.before = on("DELETE volumesnapshots/a1", 1, func(s *apiStub) { delete(s.snaps, "a1") })
		}, ActionKept, "gone since it was read"},
		{"changed between the check and the delete", func(s *apiStub) {
			s.before = on("DELETE volumesnapshots/a1", 1, func(s *apiStub) { s.change("a1", func(*snapshotv1.VolumeSnapshot) {}) })
		}, ActionKept, "changed since it was read (delete precondition failed)"},
		{"the rescue cannot be read again", func(s *apiStub) { s.fail["GET volumesnapshots"] = []int{403} }, ActionFailed, "injected by the stub"},
		{"the claims cannot be listed again", func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) { s.fail["LIST persistentvolumeclaims"] = []int{403} })
		}, ActionFailed, "injected by the stub"},
		{"the delete is refused", func(s *apiStub) { s.fail["DELETE volumesnapshots"] = []int{403} }, ActionFailed, "injected by the stub"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, o := prunes(t, snapshotv1.VolumeSnapshotContentDelete, c.setup)
			if o.Action != c.action || !strings.Contains(o.Reason, c.reason) || (c.action == ActionFailed) != (o.Err != nil) {
				t.Errorf("a1: %s (%s, %v), want %s (%s)", o.Action, o.Reason, o.Err, c.action, c.reason)
			}
			for _, w := range s.Writes() {
				if !strings.HasPrefix(w, "DELETE volumesnapshots/a1 uid=uid-a1 rv=1") {
					t.Errorf("write %q, want none but the refused delete", w)
				}
			}
			if n := s.Count("POST events"); n != 0 {
				t.Errorf("%d Events, want none", n)
			}
		})
	}
}

// TestPruneSetsKeptContentsBack (docs/spec.md#retention-intent): a rescue
// whose content prune set to Delete and that is kept after all gets its
// content back to Retain and its intent removed, while it is still there,
// the same and not being deleted; when prune cannot record its intent
// first, it does not touch the content; when the content's patch fails,
// the intent stays for the next run.
func TestPruneSetsKeptContentsBack(t *testing.T) {
	dts := metav1.NewTime(time.Now())
	intent := "PATCH volumesnapshots/a1 +" + inventory.AnnotationPruneIntent + " rv=1"
	toDelete := "PATCH volumesnapshotcontents/content-a1 deletionPolicy=Delete"
	back := []string{"PATCH volumesnapshotcontents/content-a1 deletionPolicy=Retain", "PATCH volumesnapshots/a1 -" + inventory.AnnotationPruneIntent}
	for _, c := range []struct {
		name       string
		setup      func(s *apiStub)
		action     string
		reason     string
		writes     []string
		policy     snapshotv1.DeletionPolicy // content-a1's at the end
		intentLeft bool
	}{
		{name: "held right before the delete", setup: func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" })
			})
		}, action: ActionKept, reason: "held", writes: append([]string{intent, toDelete}, back...), policy: "Retain"},
		{name: "changed since it was read: no intent, no patch", setup: func(s *apiStub) {
			s.before = on("PATCH volumesnapshots/a1", 1, func(s *apiStub) { s.change("a1", func(*snapshotv1.VolumeSnapshot) {}) })
		}, action: ActionKept, reason: "changed since it was read; left for the next prune", writes: []string{intent}, policy: "Retain"},
		{name: "the intent is refused: no patch", setup: func(s *apiStub) { s.fail["PATCH volumesnapshots"] = []int{403} },
			action: ActionFailed, reason: "record the prune intent on it", writes: []string{intent}, policy: "Retain"},
		{name: "the content's patch is refused: the intent stays", setup: func(s *apiStub) { s.fail["PATCH volumesnapshotcontents"] = []int{403} },
			action: ActionFailed, reason: "set content content-a1 to Delete", writes: []string{intent, toDelete}, policy: "Retain", intentLeft: true},
		{name: "the controller's update, then held: kept and set back", setup: func(s *apiStub) {
			s.controllerBump = true
			s.before = on("GET volumesnapshots/a1", 2, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" })
			})
		}, action: ActionKept, reason: "held (pvc-janitor.io/hold) since it was read",
			writes: append([]string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5"}, back...), policy: "Retain"},
		{name: "the controller's update, then gone", setup: func(s *apiStub) {
			s.controllerBump = true
			s.before = on("GET volumesnapshots/a1", 2, func(s *apiStub) { delete(s.snaps, "a1") })
		}, action: ActionKept, reason: "gone since it was read",
			writes: []string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5"}, policy: "Delete"},
		{name: "the controller's update, then another snapshot of the name", setup: func(s *apiStub) {
			s.controllerBump = true
			s.before = on("GET volumesnapshots/a1", 2, func(s *apiStub) { s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.UID = "uid-new" }) })
		}, action: ActionKept, reason: "another snapshot has its name now",
			writes: []string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5"}, policy: "Delete", intentLeft: true},
		{name: "the controller's update, then being deleted: left Delete", setup: func(s *apiStub) {
			s.controllerBump = true
			s.before = on("GET volumesnapshots/a1", 2, func(s *apiStub) { s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.DeletionTimestamp = &dts }) })
		}, action: ActionKept, reason: "being deleted by someone else",
			writes: []string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5"}, policy: "Delete", intentLeft: true},
		{name: "the controller's update, then it cannot be read: left Delete with its intent", setup: func(s *apiStub) {
			s.controllerBump = true
			s.before = on("DELETE volumesnapshots/a1", 1, func(s *apiStub) { s.fail["GET volumesnapshots"] = slices.Repeat([]int{403}, 10) })
		}, action: ActionKept, reason: "cannot read it again after setting its content to Delete",
			writes: []string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5"}, policy: "Delete", intentLeft: true},
		{name: "changed three times: kept, set back", setup: func(s *apiStub) {
			s.before = func(s *apiStub, entry string) {
				if strings.HasPrefix(entry, "DELETE") || strings.HasPrefix(entry, "PATCH volumesnapshotcontents/content-a1 deletionPolicy=Delete") {
					s.change("a1", func(*snapshotv1.VolumeSnapshot) {})
				}
			}
		}, action: ActionKept, reason: "changed since it was read (delete precondition failed)",
			writes: append([]string{intent, toDelete, "DELETE volumesnapshots/a1 uid=uid-a1 rv=5", "DELETE volumesnapshots/a1 uid=uid-a1 rv=8",
				"DELETE volumesnapshots/a1 uid=uid-a1 rv=9"}, back...), policy: "Retain"},
		{name: "setting it back is refused: the intent stays", setup: func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" })
				s.fail["PATCH volumesnapshotcontents"] = []int{403}
			})
		}, action: ActionKept, reason: "held", writes: []string{intent, toDelete, back[0]}, policy: "Delete", intentLeft: true},
		{name: "the intent's removal is refused", setup: func(s *apiStub) {
			s.before = on("GET volumesnapshots/a1", 1, func(s *apiStub) {
				s.change("a1", func(vs *snapshotv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" })
				s.fail["PATCH volumesnapshots"] = []int{403}
			})
		}, action: ActionKept, reason: "held", writes: append([]string{intent, toDelete}, back...), policy: "Retain", intentLeft: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each waits kube.ContentSettle
			s, o := prunes(t, snapshotv1.VolumeSnapshotContentRetain, c.setup)
			if o.Action != c.action || !strings.Contains(o.Reason, c.reason) {
				t.Errorf("a1: %s (%s), want %s (%s)", o.Action, o.Reason, c.action, c.reason)
			}
			apistub.CheckRequests(t, "writes", s.Writes(), c.writes...)
			if vc := s.contents["content-a1"]; vc == nil || vc.Spec.DeletionPolicy != c.policy {
				t.Errorf("content-a1: %+v, want %s", vc, c.policy)
			}
			if vs := s.snaps["a1"]; vs != nil {
				if _, ok := vs.Annotations[inventory.AnnotationPruneIntent]; ok != c.intentLeft {
					t.Errorf("a1's intent there: %v, want %v", ok, c.intentLeft)
				}
			}
		})
	}
}

// TestPruneInterruptedBeforeTheDelete: a run cancelled while it readies
// the contents deletes nothing; the content it had set to Delete goes back
// to Retain (unpatch outlives the cancellation) and its intent is removed.
func TestPruneInterruptedBeforeTheDelete(t *testing.T) {
	s := newStub()
	s.rescue("a1", "a", 3*time.Hour, snapshotv1.VolumeSnapshotContentRetain)
	s.rescue("a2", "a", 2*time.Hour, snapshotv1.VolumeSnapshotContentRetain)
	s.rescue("a3", "a", time.Hour, snapshotv1.VolumeSnapshotContentDelete)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.before = on("PATCH volumesnapshots/a2 +", 1, func(*apiStub) { cancel() })
	res, err := DeleteByRetention(ctx, s.clients(t), Options{Scope: kube.Scope{Namespaces: []string{"ws"}, WorkspaceLabel: "workspace"}, Policy: stubPolicy,
		Retention: retention.Policy{KeepLast: 1, DeleteContents: true}, MaxDeletions: 10, MaxDeletionPercent: 100})
	if err != nil {
		t.Fatal(err)
	}
	got := byName(res)
	if o := got["a1"]; o.Action != ActionFailed || !strings.Contains(o.Reason, "interrupted before the delete") || !errors.Is(o.Err, context.Canceled) {
		t.Errorf("a1: %s (%s), want failed: interrupted", o.Action, o.Reason)
	}
	if o := got["a2"]; o.Action != ActionFailed {
		t.Errorf("a2: %s (%s), want failed", o.Action, o.Reason)
	}
	if n := s.Count("DELETE"); n != 0 {
		t.Errorf("%d DELETEs, want none: %v", n, s.Requests())
	}
	if p := s.contents["content-a1"].Spec.DeletionPolicy; p != snapshotv1.VolumeSnapshotContentRetain {
		t.Errorf("content-a1 is %s, want Retain again", p)
	}
	if _, ok := s.snaps["a1"].Annotations[inventory.AnnotationPruneIntent]; ok {
		t.Error("a1 keeps its intent")
	}
}

// TestPruneSettlesIntents (docs/spec.md#retention-intent): the intent an
// earlier, unfinished prune left on a kept rescue is settled first: its
// content back to Retain, then the intent removed; a failure leaves it for
// the next run, never the intent without its content set back.
func TestPruneSettlesIntents(t *testing.T) {
	back := []string{"PATCH volumesnapshotcontents/content-a1 deletionPolicy=Retain", "PATCH volumesnapshots/a1 -" + inventory.AnnotationPruneIntent}
	for _, c := range []struct {
		name       string
		policy     snapshotv1.DeletionPolicy
		fail       string
		writes     []string
		intentLeft bool
	}{
		{"a Delete content goes back to Retain", snapshotv1.VolumeSnapshotContentDelete, "", back, false},
		{"a Retain content: only the intent goes", snapshotv1.VolumeSnapshotContentRetain, "", back[1:], false},
		{"setting it back is refused: the intent stays", snapshotv1.VolumeSnapshotContentDelete, "PATCH volumesnapshotcontents", back[:1], true},
		{"removing the intent is refused", snapshotv1.VolumeSnapshotContentDelete, "PATCH volumesnapshots", back, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStub()
			s.rescue("a1", "a", 2*time.Hour, c.policy)
			s.snaps["a1"].Annotations[inventory.AnnotationPruneIntent] = "2026-01-01T00:00:00Z"
			if c.fail != "" {
				s.fail[c.fail] = []int{403}
			}
			got := byName(run(t, s, s.clients(t), Options{Retention: retention.Policy{KeepLast: 5}}))
			if got["a1"].Action != ActionKept {
				t.Errorf("a1: %+v, want kept", got["a1"])
			}
			apistub.CheckRequests(t, "writes", s.Writes(), c.writes...)
			if _, ok := s.snaps["a1"].Annotations[inventory.AnnotationPruneIntent]; ok != c.intentLeft {
				t.Errorf("a1's intent there: %v, want %v", ok, c.intentLeft)
			}
		})
	}
}

// TestPruneLostResponse (docs/spec.md#retention-lost-response): a delete
// whose response was lost is retried, and the retry's check finds the
// rescue gone, or the same rescue being deleted (the snapshot controller's
// finalizers hold it): that is this prune's deletion, reported pruned with
// its Event, not kept.
func TestPruneLostResponse(t *testing.T) {
	for _, c := range []struct {
		name      string
		finalized bool
		want      []string
	}{
		{"gone at the retry", false, []string{"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=1",
			"GET volumesnapshots/a1", "POST events Pruned"}},
		{"being deleted at the retry", true, []string{"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "DELETE volumesnapshots/a1 uid=uid-a1 rv=1",
			"GET volumesnapshots/a1", "LIST persistentvolumeclaims", "POST events Pruned"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, o := prunes(t, snapshotv1.VolumeSnapshotContentDelete, func(s *apiStub) { s.lose, s.finalized = 1, c.finalized })
			if o.Action != ActionPruned || !strings.Contains(o.Reason, "the response to the delete was lost") || o.Err != nil {
				t.Errorf("a1: %s (%s, %v), want pruned: the response was lost", o.Action, o.Reason, o.Err)
			}
			all := s.Requests()
			apistub.CheckRequests(t, "requests after the scan's", all[2:], c.want...)
		})
	}
}

// TestPruneWritesDownTheUsesItSaw (docs/spec.md#rule-last-used, safety
// row 40.P): prune's read shows pod ide-a using ws-a, which still carries
// the janitor's orphaned-since mark. After its deletes prune writes the use
// down, as the scan does: one PATCH of ws-a removing the mark and setting
// last-used. ws-b, marked and idle, gets no request. (The stub does not
// serve claim patches; what is pinned is what prune sends.)
func TestPruneWritesDownTheUsesItSaw(t *testing.T) {
	s := newStub()
	marked := map[string]string{inventory.AnnotationOrphanedSince: time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	for _, name := range []string{"ws-a", "ws-b"} {
		s.claim(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"workspace": name[3:]},
			Annotations: marked, CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * time.Hour))},
			Spec:   corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	}
	s.pods = []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "ide-a", Namespace: "ws", UID: "uid-ide-a"},
		Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{{Name: "home",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ws-a"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}}
	run(t, s, s.clients(t), Options{Retention: retention.Policy{KeepLast: 1}})
	var patches []string
	for _, e := range s.Requests() {
		if strings.HasPrefix(e, "PATCH persistentvolumeclaims") {
			patches = append(patches, e)
		}
	}
	if len(patches) == 0 || !strings.Contains(patches[0], "ws-a") || !strings.Contains(patches[0], inventory.AnnotationLastUsed) {
		t.Fatalf("prune's claim patches: %q; want ws-a's, writing down its use (last-used)", patches)
	}
	for _, p := range patches {
		if strings.Contains(p, "ws-b") {
			t.Errorf("prune patched ws-b, which no pod uses: %s", p)
		}
	}
}
