// Package reap deletes claims whose data is provably rescued (docs/spec.md#reap): only
// claims that are Rescued (or Superseded under --superseded=discard) in a
// re-read taken immediately before the deletions, each deleted with
// Preconditions{UID, ResourceVersion} from that read, within the blast-radius
// limits.
package reap

import (
	"context"
	"fmt"
	"time"

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
	// RunStart is the API server's clock at the run's first read (its
	// scan). A claim under notice is deleted only when its notice (or its
	// owner's snooze) ended by then (docs/spec.md#notice): a notice this
	// run began ends after it, however short, so it never ends within the
	// run that began it. Zero: no claim under notice is deleted.
	RunStart time.Time
	// Confirm, when set, is asked before the first delete with the number of
	// claims; false deletes nothing.
	Confirm func(n int) (bool, error)
	// BeforeDelete, when set, is called for each claim between the
	// decision and its delete: the tests' way to act as a second actor at
	// that moment, deterministically. Nil in the command.
	BeforeDelete func(ctx context.Context, claim inventory.Key)
	// BatchSize is the most claims one pod list (and one list of the
	// namespace's snapshots) serves; 0: DefaultBatchSize. BatchMaxAge
	// bounds the time from that pod list's answer to a delete it
	// serves; 0: DefaultBatchMaxAge (docs/spec.md#reap-batch).
	BatchSize   int
	BatchMaxAge time.Duration
}

// Outcome is what happened to one claim.
type Outcome struct {
	Namespace, Name string
	Action          string
	// State is the claim's state in the re-read.
	State   classify.State
	Message string
	Err     error
	// Evidence is the snapshot the decision relied on, read again before
	// every attempt of the delete; nil when it relied on none.
	Evidence *Evidence
}

// Block says why a reap deleted nothing although it had claims to delete.
type Block int

const (
	// NotBlocked: the reap went ahead.
	NotBlocked Block = iota
	// BlockedBlastRadius: more deletions than --max-deletions or
	// --max-deletion-percent allow; a partial failure of the run (exit 4).
	BlockedBlastRadius
	// BlockedDeclined: the operator answered no at the prompt; not a failure.
	BlockedDeclined
)

// declinedMsg is the report's note for BlockedDeclined.
const declinedMsg = "deletion declined at the prompt; nothing was deleted"

// Result of a reap.
type Result struct {
	Outcomes []Outcome
	// Blocked says why nothing was deleted; BlockedWhy says it in words,
	// for the report.
	Blocked    Block
	BlockedWhy string
	// Decisions of the re-read, for the report.
	Decisions []classify.Decision
}

// DeleteCandidates re-reads the cluster (claims, pods, snapshots,
// everything), re-classifies, and deletes the claims that are still
// reapable, after the blast-radius check (janitor.Reap and janitor.Run's
// reap step call it). candidates are the claims an earlier step found reapable: a claim
// that is not a candidate is never deleted, and a candidate that is no
// longer reapable is skipped with the reason.
func DeleteCandidates(ctx context.Context, c *kube.Clients, candidates map[inventory.Key]bool, o Options) (*Result, error) {
	if len(candidates) == 0 {
		return &Result{}, nil
	}
	inv, err := kube.Read(ctx, c, o.Scope)
	if err != nil {
		return nil, fmt.Errorf("re-read before deleting: %w", err)
	}
	if inv.ServerTime.IsZero() {
		return nil, fmt.Errorf("re-read before deleting: no server time")
	}
	now := inv.ServerTime
	return planOf(classify.Classify(inv, o.Policy, now), candidates, o, now).execute(ctx, c, o)
}

// execute carries out the plan: the blast-radius check, the prompt, then
// one delete after another; the marks of the claims seen in use go last.
func (p *plan) execute(ctx context.Context, c *kube.Clients, o Options) (*Result, error) {
	// Marks of claims the re-read saw in use go after the deletions, so
	// that nothing stands between the re-read and the deletes; they are
	// never deleted either way.
	podsSeen := &uses{}
	defer p.clearUses(ctx, c, o, podsSeen)
	res := &Result{Outcomes: p.skipped, Decisions: p.ds}
	if why := Limit(len(p.del), len(p.ds), o.MaxDeletions, o.MaxDeletionPercent); why != "" {
		res.Blocked, res.BlockedWhy = BlockedBlastRadius, why
		res.Outcomes = p.each(res.Outcomes, ActionLimited, func(*classify.Decision) string { return why })
		return res, nil
	}
	if o.DryRun {
		res.Outcomes = p.each(res.Outcomes, ActionWould, func(d *classify.Decision) string { return d.Reason })
		return res, nil
	}
	if o.Confirm != nil && len(p.del) > 0 {
		return confirmed(ctx, c, o, res, p.del)
	}
	res.Outcomes = append(res.Outcomes, p.deleteAll(ctx, c, o, podsSeen)...)
	return res, nil
}

