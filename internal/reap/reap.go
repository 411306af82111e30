// Package reap deletes claims whose data is provably rescued (SPEC §6): only
// claims that are Rescued (or Superseded under --superseded=discard) in a
// fresh read taken immediately before the deletions, each deleted with
// Preconditions{UID, ResourceVersion} from that read, within the blast-radius
// limits.
package reap

import (
	"context"
	"fmt"
	"math"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
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

// Reapable reports whether a decision allows deleting the claim.
func Reapable(d *classify.Decision, discard bool) bool {
	return d.State == classify.Rescued || (discard && d.State == classify.Superseded)
}

// Limit checks the blast radius: n deletions out of total claims in scope.
// It returns the reason when over either limit.
func Limit(n, total, maxDeletions int, maxPercent float64) string {
	if n > maxDeletions {
		return fmt.Sprintf("blast radius: %d claims would be deleted, over --max-deletions %d; nothing was deleted", n, maxDeletions)
	}
	if total > 0 {
		pct := 100 * float64(n) / float64(total)
		if pct > maxPercent+1e-9 {
			return fmt.Sprintf("blast radius: %d of %d claims in scope (%.1f%%) would be deleted, over --max-deletion-percent %g; nothing was deleted",
				n, total, math.Round(pct*10)/10, maxPercent)
		}
	}
	return ""
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
	ds := classify.Classify(inv, o.Policy, inv.ServerTime)
	res.Decisions = ds
	var del []*classify.Decision
	seen := map[inventory.Key]bool{}
	for i := range ds {
		d := &ds[i]
		k := d.Claim.Key()
		if !candidates[k] {
			continue
		}
		seen[k] = true
		if !Reapable(d, o.Discard) {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped, State: d.State,
				Message: "changed since the scan: now " + string(d.State) + ": " + d.Reason})
			continue
		}
		del = append(del, d)
	}
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
	}
	for _, d := range del {
		if ctx.Err() != nil {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionSkipped, State: d.State, Message: "interrupted before deleting"})
			continue
		}
		res.Outcomes = append(res.Outcomes, deleteOne(ctx, c, d, o, log))
	}
	return res, nil
}

func deleteOne(ctx context.Context, c *kube.Clients, d *classify.Decision, o Options, log *zerolog.Logger) Outcome {
	cl := d.Claim
	out := Outcome{Namespace: cl.Namespace, Name: cl.Name, State: d.State}
	l := log.With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Str("state", string(d.State)).Logger()
	uid, rv := cl.UID, cl.ResourceVersion
	err := o.Retry.Do(ctx, "delete claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		return c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		// Changed since we looked (a pod started using it, someone edited
		// it, or it is gone): not an error, never retried blindly.
		out.Action = ActionSkipped
		out.Message = "changed since it was read (delete precondition failed); left for the next run"
		l.Info().Msg("claim changed since it was read; not deleted")
		event(ctx, c, o, cl, corev1.EventTypeNormal, "ReapSkipped", out.Message)
	case err != nil:
		out.Action, out.Message, out.Err = ActionFailed, err.Error(), err
		l.Error().Err(err).Msg("delete claim")
		event(ctx, c, o, cl, corev1.EventTypeWarning, "ReapSkipped", "delete failed: "+err.Error())
	default:
		out.Action = ActionDeleted
		why := "rescued"
		if d.Snapshot != nil && d.State == classify.Rescued {
			why = "rescued by VolumeSnapshot " + d.Snapshot.Name
		} else if d.State == classify.Superseded {
			why = "superseded, discarded without a snapshot (--superseded=discard)"
		}
		out.Message = "deleted: " + why
		l.Info().Msg("claim deleted")
		event(ctx, c, o, cl, corev1.EventTypeNormal, "Reaped", out.Message)
	}
	return out
}

func event(ctx context.Context, c *kube.Clients, o Options, cl *inventory.Claim, typ, reason, msg string) {
	if err := c.Event(ctx, o.Retry, cl, typ, reason, msg); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("reason", reason).Msg("record event")
	}
}
