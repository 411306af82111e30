package reap

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// TestReapable is the first rule of docs/spec.md#reap-only-rescued: rescued (or superseded under
// discard) and orphaned for at least the grace period on the server clock.
func TestReapable(t *testing.T) {
	grace := 30 * time.Minute
	now := t0.Add(time.Hour)
	for _, c := range []struct {
		name    string
		state   classify.State
		since   *time.Time
		discard bool
		grace   time.Duration
		now     time.Time
		want    bool
	}{
		{"rescued, orphaned an hour ago", classify.Rescued, at(0), false, grace, now, true},
		{"rescued, orphaned exactly the grace period ago", classify.Rescued, at(30 * time.Minute), false, grace, now, true},
		// Path 5: a foreign snapshot taken a minute after the mark makes the
		// claim Rescued, but never shortens the grace period.
		{"rescued by a foreign snapshot, marked a minute ago", classify.Rescued, at(59 * time.Minute), false, grace, now, false},
		{"rescued, one second short of the grace period", classify.Rescued, at(30*time.Minute + time.Second), false, grace, now, false},
		{"rescued, orphaned-since unknown", classify.Rescued, nil, false, grace, now, false},
		{"rescued, no server time", classify.Rescued, at(0), false, grace, time.Time{}, false},
		{"rescued, grace 0s, orphaned now", classify.Rescued, at(time.Hour), false, 0, now, true},
		{"rescued, orphaned-since in the future (skew)", classify.Rescued, at(2 * time.Hour), false, 0, now, false},
		{"superseded under discard, durable evidence, past grace", classify.Superseded, at(0), true, grace, now, true},
		{"superseded under discard, durable evidence, within grace", classify.Superseded, at(50 * time.Minute), true, grace, now, false},
		{"superseded without discard", classify.Superseded, at(0), false, grace, now, false},
		// Path 8: weak evidence (a Pending newer claim, someone else's
		// snapshot, one not intact) never justifies a discard.
		{"superseded under discard, weak evidence", classify.Superseded, at(0), true, grace, now, false},
		{"orphaned (not rescued)", classify.Orphaned, at(0), true, grace, now, false},
		{"snapshotting", classify.Snapshotting, at(0), true, grace, now, false},
		{"in use", classify.InUse, nil, true, grace, now, false},
		{"held", classify.Held, at(0), true, grace, now, false},
		{"terminating", classify.Terminating, at(0), true, grace, now, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &classify.Decision{State: c.state, OrphanedSince: c.since, Discard: !strings.Contains(c.name, "weak evidence")}
			if got := Reapable(d, c.discard, c.grace, c.now); got != c.want {
				t.Fatalf("Reapable = %v, want %v", got, c.want)
			}
			if !c.want && notReapableReason(d, c.discard, c.grace, c.now) == "" {
				t.Fatal("no reason for a claim that is not reapable")
			}
		})
	}
}

// TestReapableUnderNotice: docs/spec.md#notice: a rescued claim past its
// grace period is reaped only once its owner's notice (or snooze) ended;
// never in the run whose scan begins the notice, nor when its end is not
// known.
func TestReapableUnderNotice(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, c := range []struct {
		name      string
		notBefore *time.Time
		begins    bool // the scan writes the mark now
		want      bool
		reason    string
	}{
		{"the notice ended", at(0), false, true, ""},
		{"the notice ends exactly now", at(time.Hour), false, true, ""},
		{"the notice runs a second more", at(time.Hour + time.Second), false, false, "its owner's notice runs until"},
		{"the notice begins in this run", at(0), true, false, "its owner's notice runs until"},
		{"the notice's end is not known", nil, false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &classify.Decision{State: classify.Rescued, OrphanedSince: at(0), Notice: true, NotBefore: c.notBefore}
			if c.begins {
				d.Marks.ReapAfter = classify.Set
			}
			if got := Reapable(d, false, 0, now); got != c.want {
				t.Fatalf("Reapable = %v, want %v", got, c.want)
			}
			if why := notReapableReason(d, false, 0, now); !c.want && !strings.Contains(why, c.reason) {
				t.Errorf("reason %q, want %q", why, c.reason)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		n, total, max int
		pct           float64
		want          string
	}{
		{3, 10, 3, 30, ""},
		{4, 10, 3, 100, "over --max-deletions 3"},
		{3, 10, 50, 25, "3 of 10 claims in scope (30.0%)"},
		{0, 0, 0, 0, ""},
	} {
		got := Limit(c.n, c.total, c.max, c.pct)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("Limit(%d, %d, %d, %g) = %q, want %q", c.n, c.total, c.max, c.pct, got, c.want)
		}
	}
	if got, want := LimitOf("rescues", 3, 10, 50, 25), "blast radius: 3 of 10 rescues in scope (30.0%) would be deleted"; !strings.HasPrefix(got, want) {
		t.Errorf("LimitOf(rescues) = %q, want it to start %q", got, want)
	}
}

// TestSettle: a delete whose response was lost is settled by a read of the
// claim (docs/spec.md#reap); only a claim that may have been deleted by us counts.
func TestSettle(t *testing.T) {
	const uid = types.UID("u-1")
	live := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: uid}}
	dts := metav1.NewTime(t0)
	terminating := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: uid, DeletionTimestamp: &dts}}
	other := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "u-2"}}
	otherTerminating := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: "u-2", DeletionTimestamp: &dts}}
	for _, c := range []struct {
		name         string
		maybeApplied bool
		cur          *corev1.PersistentVolumeClaim
		want         Verdict
	}{
		{"response lost, then 404: our delete removed it", true, nil, Deleted},
		{"response lost, then 409: ours set the deletionTimestamp", true, terminating, Deleted},
		{"response lost, another claim under the name", true, other, Replaced},
		{"response lost, another claim under the name, terminating", true, otherTerminating, Replaced},
		{"response lost, claim live and changed", true, live, Changed},
		{"first answer 404: someone else deleted it", false, nil, Gone},
		{"first answer 409, terminating: someone else's deletion", false, terminating, Terminating},
		{"first answer 409, replaced", false, other, Replaced},
		{"first answer 409, live: changed", false, live, Changed},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Settle(uid, c.maybeApplied, c.cur); got != c.want {
				t.Fatalf("Settle = %v, want %v", got, c.want)
			}
		})
	}
}

