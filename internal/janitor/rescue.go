package janitor

import (
	"context"
	"fmt"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// RescueOptions configure a scan-then-rescue (janitor snapshot).
type RescueOptions struct {
	Scan ScanOptions
	// Rescue configures the rescues. The settings it shares with Scan
	// (policy, workspace label, selector, concurrency, dry run, retries)
	// are taken from Scan: one source for each.
	Rescue rescue.Options
	// Done, when set, is called once when Rescue returns (the CLI ends
	// its progress line there, before a reap's prompt or guard's scan).
	Done func()
}

// rescueOptions are o.Rescue completed from o.Scan.
func (o RescueOptions) rescueOptions() rescue.Options {
	r := o.Rescue
	r.Policy = o.Scan.Policy
	r.WorkspaceLabel = o.Scan.Policy.WorkspaceLabel
	r.Selector = o.Scan.Scope.Selector
	r.PageSize = o.Scan.Scope.PageSize
	r.Concurrency = o.Scan.Concurrency
	r.DryRun = o.Scan.DryRun
	return r
}

// Validate checks what only the cluster can tell, before anything is
// written (the run's Lease included): the snapshot class exists. Its error
// is an *InputError.
func (o RescueOptions) Validate(ctx context.Context, c *kube.Clients) error {
	if err := rescue.ValidateClass(ctx, c, o.rescueOptions()); err != nil {
		return &InputError{Err: err}
	}
	return nil
}

// RescueResult is what a scan-then-rescue did.
type RescueResult struct {
	Scan *ScanResult
	// Targets are the indexes (into Scan.Decisions) of the claims the
	// rescue acted on; Outcomes has one entry per target, by Index.
	Targets  []int
	Outcomes []rescue.Outcome
	// Failures are the failed rescues ("namespace/name: message") and
	// then the failed marks. A claim skipped by rule (used again,
	// superseded, next attempt not due) is not a failure.
	Failures []error
	// Err ended the rescues early (they are then missing from Outcomes);
	// the scan's findings stand.
	Err error
}

// Rescue scans (and marks), then rescues every Orphaned claim, and every
// Superseded one under the archive policy (docs/spec.md#commands). An error means there
// is no result: bad input (*InputError) or a failed scan.
func Rescue(ctx context.Context, c *kube.Clients, o RescueOptions) (*RescueResult, error) {
	if o.Done != nil {
		defer o.Done()
	}
	if err := o.Validate(ctx, c); err != nil {
		return nil, err
	}
	scan, err := Scan(ctx, c, o.Scan)
	if err != nil {
		return nil, err
	}
	res := &RescueResult{Scan: scan, Failures: scan.Marks.Errors}
	ro := o.rescueOptions()
	res.Targets = rescue.Targets(scan.Decisions, ro.Superseded)
	if len(res.Targets) == 0 {
		return res, nil
	}
	outcomes, err := rescue.SnapshotTargets(ctx, c, scan.Inventory, scan.Decisions, res.Targets, ro)
	if err != nil {
		res.Err = err
		return res, nil
	}
	res.Outcomes = outcomes
	var failed []error
	for _, out := range outcomes {
		if out.Failed() {
			cl := scan.Decisions[out.Index].Claim
			failed = append(failed, fmt.Errorf("%s/%s: %s", cl.Namespace, cl.Name, out.Message))
		}
	}
	res.Failures = append(failed, scan.Marks.Errors...)
	return res, nil
}

// rescued returns the claims the run's rescue left Rescued: the state the
// rescue left a claim in where it differs from the scan's, except in a dry
// run, which changes nothing; otherwise the scan's.
func (r *RescueResult) rescued() map[inventory.Key]bool {
	after := make(map[int]classify.State, len(r.Outcomes))
	for _, out := range r.Outcomes {
		if out.State != r.Scan.Decisions[out.Index].State && out.Action != rescue.ActionWould {
			after[out.Index] = out.State
		}
	}
	keys := map[inventory.Key]bool{}
	for i := range r.Scan.Decisions {
		d := &r.Scan.Decisions[i]
		st, ok := after[i]
		if !ok {
			st = d.State
		}
		if classify.RuleFor(st).Snapshot == classify.SnapRescue {
			keys[d.Claim.Key()] = true
		}
	}
	return keys
}
