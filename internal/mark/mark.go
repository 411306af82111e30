// Package mark writes the janitor's marks (docs/spec.md#marks) on claims: the
// pvc-janitor.io/orphaned-since annotation and the pvc-janitor.io/phase
// label. Patches touch only those keys and carry the UID and resourceVersion
// that were classified, so a claim that changed since it was read, or was
// recreated under its name, is left for the next run rather than marked on
// stale evidence. The one exception is a removal (a use was seen): it is
// retried on a re-read of the same claim, since a use must restart the
// claim's clock whatever else changed.
package mark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// Outcome of marking one claim.
type Outcome string

// Outcomes, used as report actions.
const (
	Marked    Outcome = "marked"
	WouldMark Outcome = "would-mark"
	Changed   Outcome = "mark-skipped" // the claim changed since it was read
	Failed    Outcome = "mark-failed"
)

// Options tune Apply.
type Options struct {
	DryRun bool
	// MarksOnly writes the mark annotations alone: no phase label, no
	// notice, no Event (docs/spec.md#marks-only). DryRun must be false.
	MarksOnly   bool
	Concurrency int
}

// AnnotationsOnly is what a run under --marks-only writes of m
// (docs/spec.md#marks-only): the orphaned-since mark, the record of a use
// and the removals a use makes, all annotations; never the phase label,
// and never the start of a notice (its Event would not be sent). The
// phase label Attached remembers an attachment the Unused condition
// cannot see: an Attached claim gets last-used instead, at useTime (the
// API server's clock rounded up), which ignores an older condition just
// as well.
func AnnotationsOnly(m classify.Marks, state classify.State, useTime time.Time) classify.Marks {
	m.Phase, m.PhaseValue = classify.Keep, ""
	if m.ReapAfter == classify.Set {
		m.ReapAfter, m.ReapAfterValue = classify.Keep, time.Time{}
	}
	if state == classify.Attached && m.LastUsed != classify.Set && !useTime.IsZero() {
		m.LastUsed, m.LastUsedValue = classify.Set, useTime
	}
	return m
}

// Result is the outcome per claim index (into the decisions), for the
// decisions whose marks changed; errors are the failures.
type Result struct {
	Outcomes map[int]Outcome
	Errors   []error
}

