// Package reap deletes claims whose data is provably rescued (SPEC §6): only
// claims that are Rescued (or Superseded under --superseded=discard) in a
// fresh read taken immediately before the deletions, each deleted with
// Preconditions{UID, ResourceVersion} from that read, within the blast-radius
// limits.
package reap

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// Actions reported per claim.
const (
	ActionDeleted = "deleted"
	ActionWould   = "would-delete"
	ActionSkipped = "reap-skipped"
	ActionFailed  = "delete-failed"
	ActionLimited = "reap-blocked" // the blast radius stopped the run
)

// Options configure a reap.
type Options struct {
	Scope  kube.Scope
	Policy classify.Policy
	// Discard also deletes Superseded claims without a snapshot.
	Discard            bool
	MaxDeletions       int
	MaxDeletionPercent float64
	DryRun             bool
	Retry              kube.RetryPolicy
	// Confirm, when set, is asked before the first delete with the number of
	// claims; false deletes nothing.
	Confirm func(n int) (bool, error)
}

// Outcome is what happened to one claim.
type Outcome struct {
	Namespace, Name string
	Action          string
	// State is the claim's state in the fresh read.
	State   classify.State
	Message string
	Err     error
}

// Result of a reap.
type Result struct {
	Outcomes []Outcome
	// Blocked explains why nothing was deleted (blast radius, declined).
	Blocked string
	// Decisions of the fresh read, for the report.
	Decisions []classify.Decision
}

// Reap re-reads the cluster (claims, pods, snapshots, everything), re-classifies,
// and deletes the claims that are still reapable, after the blast-radius
// check. candidates are the claims an earlier step found reapable: a claim
// that is not a candidate is never deleted, and a candidate that is no
// longer reapable is skipped with the reason.
func Reap(ctx context.Context, c *kube.Clients, candidates map[inventory.Key]bool, o Options) (*Result, error) {
	log := zerolog.Ctx(ctx)
	res := &Result{}
	if len(candidates) == 0 {
		return res, nil
	}
	inv, err := kube.Read(ctx, c, o.Scope)
	if err != nil {
		return nil, fmt.Errorf("re-read before deleting: %w", err)
	}
	if inv.ServerTime.IsZero() {
		return nil, fmt.Errorf("re-read before deleting: no server time")
	}
	now := inv.ServerTime
	ds := classify.Classify(inv, o.Policy, now)
	res.Decisions = ds
	var del []*classify.Decision
	var used []classify.Decision
	seen := map[inventory.Key]bool{}
	for i := range ds {
		d := &ds[i]
		k := d.Claim.Key()
		if d.Marks.OrphanedSince == classify.Remove || d.Marks.Attempts == classify.Remove {
			// The re-read saw a use, of a candidate or not: the claim's
			// clock restarts now, not at the next scan (SPEC §3 Marks).
			// On a cluster without the Unused condition the next scan
			// may not see that use any more.
			used = append(used, *d)
		}
		if !candidates[k] {
			continue
		}
		seen[k] = true
		if !Reapable(d, o.Discard, o.Policy.GracePeriod, now) {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped, State: d.State,
				Message: notReapableReason(d, o.Discard, o.Policy.GracePeriod, now)})
			continue
		}
		del = append(del, d)
	}
	// Marks of claims the re-read saw in use go after the deletions, so
	// that nothing stands between the re-read and the deletes; they are
	// never deleted either way.
	podsSeen := &uses{}
	defer func() {
		// Claims the pod lists before the deletes showed in use, whether
		// they were to be deleted or not.
		for i := range ds {
			d := &ds[i]
			if _, marked := d.Claim.Annotations[inventory.AnnotationOrphanedSince]; !marked || d.Marks.OrphanedSince == classify.Remove {
				continue
			}
			if len(podsSeen.of(d.Claim.Key())) > 0 {
				u := *d
				u.State = classify.InUse
				u.Marks = classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove, Attempts: classify.Remove}
				used = append(used, u)
			}
		}
		if len(used) == 0 {
			return
		}
		mr := mark.Apply(ctx, c, used, mark.Options{DryRun: o.DryRun, Concurrency: 1, Retry: o.Retry})
		for _, err := range mr.Errors {
			// The next scan retries.
			log.Warn().Err(err).Msg("remove marks of a claim in use again")
		}
	}()
	for k := range candidates {
		if !seen[k] {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped,
				Message: "gone or out of scope since the scan"})
		}
	}
	if why := Limit(len(del), len(ds), o.MaxDeletions, o.MaxDeletionPercent); why != "" {
		res.Blocked = why
		for _, d := range del {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionLimited, State: d.State, Message: why})
		}
		return res, nil
	}
	if o.DryRun {
		for _, d := range del {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionWould, State: d.State, Message: d.Reason})
		}
		return res, nil
	}
	if o.Confirm != nil && len(del) > 0 {
		ok, err := o.Confirm(len(del))
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Blocked = "deletion declined at the prompt; nothing was deleted"
			for _, d := range del {
				res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionSkipped, State: d.State, Message: "declined"})
			}
			return res, nil
		}
		// Someone may have taken minutes to answer: read again, and
		// delete only what was confirmed and is still reapable.
		confirmed := make(map[inventory.Key]bool, len(del))
		for _, d := range del {
			confirmed[d.Claim.Key()] = true
		}
		again := o
		again.Confirm = nil
		res2, err := Reap(ctx, c, confirmed, again)
		if err != nil {
			return nil, err
		}
		res2.Outcomes = append(res.Outcomes, res2.Outcomes...)
		return res2, nil
	}
	for _, d := range del {
		if ctx.Err() != nil {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionSkipped, State: d.State, Message: "interrupted before deleting"})
			continue
		}
		res.Outcomes = append(res.Outcomes, deleteOne(ctx, c, d, o, log, podsSeen))
	}
	return res, nil
}

func event(ctx context.Context, c *kube.Clients, o Options, cl *inventory.Claim, typ, reason, msg string) {
	if err := c.Event(ctx, o.Retry, cl, typ, reason, msg); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("reason", reason).Msg("record event")
	}
}
