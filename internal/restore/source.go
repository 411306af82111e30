package restore

import (
	"context"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// markSource marks the plan's snapshot as the source of a restore before
// the claim is created (docs/spec.md#restore-protects-source): a prune that
// read the namespace before the claim existed then sees the mark in its
// read right before the delete, or fails the delete's resourceVersion
// precondition. A snapshot being deleted by then is no source: refused.
func markSource(ctx context.Context, c *kube.Clients, plan *Result, opts Options) (string, error) {
	s := plan.Snapshot
	v := inventory.RestoringValue(plan.Claim.Namespace, plan.Claim.Name, c.Clock.Latest())
	vs, err := kube.AnnotateSnapshot(ctx, c, &s.Snapshot, "", inventory.AnnotationRestoring, v)
	switch {
	case apierrors.IsNotFound(err):
		return "", &Refusal{Reason: "snapshot " + s.Namespace + "/" + s.Name + " is gone since it was read"}
	case apierrors.IsInvalid(err):
		return "", &Refusal{Reason: "snapshot " + s.Namespace + "/" + s.Name + " is another snapshot since it was read"}
	case err != nil:
		return "", err
	case vs.DeletionTimestamp != nil:
		return "", &Refusal{Reason: "snapshot " + s.Namespace + "/" + s.Name + " is being deleted: nothing to restore from"}
	}
	return v, nil
}

// unmarkSource removes the restore's mark once its claim is Bound, only
// while it is still this restore's (another restore may have marked it
// since). A failure is logged: the mark expires (RestoringFor).
func unmarkSource(ctx context.Context, c *kube.Clients, plan *Result, v string, opts Options) {
	s := plan.Snapshot
	if err := kube.UnannotateSnapshot(ctx, c, &s.Snapshot, inventory.AnnotationRestoring, v); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("namespace", s.Namespace).Str("snapshot", s.Name).
			Msg("remove the restoring mark from the restored snapshot: it keeps prune away until it expires")
	}
}
