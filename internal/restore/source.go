package restore

import (
	"context"
	"strings"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// RestoringFor is how long a pvc-janitor.io/restoring mark keeps its
// snapshot from prune on its own (docs/spec.md#restore-protects-source). A
// restore removes its mark once its claim is Bound; one killed before
// that leaves it. Past this age a mark no longer blocks prune, and what
// keeps the snapshot is the claim that is not yet Bound and restores from
// it, if there is one. A day is far longer than any --restore-timeout, and
// short enough that a killed restore never keeps a rescue for good.
const RestoringFor = 24 * time.Hour

// RestoringValue is a restore's mark: which claim it creates, and when (the
// server's clock).
func RestoringValue(ns, claim string, at time.Time) string {
	return ns + "/" + claim + "@" + at.UTC().Format(time.RFC3339)
}

// RestoringSince is when the mark v was set; ok is false when v does not
// parse (written by hand, say): such a mark keeps the snapshot as a hold does.
func RestoringSince(v string) (time.Time, bool) {
	i := strings.LastIndex(v, "@")
	if i < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v[i+1:])
	return t, err == nil
}

// RestoringBlocks reports whether a mark v protects its snapshot at now
// (the server's clock): it is younger than RestoringFor, or cannot be dated.
func RestoringBlocks(v string, now time.Time) bool {
	if v == "" {
		return false
	}
	t, ok := RestoringSince(v)
	return !ok || now.Sub(t) < RestoringFor
}

// markSource marks the plan's snapshot as the source of a restore before
// the claim is created (docs/spec.md#restore-protects-source): a prune that
// read the namespace before the claim existed then sees the mark in its
// read right before the delete, or fails the delete's resourceVersion
// precondition. A snapshot being deleted by then is no source: refused.
func markSource(ctx context.Context, c *kube.Clients, plan *Result, opts Options) (string, error) {
	s := plan.Snapshot
	v := RestoringValue(plan.Claim.Namespace, plan.Claim.Name, c.Clock.Latest())
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
