package janitor

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// ReapOptions configure a scan-then-reap (janitor reap), and the reap step
// of Run.
type ReapOptions struct {
	Scan ScanOptions
	// Superseded is the --superseded policy; rescue.SupersededDiscard also
	// deletes Superseded claims without a snapshot (docs/spec.md#states).
	Superseded string
	// MaxDeletions and MaxDeletionPercent are the blast radius (docs/spec.md#reap).
	MaxDeletions       int
	MaxDeletionPercent float64
	// Confirm, when set, is asked before the first delete with the number
	// of claims; false deletes nothing (BlockedDeclined).
	Confirm func(n int) (bool, error)
}

// ReapResult is what a scan-then-reap did.
type ReapResult struct {
	Scan *ScanResult
	// Step is the reap step: its outcomes, and why it was blocked.
	Step ReapStep
}

// ReapStep is the reap itself, after a scan (and a rescue in Run).
type ReapStep struct {
	// Candidates are the claims the scan (and the rescue) found reapable;
	// the reap deletes only those still reapable on its own re-read.
	Candidates map[inventory.Key]bool
	// Done is false when the run was interrupted before the reap began.
	Done     bool
	Outcomes []reap.Outcome
	// Blocked says why nothing was deleted (reap.BlockedBlastRadius,
	// reap.BlockedDeclined); BlockedWhy says it in words.
	Blocked    reap.Block
	BlockedWhy string
	// Failures are the failed deletions ("namespace/name: error").
	Failures []error
	// Err ended the reap early (its re-read failed, say).
	Err error
}

// Reap scans (and marks), then deletes every claim whose data is provably
// rescued (docs/spec.md#commands, docs/spec.md#reap). An error means there is no result: the scan failed.
func Reap(ctx context.Context, c *kube.Clients, o ReapOptions) (*ReapResult, error) {
	scan, err := Scan(ctx, c, o.Scan)
	if err != nil {
		return nil, err
	}
	return &ReapResult{Scan: scan, Step: reapStep(ctx, c, o, scan, nil)}, nil
}

// reapStep deletes the candidates of scan, and the claims in also.
func reapStep(ctx context.Context, c *kube.Clients, o ReapOptions, scan *ScanResult, also map[inventory.Key]bool) ReapStep {
	discard := o.Superseded == rescue.SupersededDiscard
	step := ReapStep{Candidates: map[inventory.Key]bool{}}
	for i := range scan.Decisions {
		d := &scan.Decisions[i]
		if reap.Reapable(d, discard, o.Scan.Policy.GracePeriod, scan.Now) {
			step.Candidates[d.Claim.Key()] = true
		}
	}
	for k := range also {
		step.Candidates[k] = true
	}
	if ctx.Err() != nil {
		return step
	}
	step.Done = true
	res, err := reap.DeleteCandidates(ctx, c, step.Candidates, reap.Options{
		Scope: o.Scan.Scope, Policy: o.Scan.Policy, Discard: discard,
		MaxDeletions: o.MaxDeletions, MaxDeletionPercent: o.MaxDeletionPercent,
		DryRun: o.Scan.DryRun, Confirm: o.Confirm,
		RunStart: runStart(scan),
	})
	if err != nil {
		step.Err = err
		return step
	}
	step.Outcomes, step.Blocked, step.BlockedWhy = res.Outcomes, res.Blocked, res.BlockedWhy
	for _, out := range res.Outcomes {
		if out.Err != nil {
			step.Failures = append(step.Failures, fmt.Errorf("%s/%s: %w", out.Namespace, out.Name, out.Err))
		}
	}
	return step
}

// RunOptions configure a whole run (janitor run): scan, snapshot, reap.
type RunOptions struct {
	// Rescue's Scan is the run's scan; Reap's Scan is ignored.
	Rescue RescueOptions
	Reap   ReapOptions
	// Prune is the retention step after the reap, when set (docs/spec.md#retention);
	// its Scan is the run's.
	Prune PruneOptions
}

// RunResult is what a run did.
type RunResult struct {
	Rescue *RescueResult
	Reap   ReapStep
	// Prune is the retention step's result (nil without retention, or
	// when PruneErr says why it has none).
	Prune    *prune.Result
	PruneErr error
}

// Run scans, rescues and reaps (docs/spec.md#cmd-run): the claims its own
// rescue left Rescued are reaped in the same run. An error means there is
// no result: bad input (*InputError) or a failed scan.
func Run(ctx context.Context, c *kube.Clients, o RunOptions) (*RunResult, error) {
	snap, err := Rescue(ctx, c, o.Rescue)
	if err != nil {
		return nil, err
	}
	ro := o.Reap
	ro.Scan = o.Rescue.Scan
	res := &RunResult{Rescue: snap, Reap: reapStep(ctx, c, ro, snap.Scan, snap.rescued())}
	if o.Prune.Enabled() && ctx.Err() == nil {
		po := o.Prune
		po.Scan = o.Rescue.Scan
		po.Keep = reapedOn(res.Reap.Outcomes)
		res.Prune, res.PruneErr = Prune(ctx, c, po)
	}
	return res, nil
}

// reapedOn are the rescues the reap deleted claims on (docs/spec.md#retention-never):
// the claim's data is in them now, so the run's retention keeps them
// whatever it reads or ranks after the reap.
func reapedOn(outs []reap.Outcome) map[types.UID]string {
	keep := map[types.UID]string{}
	for _, o := range outs {
		if o.Action == reap.ActionDeleted && o.Evidence != nil && o.Evidence.UID != "" {
			keep[o.Evidence.UID] = "claim " + o.Namespace + "/" + o.Name + " was reaped on it in this run"
		}
	}
	return keep
}

// runStart is when the run began, for the notice (docs/spec.md#notice: a
// notice ends only for a run begun at or after it): the API server's
// clock of the run's first read, never the end of the scan's lists, which
// comes seconds later at scale (the chaos oracle's G10 found a run begun
// 2.5 s before a notice's end deleting its claim, seed
// 1796465697334683596).
func runStart(scan *ScanResult) time.Time { return scan.Start }