func baseClaim() *corev1.PersistentVolumeClaim {
	sc := "csi"
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ws-a", UID: "u-1", ResourceVersion: "10",
			Labels:        map[string]string{"workspace": "a", "pvc-janitor.io/phase": "Rescued"},
			Annotations:   map[string]string{"pvc-janitor.io/orphaned-since": "2026-01-02T03:00:00Z"},
			Finalizers:    []string{"kubernetes.io/pvc-protection", "snapshot.storage.kubernetes.io/pvc-as-source-protection"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       "pv-1",
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Phase:    corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []corev1.PersistentVolumeClaimCondition{
				{Type: "Unused", Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			},
		},
	}
}

// TestUnrelated: after a failed delete precondition, only finalizers,
// managed fields, resourceVersion and use-unrelated conditions may have
// changed for the delete to be retried (docs/spec.md#reap).
func TestUnrelated(t *testing.T) {
	dts := metav1.NewTime(t0.Add(time.Hour))
	for _, c := range []struct {
		name   string
		change func(p *corev1.PersistentVolumeClaim)
		want   bool
		why    string
	}{
		{"nothing but the resourceVersion", func(p *corev1.PersistentVolumeClaim) { p.ResourceVersion = "11" }, true, ""},
		{"the snapshot controller dropped its finalizer", func(p *corev1.PersistentVolumeClaim) {
			p.ResourceVersion, p.Finalizers = "11", []string{"kubernetes.io/pvc-protection"}
		}, true, ""},
		{"a finalizer added", func(p *corev1.PersistentVolumeClaim) { p.Finalizers = append(p.Finalizers, "example.com/x") }, true, ""},
		{"managed fields", func(p *corev1.PersistentVolumeClaim) {
			p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: "snapshot-controller"})
		}, true, ""},
		{"a Resizing condition appeared", func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue})
		}, true, ""},
		{"UID (recreated)", func(p *corev1.PersistentVolumeClaim) { p.UID = "u-2" }, false, "another claim"},
		{"deletionTimestamp (someone deletes it)", func(p *corev1.PersistentVolumeClaim) { p.DeletionTimestamp = &dts }, false, "being deleted"},
		{"a label", func(p *corev1.PersistentVolumeClaim) { p.Labels["pvc-janitor.io/hold"] = "true" }, false, "labels"},
		{"a label removed", func(p *corev1.PersistentVolumeClaim) { delete(p.Labels, "workspace") }, false, "labels"},
		{"an annotation", func(p *corev1.PersistentVolumeClaim) { p.Annotations["example.com/owner"] = "x" }, false, "annotations"},
		{"the mark removed", func(p *corev1.PersistentVolumeClaim) { p.Annotations = nil }, false, "annotations"},
		{"an owner reference", func(p *corev1.PersistentVolumeClaim) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "ide", UID: "p-1"}}
		}, false, "owner"},
		{"spec (resize request)", func(p *corev1.PersistentVolumeClaim) {
			p.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, false, "spec"},
		{"Unused turned False (a pod uses it)", func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
		}, false, "Unused"},
		{"Unused lastTransitionTime moved forward (used and released)", func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
		}, false, "Unused"},
		{"Unused condition dropped", func(p *corev1.PersistentVolumeClaim) { p.Status.Conditions = nil }, false, "status"},
		{"another condition (unknown type)", func(p *corev1.PersistentVolumeClaim) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PersistentVolumeClaimCondition{Type: "FileSystemResizePending", Status: corev1.ConditionTrue})
		}, false, "status"},
		{"status phase", func(p *corev1.PersistentVolumeClaim) { p.Status.Phase = corev1.ClaimLost }, false, "status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, after := baseClaim(), baseClaim()
			c.change(after)
			got, why := Unrelated(before, after)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("Unrelated = %v (%q), want %v (%q)", got, why, c.want, c.why)
			}
		})
	}
}
