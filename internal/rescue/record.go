package rescue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// What a rescue records on the claim: Events and the merge patch of its
// phase label and attempt record.

// fail counts and records a failure that is not a persisted snapshot error
// (those are recorded with the attempt record, by giveUp): Event, phase
// label, outcome.
func (r *rescuer) fail(ctx context.Context, cl *inventory.Claim, name, msg string, err error) Outcome {
	r.count(func(c *Counts) { c.Failed++ })
	zerolog.Ctx(ctx).Error().Str("reason", msg).Msg("rescue failed")
	what := "VolumeSnapshot " + name + ": "
	if name == "" {
		what = "no snapshot: "
	}
	r.event(ctx, cl, corev1.EventTypeWarning, "SnapshotFailed", what+msg)
	r.writeClaim(ctx, cl, claimPatch(cl.UID, classify.SnapshotFailed, nil))
	return Outcome{Snapshot: name, Action: ActionFailed, State: classify.SnapshotFailed, Message: msg, Err: err}
}

// event records an Event on the claim; never in a dry run (a guard: the
// dry run returns before any path that records one).
func (r *rescuer) event(ctx context.Context, cl *inventory.Claim, typ, reason, msg string) {
	if r.o.DryRun {
		zerolog.Ctx(ctx).Debug().Bool("dry_run", true).Str("event", reason).Msg("would record event")
		return
	}
	mark.Event(ctx, r.c, cl, typ, reason, msg)
}

// attemptWrite is a change to the claim's attempt record.
type attemptWrite struct {
	// Clear removes both keys (a successful rescue).
	Clear    bool
	Attempts int
	Next     time.Time
}

// claimPatch is the merge patch of the claim's phase label and, if a is
// set, its attempt record. It carries the claim's UID: the API server
// refuses it when the claim of that name is another one (recreated since),
// so that no claim is ever labelled for another's snapshot.
func claimPatch(uid types.UID, phase classify.State, a *attemptWrite) []byte {
	meta := map[string]any{
		"uid":    string(uid),
		"labels": map[string]any{inventory.LabelPhase: string(phase)},
	}
	if a != nil {
		ann := map[string]any{}
		if a.Clear {
			ann[inventory.AnnotationRescueAttempts] = nil
			ann[inventory.AnnotationNextAttempt] = nil
		} else {
			ann[inventory.AnnotationRescueAttempts] = fmt.Sprint(a.Attempts)
			ann[inventory.AnnotationNextAttempt] = a.Next.UTC().Format(time.RFC3339)
		}
		meta["annotations"] = ann
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta}) // maps of strings always marshal
	return b
}

// writeClaim applies a claim patch. A failure is logged, not fatal: the
// snapshot is what counts, and a claim that is gone or was replaced under
// its name must not be written at all.
func (r *rescuer) writeClaim(ctx context.Context, cl *inventory.Claim, patch []byte) {
	if r.o.DryRun {
		// A guard, as in event.
		zerolog.Ctx(ctx).Debug().Bool("dry_run", true).RawJSON("patch", patch).Msg("would patch claim")
		return
	}
	err := r.c.Retry.Do(ctx, "patch claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		_, err := r.c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Patch(ctx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		zerolog.Ctx(ctx).Info().Err(err).Msg("claim gone or replaced under its name; not written")
	default:
		zerolog.Ctx(ctx).Warn().Err(err).Msg("write claim phase and attempt record")
	}
}