// plan is what the re-read says of the candidates.
type plan struct {
	ds []classify.Decision
	// del are the candidates still reapable, skipped the others.
	del     []*classify.Decision
	skipped []Outcome
	// used are claims the re-read saw in use: their marks are removed.
	used []classify.Decision
	// evidence is the snapshot each claim to delete relies on.
	evidence map[*classify.Decision]*Evidence
}

// planOf sorts the candidates into the claims to delete and the skipped
// ones, from ds, the decisions of the re-read at now (the API server's
// clock of that read). It reads nothing: the reap's rules on a read.
func planOf(ds []classify.Decision, candidates map[inventory.Key]bool, o Options, now time.Time) *plan {
	p := &plan{ds: ds, evidence: map[*classify.Decision]*Evidence{}}
	seen := map[inventory.Key]bool{}
	for i := range p.ds {
		d := &p.ds[i]
		k := d.Claim.Key()
		if d.Marks.RecordsUse() || d.Marks.Attempts == classify.Remove {
			// The re-read saw a use, of a candidate or not: the claim's
			// clock restarts now, not at the next scan (docs/spec.md#marks).
			// On a cluster without the Unused condition the next scan
			// may not see that use any more.
			p.used = append(p.used, *d)
		}
		if !candidates[k] {
			continue
		}
		seen[k] = true
		if !Reapable(d, o.Discard, o.Policy.GracePeriod, now) {
			p.skipped = append(p.skipped, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped, State: d.State,
				Message: notReapableReason(d, o.Discard, o.Policy.GracePeriod, now)})
			continue
		}
		if !noticeOver(d, o.RunStart) {
			p.skipped = append(p.skipped, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped, State: d.State,
				Message: noticeRunReason(d, o.RunStart)})
			continue
		}
		if why := WorkspaceWaits(p.ds, d); why != "" {
			// docs/spec.md#reap-workspace-first: the whole workspace is
			// rescued before any of its claims goes.
			p.skipped = append(p.skipped, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped, State: d.State, Message: why})
			continue
		}
		p.del = append(p.del, d)
		p.evidence[d] = EvidenceOf(d)
	}
	for k := range candidates {
		if !seen[k] {
			p.skipped = append(p.skipped, Outcome{Namespace: k.Namespace, Name: k.Name, Action: ActionSkipped,
				Message: "gone or out of scope since the scan"})
		}
	}
	return p
}

// each appends one outcome with action per claim to delete.
func (p *plan) each(out []Outcome, action string, msg func(*classify.Decision) string) []Outcome {
	for _, d := range p.del {
		out = append(out, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: action, State: d.State, Message: msg(d)})
	}
	return out
}

// clearUses removes the marks of the claims the re-read, or the pod lists
// before the deletes, showed in use, whether they were to be deleted or not.
func (p *plan) clearUses(ctx context.Context, c *kube.Clients, o Options, podsSeen *uses) {
	used := p.used
	for i := range p.ds {
		d := &p.ds[i]
		if _, marked := d.Claim.Annotations[inventory.AnnotationOrphanedSince]; !marked || d.Marks.OrphanedSince == classify.Remove {
			continue
		}
		if len(podsSeen.of(d.Claim.Key())) > 0 {
			u := *d
			u.State = classify.InUse
			u.Marks = classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove, Attempts: classify.Remove}
			if t := mark.UseTime(c.Clock.Latest()); !t.IsZero() {
				// docs/spec.md#rule-last-used.
				u.Marks.LastUsed, u.Marks.LastUsedValue = classify.Set, t
			}
			used = append(used, u)
		}
	}
	if len(used) == 0 {
		return
	}
	mr := mark.Apply(ctx, c, used, mark.Options{DryRun: o.DryRun, Concurrency: 1})
	for _, err := range mr.Errors {
		// The next scan retries.
		zerolog.Ctx(ctx).Warn().Err(err).Msg("remove marks of a claim in use again")
	}
}

// confirmed asks before deleting del. Someone may have taken minutes to
// answer: it reads again, and deletes only what was confirmed and is still
// reapable.
func confirmed(ctx context.Context, c *kube.Clients, o Options, res *Result, del []*classify.Decision) (*Result, error) {
	ok, err := o.Confirm(len(del))
	if err != nil {
		return nil, err
	}
	if !ok {
		res.Blocked, res.BlockedWhy = BlockedDeclined, declinedMsg
		for _, d := range del {
			res.Outcomes = append(res.Outcomes, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionSkipped, State: d.State, Message: "declined"})
		}
		return res, nil
	}
	yes := make(map[inventory.Key]bool, len(del))
	for _, d := range del {
		yes[d.Claim.Key()] = true
	}
	again := o
	again.Confirm = nil
	res2, err := DeleteCandidates(ctx, c, yes, again)
	if err != nil {
		return nil, err
	}
	res2.Outcomes = append(res.Outcomes, res2.Outcomes...)
	return res2, nil
}
