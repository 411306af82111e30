package prune

import (
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestStillPrunable (docs/spec.md#restore-protects-source): one row per
// thing the read right before a rescue's delete can find.
func TestStillPrunable(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snap := func(f func(*snapv1.VolumeSnapshot)) *snapv1.VolumeSnapshot {
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", UID: "uid-r",
			Annotations: map[string]string{}, Labels: map[string]string{}}}
		if f != nil {
			f(vs)
		}
		return vs
	}
	restoring := func(at time.Time) func(*snapv1.VolumeSnapshot) {
		return func(vs *snapv1.VolumeSnapshot) {
			vs.Annotations[inventory.AnnotationRestoring] = inventory.RestoringValue("ns", "back", at)
		}
	}
	claim := func(name, from string, phase corev1.PersistentVolumeClaimPhase, legacy bool) corev1.PersistentVolumeClaim {
		p := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if legacy {
			p.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: from}
		} else {
			p.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "VolumeSnapshot", Name: from}
		}
		return p
	}
	deleting := metav1.NewTime(now)
	for _, c := range []struct {
		name   string
		vs     *snapv1.VolumeSnapshot
		claims []corev1.PersistentVolumeClaim
		ok     bool
		why    string
	}{
		{name: "unchanged, no restore", vs: snap(nil), ok: true},
		{name: "gone", vs: nil, why: "gone since it was read"},
		{name: "another snapshot of the name", vs: snap(func(vs *snapv1.VolumeSnapshot) { vs.UID = "uid-other" }), why: "another snapshot"},
		{name: "being deleted", vs: snap(func(vs *snapv1.VolumeSnapshot) { vs.DeletionTimestamp = &deleting }), why: "being deleted"},
		{name: "held since (label)", vs: snap(func(vs *snapv1.VolumeSnapshot) { vs.Labels[inventory.KeyHold] = "true" }), why: "held"},
		{name: "held since (annotation)", vs: snap(func(vs *snapv1.VolumeSnapshot) { vs.Annotations[inventory.KeyHold] = "true" }), why: "held"},
		{name: "a restore's mark, a minute old", vs: snap(restoring(now.Add(-time.Minute))), why: "a restore is reading it"},
		{name: "a restore's mark, just under a day old", vs: snap(restoring(now.Add(-inventory.RestoringFor + time.Second))), why: "a restore is reading it"},
		{name: "a restore's mark, a day old: no longer keeps it", vs: snap(restoring(now.Add(-inventory.RestoringFor))), ok: true},
		{name: "a mark that cannot be dated keeps it", vs: snap(func(vs *snapv1.VolumeSnapshot) { vs.Annotations[inventory.AnnotationRestoring] = "by hand" }), why: "a restore is reading it"},
		{name: "a stale mark, but a Pending claim restores from it", vs: snap(restoring(now.Add(-48 * time.Hour))),
			claims: []corev1.PersistentVolumeClaim{claim("back", "r", corev1.ClaimPending, false)}, why: "claim back restores from it and is not Bound yet"},
		{name: "a Pending claim restores from it (dataSource)", vs: snap(nil),
			claims: []corev1.PersistentVolumeClaim{claim("old", "r", corev1.ClaimPending, true)}, why: "claim old restores from it"},
		{name: "a claim restoring from it is Bound", vs: snap(nil),
			claims: []corev1.PersistentVolumeClaim{claim("back", "r", corev1.ClaimBound, false)}, ok: true},
		{name: "a Pending claim restores from another snapshot", vs: snap(nil),
			claims: []corev1.PersistentVolumeClaim{claim("back", "r2", corev1.ClaimPending, false)}, ok: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, why := StillPrunable("uid-r", c.vs, c.claims, now)
			if ok != c.ok || !strings.Contains(why, c.why) || (!ok && why == "") {
				t.Errorf("StillPrunable = %v, %q; want %v, %q", ok, why, c.ok, c.why)
			}
		})
	}
}
