package rescue

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// recheckClaim re-classifies the claim on the re-check's read of its namespace. ok
// is false when it must not be snapshotted now; o then says why.
//
// from is the claim as that read has it (nil when it has none).
func (r *rescuer) recheckClaim(ctx context.Context, d *classify.Decision) (fd *classify.Decision, from *corev1.PersistentVolumeClaim, o Outcome, ok bool) {
	fd, nr, o, ok := r.recheckRead(ctx, d)
	if ok && nr != nil {
		from = nr.Objects[d.Claim.Name]
	}
	return fd, from, o, ok
}

// recheckRead is recheckClaim, with the namespace read it re-checked on.
func (r *rescuer) recheckRead(ctx context.Context, d *classify.Decision) (*classify.Decision, *kube.NamespaceRead, Outcome, bool) {
	cl := d.Claim
	inv, nr, err := r.recheck.InventoryRead(ctx, r.inv, cl.Key())
	if err != nil {
		// Fail closed: without the re-check's read, nothing is created.
		msg := "could not re-check the claim before the snapshot: " + err.Error()
		zerolog.Ctx(ctx).Error().Err(err).Msg("re-check failed; not snapshotted")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, nil, Outcome{Action: ActionFailed, State: d.State, Message: msg, Err: err}, false
	}
	// Classified on the same clock as the scan (the upper bound its marks
	// were taken from), or a mark taken a moment ago would look like the
	// future and the claim like Grace; the create itself waits below
	// until the lower bound has passed the orphaned-since.
	now := r.c.Clock.Latest()
	if now.IsZero() {
		err := errors.New("the API server sent no Date header: cannot tell its time")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, nil, Outcome{Action: ActionFailed, State: d.State, Message: err.Error(), Err: err}, false
	}
	ds := classify.Classify(inv, r.o.Policy, now)
	r.clearUsed(ctx, ds)
	// The re-check classifies only the claim's workspace; its read shows
	// every claim of the namespace that a pod uses now, and each such use
	// is one the janitor saw (docs/spec.md#marks): remembered for this run and
	// written down.
	r.clearUsed(ctx, r.seenInUse(nr))
	fd, ok, why := stillTarget(ds, cl.UID, r.o.Superseded)
	if !ok {
		state := d.State
		if fd != nil {
			state = fd.State
		}
		zerolog.Ctx(ctx).Info().Str("state", string(state)).Str("reason", why).Msg("not snapshotted")
		return nil, nil, Outcome{Action: ActionSkipped, State: state, Message: why}, false
	}
	if fd.OrphanedSince == nil {
		// The scan wrote no mark yet (a dry run, or a failed write): no
		// rescue without the moment it rescues.
		return nil, nil, Outcome{Action: ActionSkipped, State: classify.Grace,
			Message: "re-checked just before the snapshot: its orphaned-since is not known yet"}, false
	}
	return fd, nr, Outcome{}, true
}

// seenInUse records every claim of the namespace read that a pod references
// as seen in use this run, and returns decisions removing the marks of
// those that carry any and recording the use (docs/spec.md#rule-last-used)
// where the scan would: with a removal, or on a claim whose Unused
// condition says True against the use.
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
		if m, ok := useMarks(cl, mark.UseTime(nr.ServerTime)); ok {
			out = append(out, classify.Decision{Claim: cl, State: classify.InUse, Reason: "used by " + what, Marks: m})
		}
	}
	return out
}

// useMarks are the marks that write down a use of cl seen at the server
// time at (rounded up): the removal of the marks it carries, and its
// last-used when they are written anyway or its Unused condition says True
// (classify's rule, for a claim read by a re-check). ok is false when
// there is nothing to write.
func useMarks(cl *inventory.Claim, at time.Time) (classify.Marks, bool) {
	var m classify.Marks
	if _, ok := cl.Annotations[inventory.AnnotationOrphanedSince]; ok {
		m.OrphanedSince = classify.Remove
	}
	_, attempts := cl.Annotations[inventory.AnnotationRescueAttempts]
	_, next := cl.Annotations[inventory.AnnotationNextAttempt]
	if attempts || next {
		m.Attempts = classify.Remove
	}
	if cl.Labels.HasPhase {
		m.Phase = classify.Remove
	}
	stale := cl.Unused != nil && cl.Unused.Status == "True"
	if (m.Changed() || stale) && !at.IsZero() {
		prev, err := time.Parse(time.RFC3339, cl.Annotations[inventory.AnnotationLastUsed])
		if err != nil || prev.Before(at) {
			m.LastUsed, m.LastUsedValue = classify.Set, at
		}
	}
	return m, m.Changed()
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
		if !d.Marks.RecordsUse() && d.Marks.Attempts != classify.Remove {
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
	res := mark.Apply(ctx, r.c, used, mark.Options{Concurrency: 1})
	for _, err := range res.Errors {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("clear the marks of a claim in use again")
	}
}
