package rescue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// The snapshots' I/O: create (or find) one, delete one, wait until one is
// gone.

// sleep is retry.Sleep, the one context-bound sleep: the content's settle
// below and the clock's wait of a round (claim.go).
var sleep = retry.Sleep

var errConflict = errors.New("name conflict")

// rescueAnnotations are what a rescue (or archive) of the claim decided by
// d records: its source, its orphaned-since, the attempt, and for a
// restored claim the data time it was restored from, so that the line the
// rescue carries reaches no further once the claim is gone
// (docs/spec.md#rule-restored-data-time).
func rescueAnnotations(d *classify.Decision, attempt int) map[string]string {
	cl := d.Claim
	a := map[string]string{
		inventory.AnnotationSourceUID:     string(cl.UID),
		inventory.AnnotationSourceName:    cl.Name,
		inventory.AnnotationOrphanedSince: d.OrphanedSince.UTC().Format(time.RFC3339),
		inventory.Prefix + "attempt":      fmt.Sprint(attempt),
	}
	if rt, ok := classify.RestoredDataTime(cl); ok {
		a[inventory.AnnotationRestoredDataTime] = rt.UTC().Format(time.RFC3339)
	}
	return a
}

// errDeleting: the snapshot of that name is ours but being deleted.
var errDeleting = errors.New("the snapshot is being deleted")

// ensure creates the snapshot, or finds the one an earlier run (or attempt)
// made. isNew reports whether this call created it.
//
// from is the claim as the re-check read it (nil: not in that read): its
// template is recorded without a read of its own.
func (r *rescuer) ensure(ctx context.Context, d *classify.Decision, name, class string, archive bool, attempt int, from *corev1.PersistentVolumeClaim) (*snapv1.VolumeSnapshot, bool, error) {
	cl := d.Claim
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cl.Namespace,
			Name:        name,
			Labels:      map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue},
			Annotations: r.annotations(d, attempt),
		},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &cl.Name},
			VolumeSnapshotClassName: &class,
		},
	}
	if r.o.WorkspaceLabel != "" && d.Workspace != "" {
		vs.Labels[r.o.WorkspaceLabel] = d.Workspace
	}
	if from != nil && from.UID == cl.UID {
		recordTemplate(ctx, from, vs)
	} else if err := r.template(ctx, cl, vs); err != nil {
		return nil, false, err
	}
	if archive {
		vs.Labels[inventory.LabelSuperseded] = "true"
	}
	var got *snapv1.VolumeSnapshot
	err := r.c.Retry.Do(ctx, "create VolumeSnapshot "+cl.Namespace+"/"+name, func(ctx context.Context) error {
		var err error
		got, err = r.c.Snap.SnapshotV1().VolumeSnapshots(cl.Namespace).Create(ctx, vs, metav1.CreateOptions{})
		return err
	})
	if err == nil {
		return got, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, err
	}
	got, err = r.getSnapshot(ctx, cl.Namespace, name)
	if err != nil {
		return nil, false, err
	}
	if got == nil {
		// Gone between the create and the get: create it again (after
		// the next re-check).
		return &snapv1.VolumeSnapshot{}, false, errDeleting
	}
	if types.UID(got.Annotations[inventory.AnnotationSourceUID]) != cl.UID {
		return nil, false, fmt.Errorf("%w: VolumeSnapshot %s exists but is not this claim's (its %s is %q): nothing was overwritten",
			errConflict, name, inventory.AnnotationSourceUID, got.Annotations[inventory.AnnotationSourceUID])
	}
	if got.DeletionTimestamp != nil {
		return got, false, errDeleting
	}
	return got, false, nil
}

// remove deletes one snapshot of ours (the one looked at: UID precondition)
// and waits until it is gone, so that the name is free again and its
// finalizers are released.
//
// Its VolumeSnapshotContent, when Retain, outlives it (docs/spec.md#retention): with
// --delete-contents it is set to Delete first (only while bound to this
// snapshot's UID), and the snapshot controller is given kube.ContentSettle
// to see that; a content that still outlives its snapshot (without the
// grant, or judged by the controller before the patch) is returned by name,
// for the report's leakedContents.
func (r *rescuer) remove(ctx context.Context, ns, name string, uid types.UID) (string, error) {
	content := ""
	if vs, err := r.getSnapshot(ctx, ns, name); err == nil && vs != nil && vs.UID == uid {
		if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
			content = *vs.Status.BoundVolumeSnapshotContentName
		} else {
			// Not bound yet in the snapshot's status, but the controller
			// may have made its content already: it names a dynamic
			// snapshot's content after the snapshot's UID, and finds it
			// by that name when the snapshot is deleted.
			content = dynamicContentName(uid)
		}
	}
	if content != "" && r.o.DeleteContents {
		// Only a Retain one is patched (and waited for): a Delete one goes
		// with its snapshot anyway, and one not made yet has nothing to set.
		if ct, err := r.getContent(ctx, content); err == nil && ct != nil && ct.DeletionPolicy == string(snapv1.VolumeSnapshotContentRetain) {
			if err := r.recordIntent(ctx, ns, name, uid); err != nil {
				// No record, no Delete: the snapshot still goes, and its
				// Retain content is reported as left behind.
				zerolog.Ctx(ctx).Warn().Err(err).Str("content", content).Msg("record the intent before setting the content to Delete; left Retain")
			} else {
				err := kube.SetContentDelete(ctx, r.c, content, uid)
				if err != nil && !apierrors.IsNotFound(err) {
					zerolog.Ctx(ctx).Warn().Err(err).Str("content", content).Msg("set the content to Delete before deleting its snapshot")
				}
				if err == nil && !sleep(ctx, kube.ContentSettle) {
					return "", ctx.Err()
				}
			}
		}
	}
	err := r.c.Retry.Do(ctx, "delete VolumeSnapshot "+ns+"/"+name, func(ctx context.Context) error {
		return r.c.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	// NotFound: already gone. Conflict: the UID differs, so ours is gone
	// and another took the name.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return "", err
	}
	if err := r.gone(ctx, ns, name, uid); err != nil {
		return "", err
	}
	if content == "" {
		return "", nil
	}
	left, err := kube.ContentLeft(ctx, r.c, content, uid)
	if err != nil || !left {
		return "", nil
	}
	return content, nil
}