// Patch returns the JSON merge patch that applies m to the claim with uid at
// resourceVersion rv. Only keys under pvc-janitor.io/ appear in it. Both
// are preconditions the API server checks: a claim that changed since it
// was read (resourceVersion) or was deleted and recreated under the same
// name (uid) is refused with a conflict, never marked on another claim's
// evidence.
func Patch(m classify.Marks, uid types.UID, rv string) ([]byte, error) {
	if uid == "" {
		// Without a UID the patch would apply to any claim of that name.
		return nil, fmt.Errorf("mark patch without the claim's uid")
	}
	meta := map[string]any{"uid": string(uid), "resourceVersion": rv}
	ann, lab := map[string]any{}, map[string]any{}
	switch m.OrphanedSince {
	case classify.Set:
		ann[inventory.AnnotationOrphanedSince] = m.OrphanedSinceValue.UTC().Format(time.RFC3339)
	case classify.Remove:
		ann[inventory.AnnotationOrphanedSince] = nil
	}
	switch m.Phase {
	case classify.Set:
		lab[inventory.LabelPhase] = string(m.PhaseValue)
	case classify.Remove:
		lab[inventory.LabelPhase] = nil
	}
	if m.Attempts == classify.Remove {
		// The attempt record belongs to the orphan period a use ended.
		ann[inventory.AnnotationRescueAttempts] = nil
		ann[inventory.AnnotationNextAttempt] = nil
	}
	if m.LastUsed == classify.Set {
		// docs/spec.md#rule-last-used: the use seen, on the server's clock.
		ann[inventory.AnnotationLastUsed] = m.LastUsedValue.UTC().Format(time.RFC3339)
	}
	switch m.ReapAfter {
	case classify.Set:
		ann[inventory.AnnotationReapAfter] = m.ReapAfterValue.UTC().Format(time.RFC3339)
	case classify.Remove:
		ann[inventory.AnnotationReapAfter] = nil
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	if len(lab) > 0 {
		meta["labels"] = lab
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

// OtherClaim reports whether a patch was refused because the claim under
// that name is not the one read: the API server answers a merge patch whose
// metadata.uid differs with 422 Invalid (uid is immutable), or with a
// conflict when the resourceVersion differs too.
func OtherClaim(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	if !apierrors.IsInvalid(err) {
		return false
	}
	var s apierrors.APIStatus
	if !errors.As(err, &s) || s.Status().Details == nil {
		return false
	}
	for _, c := range s.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// Removals keeps only the removals of m and its record of a use
// (last-used), and the end of a notice (reap-after removed). They record a
// use the janitor saw: they are always safe to
// apply on a newer version of the same claim (they only restart the
// claim's clock), unlike a Set of the mark or the phase, whose evidence the
// newer version may contradict.
func Removals(m classify.Marks) classify.Marks {
	var r classify.Marks
	if m.OrphanedSince == classify.Remove {
		r.OrphanedSince = classify.Remove
	}
	if m.Phase == classify.Remove {
		r.Phase = classify.Remove
	}
	if m.Attempts == classify.Remove {
		r.Attempts = classify.Remove
	}
	if m.LastUsed == classify.Set {
		r.LastUsed, r.LastUsedValue = classify.Set, m.LastUsedValue
	}
	if m.ReapAfter == classify.Remove {
		r.ReapAfter = classify.Remove // a use ends the notice
	}
	return r
}

// RetryRemoval decides what to do after a patch of m on the claim with uid
// met a conflict: cur is a re-read of the claim (nil when it is gone).
// Only marks that record a use the janitor saw (the orphaned-since mark
// removed, the last use recorded) are retried, on the same claim (same UID,
// not being deleted) and only while it still carries a key to remove or an
// older last use; it returns the marks to patch at cur's resourceVersion.
// A Set of the mark or the phase is left for the next run, which
// classifies afresh.
func RetryRemoval(m classify.Marks, uid types.UID, cur *corev1.PersistentVolumeClaim) (classify.Marks, bool) {
	if !m.RecordsUse() || cur == nil || cur.UID != uid || cur.DeletionTimestamp != nil {
		return classify.Marks{}, false
	}
	r := Removals(m)
	if _, ok := cur.Annotations[inventory.AnnotationOrphanedSince]; !ok {
		r.OrphanedSince = classify.Keep
	}
	if _, ok := cur.Labels[inventory.LabelPhase]; !ok {
		r.Phase = classify.Keep
	}
	if _, ok := cur.Annotations[inventory.AnnotationReapAfter]; !ok {
		r.ReapAfter = classify.Keep
	}
	_, a := cur.Annotations[inventory.AnnotationRescueAttempts]
	_, n := cur.Annotations[inventory.AnnotationNextAttempt]
	if !a && !n {
		r.Attempts = classify.Keep
	}
	if raw, ok := cur.Annotations[inventory.AnnotationLastUsed]; ok && r.LastUsed == classify.Set {
		// Never move the record of a use back: another run may have
		// seen a later one.
		if t, err := time.Parse(time.RFC3339, raw); err == nil && !t.Before(r.LastUsedValue) {
			r.LastUsed = classify.Keep
		}
	}
	return r, r.Changed()
}

// Apply writes the marks of every decision that changes something, with
// opts.Concurrency patches in flight (under opts.MarksOnly, only the
// annotations AnnotationsOnly keeps, and no Event), an OrphanDetected Event when a claim
// is marked orphaned for the first time, and a Superseded Event when its
// phase turns Superseded. Nothing is written in dry
// run. A failure to mark one claim does not stop the others.
func Apply(ctx context.Context, c *kube.Clients, ds []classify.Decision, opts Options) Result {
	res := &collector{res: Result{Outcomes: map[int]Outcome{}}}
	if opts.MarksOnly && !opts.DryRun {
		// A copy: the report and the steps after the scan read the
		// decisions' marks as classified.
		ds = append([]classify.Decision(nil), ds...)
		at := UseTime(c.Clock.Latest())
		for i := range ds {
			ds[i].Marks = AnnotationsOnly(ds[i].Marks, ds[i].State, at)
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < max(opts.Concurrency, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				o, err := one(ctx, c, &ds[i], opts)
				res.record(i, o, err)
			}
		}()
	}
	feed(ctx, c, ds, opts, work, res)
	close(work)
	wg.Wait()
	return res.res
}

// collector gathers the workers' outcomes.
type collector struct {
	mu  sync.Mutex
	res Result
}

func (r *collector) record(i int, o Outcome, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Outcomes[i] = o
	if err != nil {
		r.res.Errors = append(r.res.Errors, err)
	}
}

// feed hands the claims whose marks change to the workers. Removals go
// first and are written even when the run is ending (a lost lease, a stop
// signal): a use the janitor saw and did not write down is invisible to
// the next run on a cluster without the Unused condition. Each is bounded
// by the retry policy.
func feed(ctx context.Context, c *kube.Clients, ds []classify.Decision, opts Options, work chan<- int, res *collector) {
	log := zerolog.Ctx(ctx)
	stopped := false
	for _, removal := range []bool{true, false} {
		for i := range ds {
			if !ds[i].Marks.Changed() || ds[i].Marks.RecordsUse() != removal {
				continue
			}
			if removal {
				// Remembered for the rest of the run whether or not the
				// removal can be written: a claim seen in use is never
				// reaped in that run.
				c.Uses.Record(ds[i].Claim.UID, string(ds[i].State)+": "+ds[i].Reason)
			}
			switch {
			case opts.DryRun:
				log.Debug().Str("namespace", ds[i].Claim.Namespace).Str("claim", ds[i].Claim.Name).
					Str("state", string(ds[i].State)).Bool("dry_run", true).Msg("would mark claim")
				res.record(i, WouldMark, nil)
			case removal:
				work <- i
			case stopped:
			case ctx.Err() != nil:
				// A select would pick a ready worker half the time.
				stopped = true
			default:
				select {
				case work <- i:
				case <-ctx.Done():
					stopped = true
				}
			}
		}
	}
}

// removalRetries bounds the re-reads a conflicting removal is retried
// on: each conflict means the claim changed again in between.
const removalRetries = 3

func one(ctx context.Context, c *kube.Clients, d *classify.Decision, opts Options) (Outcome, error) {
	cl := d.Claim
	log := zerolog.Ctx(ctx).With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Str("state", string(d.State)).Logger()
	if d.Marks.RecordsUse() {
		// See Apply: a use is written down even when the run is ending.
		ctx = context.WithoutCancel(ctx)
		o, err := write(ctx, c, d, opts, &log)
		if err != nil {
			c.Uses.Unwritten(cl.UID, cl.Namespace+"/"+cl.Name)
			log.Error().Err(err).Msg("a use of this claim was seen and could not be written down: a later run on a cluster without the Unused condition cannot see it")
		} else {
			c.Uses.Written(cl.UID)
		}
		return o, err
	}
	return write(ctx, c, d, opts, &log)
}

func write(ctx context.Context, c *kube.Clients, d *classify.Decision, opts Options, logp *zerolog.Logger) (Outcome, error) {
	cl := d.Claim
	log := *logp
	patch, err := Patch(d.Marks, cl.UID, cl.ResourceVersion)
	if err != nil {
		return Failed, fmt.Errorf("mark claim %s/%s: %w", cl.Namespace, cl.Name, err)
	}
	err = patchClaim(ctx, c, cl, patch, opts)
	if OtherClaim(err) && d.Marks.RecordsUse() {
		// A use was seen: its clock must restart even though the claim
		// changed since it was read (docs/spec.md#marks).
		var done bool
		done, err = retryRemoval(ctx, c, cl, d.Marks, opts)
		if err == nil && done {
			log.Info().Msg("marks removed on a fresh read after a conflict")
			return Marked, nil
		}
		if err == nil {
			log.Info().Msg("claim gone, recreated or without marks: nothing to remove")
			return Changed, nil
		}
	}
	switch {
	case OtherClaim(err) || apierrors.IsNotFound(err):
		log.Info().Msg("claim changed since it was read; marks left for the next run")
		return Changed, nil
	case err != nil:
		log.Error().Err(err).Msg("mark claim")
		return Failed, err
	}
	log.Debug().RawJSON("patch", patch).Msg("marked claim")
	if opts.MarksOnly {
		return Marked, nil // docs/spec.md#marks-only: no Event
	}
	_, hadMark := cl.Annotations[inventory.AnnotationOrphanedSince]
	if d.Marks.OrphanedSince == classify.Set && !hadMark {
		msg := fmt.Sprintf("no pod or workload references this claim; orphaned since %s (state %s)",
			d.Marks.OrphanedSinceValue.UTC().Format(time.RFC3339), d.State)
		Event(ctx, c, cl, corev1.EventTypeNormal, "OrphanDetected", msg)
	}
	if d.Marks.ReapAfter == classify.Set {
		// docs/spec.md#notice: the owner is told once per notice.
		msg := fmt.Sprintf("orphaned since %s and not deleted before %s: the janitor deletes it then if it is rescued; "+
			"postpone with the annotation %s (RFC 3339, at most --max-snooze later) or keep it with %s=true",
			d.OrphanedSince.UTC().Format(time.RFC3339), d.Marks.ReapAfterValue.UTC().Format(time.RFC3339),
			inventory.AnnotationSnoozeUntil, inventory.KeyHold)
		Event(ctx, c, cl, corev1.EventTypeNormal, "ReapScheduled", msg)
	}
	if d.Marks.Phase == classify.Set && d.Marks.PhaseValue == classify.Superseded {
		// docs/spec.md#runs: the Superseded Event, once, when the phase turns to it.
		msg := d.Reason
		if d.DiscardReason != "" {
			msg += "; discard: " + d.DiscardReason
		}
		Event(ctx, c, cl, corev1.EventTypeNormal, "Superseded", msg)
	}
	return Marked, nil
}

// Event records an Event on the claim (docs/spec.md#runs). What the janitor did to
// the claim is what matters: a lost Event is logged, never an error.
func Event(ctx context.Context, c *kube.Clients, cl *inventory.Claim, typ, reason, msg string) {
	if err := c.Event(ctx, cl, typ, reason, msg); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("reason", reason).Msg("record event")
	}
}

func patchClaim(ctx context.Context, c *kube.Clients, cl *inventory.Claim, patch []byte, opts Options) error {
	return c.Retry.Do(ctx, fmt.Sprintf("mark claim %s/%s", cl.Namespace, cl.Name), func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Patch(ctx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// retryRemoval re-reads the claim and removes the marks m removes, at the
// fresh resourceVersion and with the same UID precondition. It reports
// whether a removal was written; false with a nil error means there was
// nothing left to remove (gone, recreated, being deleted, no marks).
func retryRemoval(ctx context.Context, c *kube.Clients, cl *inventory.Claim, m classify.Marks, opts Options) (bool, error) {
	for i := 0; i < removalRetries; i++ {
		var cur *corev1.PersistentVolumeClaim
		err := c.Retry.Do(ctx, fmt.Sprintf("get claim %s/%s", cl.Namespace, cl.Name), func(ctx context.Context) error {
			var err error
			cur, err = c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		r, ok := RetryRemoval(m, cl.UID, cur)
		if !ok {
			return false, nil
		}
		patch, err := Patch(r, cur.UID, cur.ResourceVersion)
		if err != nil {
			return false, err
		}
		err = patchClaim(ctx, c, cl, patch, opts)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !OtherClaim(err):
			return false, err
		}
	}
	return false, fmt.Errorf("remove marks of claim %s/%s: still conflicting after %d fresh reads", cl.Namespace, cl.Name, removalRetries)
}

// Clear removes the janitor's marks (orphaned-since and phase) from the
// claim and records the use (last-used, the API server's clock rounded up),
// for a use seen after the scan (by the re-check before a snapshot or the
// re-read before a delete):
// the claim's clock restarts. The patch carries cl's UID; a conflict is
// retried on a re-read of the same claim. Nothing is written in dry run.
func Clear(ctx context.Context, c *kube.Clients, cl *inventory.Claim, opts Options) (Outcome, error) {
	if opts.DryRun {
		return WouldMark, nil
	}
	d := &classify.Decision{Claim: cl, State: classify.InUse,
		Marks: classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove, Attempts: classify.Remove}}
	if t := UseTime(c.Clock.Latest()); !t.IsZero() {
		d.Marks.LastUsed, d.Marks.LastUsedValue = classify.Set, t
	}
	c.Uses.Record(cl.UID, "in use")
	return one(ctx, c, d, opts)
}

// UseTime is the last-used value of a use seen when the API server's clock
// was at most latest (kube.ServerClock.Latest): rounded up to the second,
// so that no orphan period dated from it can start before the use
// (docs/spec.md#rule-last-used), by classify.CeilSecond as the classifier's
// marks are. Zero when the clock is unknown.
func UseTime(latest time.Time) time.Time {
	if latest.IsZero() {
		return time.Time{}
	}
	return classify.CeilSecond(latest)
}
