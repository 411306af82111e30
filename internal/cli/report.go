package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// This file turns the library's results into the report and the command's
// error (exit codes 3 and 4).

// addScan records a scan: one entry per claim, the marking outcome of each
// as its action, and whether the scan trusted the Unused condition.
func addScan(r *report.Report, res *janitor.ScanResult) {
	r.AddDecisions(res.Decisions)
	r.UnusedCondition, r.ServerVersion = res.UnusedCondition, res.ServerVersion
	if inv := res.Inventory; inv != nil {
		r.SetRescues(inv.Snapshots, res.Now)
		for i := range res.Decisions {
			cl := res.Decisions[i].Claim
			if e := r.Entry(cl.Namespace, cl.Name); e != nil {
				e.ReclaimPolicy = inv.PVs[cl.VolumeName].ReclaimPolicy
			}
		}
	}
	for i, o := range res.Marks.Outcomes {
		cl := res.Decisions[i].Claim
		if e := r.Entry(cl.Namespace, cl.Name); e != nil {
			e.Action = string(o)
		}
	}
}

// addRescue records a scan-then-rescue and returns its error: the one
// that cut the rescues short, or its failures (exit 4).
func addRescue(r *report.Report, res *janitor.RescueResult) error {
	addScan(r, res.Scan)
	for _, o := range res.Outcomes {
		d := &res.Scan.Decisions[o.Index]
		e := r.Entry(d.Claim.Namespace, d.Claim.Name)
		if e == nil {
			continue
		}
		e.Action = o.Action
		if o.State != d.State && o.Action != rescue.ActionWould {
			e.State = string(o.State)
		}
		if o.Message != "" {
			e.Reason = o.Message
		}
		e.LeakedContents = o.LeakedContents
		if o.Snapshot != "" {
			e.Snapshot = &report.SnapshotRef{Name: o.Snapshot, ReadyToUse: o.Ready}
			if o.Failed() {
				e.Snapshot.Error = o.Message
			}
		}
	}
	if res.Err != nil {
		return res.Err
	}
	if len(res.Targets) == 0 {
		return failuresError("marks", res.Failures)
	}
	return failuresError("rescues", res.Failures)
}

// addReap records a reap step and returns its error: the one that cut it
// short, a blast radius that blocked it (exit 4; a "no" at the prompt is
// not a failure) or its failed deletions (exit 4).
func addReap(r *report.Report, step janitor.ReapStep) error {
	for _, o := range step.Outcomes {
		e := r.Entry(o.Namespace, o.Name)
		if e == nil {
			continue
		}
		if e.Action == report.ActionSnapshotCreated {
			e.SnapshotCreated = true // run: rescued, then reaped
		}
		e.Action = o.Action
		if o.State != "" {
			e.State = string(o.State)
		}
		if o.Message != "" {
			e.Reason = o.Message
		}
	}
	if step.Err != nil {
		return step.Err
	}
	if step.Blocked != reap.NotBlocked {
		r.AddNote(step.BlockedWhy)
	}
	if step.Blocked == reap.BlockedBlastRadius {
		return exitcode.New(exitcode.Partial, errors.New(step.BlockedWhy))
	}
	return failuresError("deletions", step.Failures)
}

// addGuard records the gate's verdict and returns it: exit 3 when anything
// in scope would be lost. rescued is the report of guard --rescue's rescue,
// nil without it.
func addGuard(r *report.Report, res *janitor.GuardResult, rescued *report.Report) error {
	r.AddDecisions(res.Scan.Decisions)
	r.UnusedCondition, r.ServerVersion = res.Scan.UnusedCondition, res.Scan.ServerVersion
	atRisk := map[*report.ClaimEntry]bool{}
	for _, cr := range res.AtRisk {
		cl := res.Scan.Decisions[cr.Index].Claim
		e := r.Entry(cl.Namespace, cl.Name)
		e.Action = janitor.ActionAtRisk
		e.Reason = cr.Why + "; " + e.Reason
		atRisk[e] = true
	}
	if rescued != nil {
		for _, se := range rescued.Claims {
			if e := r.Entry(se.Namespace, se.Name); e != nil && !atRisk[e] && se.Action != "" {
				e.Action = se.Action
			}
		}
	}
	r.SortAtRiskFirst(func(e *report.ClaimEntry) bool { return atRisk[e] })
	addOnlyCopies(r, res)
	if msg := res.TooFew(); msg != "" {
		r.AddNote(msg)
	}
	if problems := res.Problems(); len(problems) > 0 {
		return exitcode.New(exitcode.DataAtRisk, errors.New(strings.Join(problems, "; ")))
	}
	return nil
}

// addOnlyCopies lists the rescues of claims already reaped, at-risk first.
func addOnlyCopies(r *report.Report, res *janitor.GuardResult) {
	inv := res.Scan.Inventory
	for _, sr := range res.OnlyCopies {
		sn := sr.Snapshot
		e := snapshotEntry(sn, inv.Contents[sn.ContentName].DeletionPolicy)
		e.Reason = "the only copy of claim " + sn.SourceClaim + " (gone)"
		if sr.AtRisk {
			e.Action = janitor.ActionAtRisk
			e.Reason = sr.Why + "; " + e.Reason
		}
		r.Snapshots = append(r.Snapshots, e)
	}
	sort.SliceStable(r.Snapshots, func(i, j int) bool {
		return r.Snapshots[i].Action == janitor.ActionAtRisk && r.Snapshots[j].Action != janitor.ActionAtRisk
	})
}

// snapshotEntry is a snapshot's report entry as read: its source, data
// time, readiness and its content's deletion policy (policy).
func snapshotEntry(sn *inventory.Snapshot, policy string) *report.SnapshotEntry {
	dt := classify.DataTime(sn, nil)
	return &report.SnapshotEntry{Namespace: sn.Namespace, Name: sn.Name, SourceClaim: sn.SourceClaim,
		SourceUID: string(sn.SourceUID), Workspace: sn.Workspace, DataTime: &dt, ReadyToUse: sn.ReadyToUse,
		DeletionPolicy: policy}
}

// failuresError turns action failures into exit code 4.
func failuresError(what string, errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, 3)
	for i, e := range errs {
		if i == 3 {
			msgs = append(msgs, fmt.Sprintf("and %d more", len(errs)-3))
			break
		}
		msgs = append(msgs, e.Error())
	}
	return exitcode.New(exitcode.Partial, fmt.Errorf("%d %s failed: %s", len(errs), what, strings.Join(msgs, "; ")))
}
