package rescue

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// recheckClaim re-classifies the claim on a fresh read of its namespace. ok
// is false when it must not be snapshotted now; o then says why.
func (r *rescuer) recheckClaim(ctx context.Context, d *classify.Decision) (*classify.Decision, Outcome, bool) {
	cl := d.Claim
	inv, err := r.recheck.Inventory(ctx, r.inv, cl.Key())
	if err != nil {
		// Fail closed: without a fresh read, nothing is created.
		msg := "could not re-check the claim before the snapshot: " + err.Error()
		zerolog.Ctx(ctx).Error().Err(err).Msg("re-check failed; not snapshotted")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, Outcome{Action: ActionFailed, State: d.State, Message: msg, Err: err}, false
	}
	// Classified on the same clock as the scan (the upper bound its marks
	// were taken from), or a mark taken a moment ago would look like the
	// future and the claim like Grace; the create itself waits below
	// until the lower bound has passed the orphaned-since.
	now := r.c.Clock.Latest()
	if now.IsZero() {
		err := errors.New("the API server sent no Date header: cannot tell its time")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, Outcome{Action: ActionFailed, State: d.State, Message: err.Error(), Err: err}, false
	}
	ds := classify.Classify(inv, r.o.Policy, now)
	r.clearUsed(ctx, ds)
	// The re-check classifies only the claim's workspace; its read shows
	// every claim of the namespace that a pod uses now, and each such use
	// is one the janitor saw (docs/spec.md#marks): remembered for this run and
	// written down.
	if nr, err := r.recheck.Namespace(ctx, cl.Namespace); err == nil {
		r.clearUsed(ctx, r.seenInUse(nr))
	}
	fd, ok, why := stillTarget(ds, cl.UID, r.o.Superseded)
	if !ok {
		state := d.State
		if fd != nil {
			state = fd.State
		}
		zerolog.Ctx(ctx).Info().Str("state", string(state)).Str("reason", why).Msg("not snapshotted")
		return nil, Outcome{Action: ActionSkipped, State: state, Message: why}, false
	}
	if fd.OrphanedSince == nil {
		// The scan wrote no mark yet (a dry run, or a failed write): no
		// rescue without the moment it rescues.
		return nil, Outcome{Action: ActionSkipped, State: classify.Grace,
			Message: "re-checked just before the snapshot: its orphaned-since is not known yet"}, false
	}
	return fd, Outcome{}, true
}

// seenInUse records every claim of the namespace read that a pod references
// as seen in use this run, and returns decisions removing the marks of
// those that carry any.
func (r *rescuer) seenInUse(nr *kube.NamespaceRead) []classify.Decision {
	var out []classify.Decision
	for i := range nr.Claims {
		cl := &nr.Claims[i]
		refs := nr.PodRefs[cl.Name]
		if len(refs) == 0 {
			continue
		}
		what := "pod " + refs[0].Name + " (re-check before a snapshot)"
		r.c.Uses.Record(cl.UID, what)
		_, mark := cl.Annotations[inventory.AnnotationOrphanedSince]
		_, attempts := cl.Annotations[inventory.AnnotationRescueAttempts]
		_, next := cl.Annotations[inventory.AnnotationNextAttempt]
		if !mark && !attempts && !next && !cl.Labels.HasPhase {
			continue
		}
		m := classify.Marks{OrphanedSince: classify.Remove, Attempts: classify.Remove}
		if cl.Labels.HasPhase {
			m.Phase = classify.Remove
		}
		if !mark {
			m.OrphanedSince = classify.Keep
		}
		if !attempts && !next {
			m.Attempts = classify.Keep
		}
		out = append(out, classify.Decision{Claim: cl, State: classify.InUse, Reason: "used by " + what, Marks: m})
	}
	return out
}

// clearUsed removes the marks of every claim the re-check read shows in use
// again, whichever claim it was read for (docs/spec.md#marks: a use the janitor
// sees restarts the clock; on a cluster without the Unused condition, the
// next scan may not see that use any more). A claim is cleared once per
// resourceVersion, however many re-checks share the read.
func (r *rescuer) clearUsed(ctx context.Context, ds []classify.Decision) {
	var used []classify.Decision
	r.mu.Lock()
	for i := range ds {
		d := &ds[i]
		if d.Marks.OrphanedSince != classify.Remove && d.Marks.Attempts != classify.Remove {
			continue
		}
		if r.cleared[d.Claim.UID] == d.Claim.ResourceVersion {
			continue
		}
		if r.cleared == nil {
			r.cleared = map[types.UID]string{}
		}
		r.cleared[d.Claim.UID] = d.Claim.ResourceVersion
		used = append(used, *d)
	}
	r.mu.Unlock()
	if len(used) == 0 {
		return
	}
	res := mark.Apply(ctx, r.c, used, mark.Options{Concurrency: 1, Retry: r.o.Retry})
	for _, err := range res.Errors {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("clear the marks of a claim in use again")
	}
}