// recordIntent writes pvc-janitor.io/prune-intent on the snapshot with
// uid before its content is set to Delete, as prune does
// (docs/spec.md#retention-intent): a run killed between that patch and the
// delete leaves a record, and the next run that writes sets the content
// back to Retain if the snapshot is still there, as when a failed attempt
// becomes ready after all and is a rescue like any other.
func (r *rescuer) recordIntent(ctx context.Context, ns, name string, uid types.UID) error {
	now := r.c.Clock.Latest()
	if now.IsZero() {
		return errors.New("the API server sent no Date header: cannot date the intent")
	}
	s := inventory.Snapshot{Namespace: ns, Name: name, UID: uid}
	_, err := kube.AnnotateSnapshot(ctx, r.c, &s, "", inventory.AnnotationPruneIntent, now.UTC().Format(time.RFC3339))
	return err
}

// dynamicContentName is the name the snapshot controller gives the content
// of the dynamic snapshot with uid (GetDynamicSnapshotContentNameForSnapshot
// in external-snapshotter).
func dynamicContentName(uid types.UID) string { return "snapcontent-" + string(uid) }

// gone waits, bounded by --snapshot-timeout, until the snapshot with this
// UID no longer exists.
func (r *rescuer) gone(ctx context.Context, ns, name string, uid types.UID) error {
	return kube.WaitSnapshotGone(ctx, r.c, ns, name, uid, time.Now().Add(r.o.Timeout))
}

// getSnapshot reads a snapshot; nil when it is gone.
func (r *rescuer) getSnapshot(ctx context.Context, ns, name string) (*snapv1.VolumeSnapshot, error) {
	return kube.GetSnapshot(ctx, r.c, ns, name)
}

// getContent reads a VolumeSnapshotContent by name (a get); nil when it
// does not exist.
func (r *rescuer) getContent(ctx context.Context, name string) (*inventory.Content, error) {
	vc, err := kube.GetContent(ctx, r.c, name)
	if err != nil || vc == nil {
		return nil, err
	}
	c := kube.Content(vc)
	return &c, nil
}

// errReplaced: the claim is gone, or another claim has its name, since the
// re-check: a snapshot by name would be of another claim's data.
var errReplaced = errors.New("the claim was deleted or replaced since the re-check")

// template records the claim the rescue comes from (docs/spec.md#rescue) on vs, from a
// re-read that also proves the name still belongs to the claim. A read
// that fails leaves the rescue without a template (a restore then needs
// --storage-class and --size), logged: the rescue matters more.
func (r *rescuer) template(ctx context.Context, cl *inventory.Claim, vs *snapv1.VolumeSnapshot) error {
	p, err := r.getClaim(ctx, cl)
	switch {
	case err == nil && p == nil:
		return errReplaced
	case err != nil:
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the claim for its template; the rescue carries none")
		return nil
	case p.UID != cl.UID:
		return errReplaced
	}
	recordTemplate(ctx, p, vs)
	return nil
}

// recordTemplate records p's template on vs (docs/spec.md#rescue-claim-template).
func recordTemplate(ctx context.Context, p *corev1.PersistentVolumeClaim, vs *snapv1.VolumeSnapshot) {
	data, dropped, err := restore.NewTemplate(p)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("claim template; the rescue carries none")
		return
	}
	vs.Annotations[restore.AnnotationTemplate] = data
	if len(dropped) > 0 {
		vs.Annotations[restore.AnnotationTemplateDropped] = strings.Join(dropped, ",")
		zerolog.Ctx(ctx).Warn().Strs("dropped", dropped).Msg("claim template over 16 KiB: annotations dropped")
	}
}

// getClaim reads the claim of cl's name; nil, and no error, when there is none.
func (r *rescuer) getClaim(ctx context.Context, cl *inventory.Claim) (*corev1.PersistentVolumeClaim, error) {
	var p *corev1.PersistentVolumeClaim
	err := r.c.Retry.Do(ctx, "get claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		var err error
		p, err = r.c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, err
}
