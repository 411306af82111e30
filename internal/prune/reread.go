package prune

import (
	"context"
	"errors"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
)

// StillPrunable decides, from a re-read of the rescue (vs, nil when
// gone) and of its namespace's claims, right before the rescue's delete,
// whether prune may still delete the rescue with uid at now (the server's
// clock): the same snapshot, not being deleted, not held, not the source
// of a restore (a pvc-janitor.io/restoring mark younger than
// inventory.RestoringFor, or one that cannot be dated) and not restored from
// by a claim that is not Bound yet (docs/spec.md#restore-protects-source).
func StillPrunable(uid types.UID, vs *snapv1.VolumeSnapshot, claims []corev1.PersistentVolumeClaim, now time.Time) (bool, string) {
	switch {
	case vs == nil:
		return false, "gone since it was read"
	case vs.UID != uid:
		return false, "another snapshot has its name now"
	case vs.DeletionTimestamp != nil:
		return false, "being deleted by someone else"
	case inventory.HeldBy(vs.Labels, vs.Annotations):
		return false, "held (pvc-janitor.io/hold) since it was read"
	}
	if v := vs.Annotations[inventory.AnnotationRestoring]; inventory.RestoringBlocks(v, now) {
		return false, "a restore is reading it (pvc-janitor.io/restoring: " + v + ")"
	}
	for i := range claims {
		if p := &claims[i]; restoresFrom(p) == vs.Name && p.Status.Phase != corev1.ClaimBound {
			return false, "claim " + p.Name + " restores from it and is not Bound yet"
		}
	}
	return true, ""
}

// stillPrunable reads the rescue (one get) and its namespace's claims (one
// list) again and fails with a reap.RereadRefusal unless StillPrunable
// (Gone: the rescue is gone or being deleted, which a delete of this run's
// whose response was lost ends in too). A failed read is
// returned as it is: nothing is deleted on a check that did not happen.
func stillPrunable(ctx context.Context, c *kube.Clients, s inventory.Snapshot) error {
	vs, err := c.Snap.SnapshotV1().VolumeSnapshots(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		vs, err = nil, nil
	}
	if err != nil {
		return err
	}
	var claims []corev1.PersistentVolumeClaim
	if vs != nil {
		l, err := c.Kube.CoreV1().PersistentVolumeClaims(s.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		claims = l.Items
	}
	if ok, why := StillPrunable(s.UID, vs, claims, c.Clock.Latest()); !ok {
		return &reap.RereadRefusal{Why: why, Gone: vs == nil || (vs.UID == s.UID && vs.DeletionTimestamp != nil)}
	}
	return nil
}

// mayHaveApplied reports whether a failed delete may still have been
// applied: everything but a clean answer that refuses it (4xx, 429
// included), as reap judges its own.
func mayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		code := s.Status().Code
		return code == 0 || code >= 500
	}
	return true // no answer: a timeout, a reset, a cancelled call
}
