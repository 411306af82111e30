package classify

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Rules 1–6 of docs/spec.md#states (StateRules): decided on the claim, its
// users and its volume, before any claim's copies are looked at. Each
// match function writes the whole decision when its rule matches; each not
// function is explain's reason when it does not.

// terminating is docs/spec.md#rule-terminating: a claim that is going away
// is never patched.
func (c *classifier) terminating(f *facts, d *Decision) bool {
	if f.cl.DeletionTimestamp == nil {
		return false
	}
	d.State = Terminating
	c.buf = append(c.buf[:0], "claim is being deleted (deletionTimestamp "...)
	c.buf = appendTime(c.buf, *f.cl.DeletionTimestamp)
	c.buf = append(c.buf, ')')
	d.Reason = string(c.buf)
	return true
}

func notTerminating(*classifier, *Decision) string { return "no deletionTimestamp" }

func thenTerminating(*classifier, *Decision) Next {
	return Next{Action: "none: the claim is being deleted"}
}

// held is docs/spec.md#rule-held: an operator's hold is never overridden,
// but a use seen while held still restarts the clock: once the hold is
// lifted, the claim's orphaned-since must not predate that use.
func (c *classifier) held(f *facts, d *Decision) bool {
	how := heldBy(f.cl)
	if how == "" {
		return false
	}
	d.State = Held
	d.Reason = how
	d.Marks.Phase = removeIf(f.hasPhase)
	if f.usedNow {
		d.Referrers = f.refs
		d.Marks.OrphanedSince = removeIf(f.hasMark)
		d.Marks.Attempts = removeIf(f.hasAttempts)
		if f.hasMark {
			d.Reason = how + "; in use, so its orphaned-since mark is cleared"
		}
		c.recordUse(d, f.cl, f.refs)
	}
	return true
}

func notHeld(*classifier, *Decision) string {
	return "no " + inventory.KeyHold + "=true label or annotation"
}

func thenHeld(*classifier, *Decision) Next { return Next{Action: "none while it is held"} }

// unbound is docs/spec.md#rule-unbound.
func (c *classifier) unbound(f *facts, d *Decision) bool {
	if f.cl.Phase == "Bound" {
		return false
	}
	phase := f.cl.Phase
	if phase == "" {
		phase = "Pending"
	}
	d.State = Unbound
	d.Reason = "claim is " + phase + ", not Bound"
	d.Marks.Phase = removeIf(f.hasPhase)
	return true
}

func notUnbound(*classifier, *Decision) string { return "phase Bound" }

func thenUnbound(*classifier, *Decision) Next { return Next{Action: "none until it is Bound"} }

// inUse is docs/spec.md#rule-in-use: use clears the janitor's marks, so
// that each time a claim becomes orphaned its clock starts afresh. A claim
// is in use when something references it, and also while the controller
// manager still counts a pod using it (Unused: False) though none was
// listed: the pod went before it noticed, or it lags or is down. Where the
// two notions of use differ the stricter wins: the claim is in use until
// the condition turns True, and its orphaned-since will be that moment,
// after whatever the pod wrote. This holds even when the condition is
// otherwise ignored for the run: False can only delay a deletion.
func (c *classifier) inUse(f *facts, d *Decision) bool {
	u := f.cl.Unused
	falseNow := u != nil && u.Status == "False"
	if len(f.refs) == 0 && !falseNow {
		return false
	}
	d.State = InUse
	if len(f.refs) > 0 {
		d.Referrers = f.refs
		d.Reason = c.usedBy(f.refs)
	} else {
		c.buf = append(c.buf[:0], "the claim's Unused condition is False since "...)
		c.buf = appendTime(c.buf, u.LastTransitionTime)
		c.buf = append(c.buf, " (a pod used it; no pod references it now: waiting for the controller manager to see it go)"...)
		d.Reason = string(c.buf)
	}
	d.Marks.OrphanedSince = removeIf(f.hasMark)
	d.Marks.Phase = removeIf(f.hasPhase)
	d.Marks.Attempts = removeIf(f.hasAttempts)
	c.recordUse(d, f.cl, f.refs)
	return true
}

// thenInUse is what happens next to a claim in use (InUse, Attached).
func thenInUse(c *classifier, _ *Decision) Next {
	return Next{Action: "none while it is in use; once unused it is marked, then rescued after the grace period " + c.p.GracePeriod.String()}
}

func notInUse(_ *classifier, d *Decision) string {
	w := "no pod, owner, StatefulSet template or workload names it"
	if u := d.Claim.Unused; u != nil {
		w += "; Unused condition " + u.Status
	}
	return w
}

// young is docs/spec.md#rule-young.
func (c *classifier) young(f *facts, d *Decision) bool {
	age := c.now.Sub(f.cl.CreationTimestamp)
	if age >= c.p.MinAge {
		return false
	}
	d.State = Young
	d.Reason = "created " + age.Round(time.Second).String() + " ago, younger than min-age " + c.p.MinAge.String()
	d.Marks.Phase = removeIf(f.hasPhase)
	return true
}

func (c *classifier) thenYoung(d *Decision) Next {
	return Next{Action: "classified again once older than min-age", Earliest: c.at(d.Claim.CreationTimestamp.Add(c.p.MinAge))}
}

func (c *classifier) notYoung(d *Decision) string {
	return "created " + d.Claim.CreationTimestamp.UTC().Format(time.RFC3339) + ", older than min-age " + c.p.MinAge.String()
}

// attached is docs/spec.md#rule-attached: not orphaned: a node may still
// hold unflushed data, and a volume attached now may be written to now.
// That is a use, whenever the attachment was made (a re-attach can reuse an
// old VolumeAttachment): the mark and the attempt record go, and the phase
// label Attached remembers it, so that the next orphan period is not dated
// by an Unused condition that cannot see attachments.
func (c *classifier) attached(f *facts, d *Decision) bool {
	for i := range f.atts {
		a := &f.atts[i]
		if !a.Attached {
			continue
		}
		cl := f.cl
		d.State = Attached
		d.Reason = "volume " + cl.VolumeName + " is still attached to node " + a.NodeName +
			" (VolumeAttachment " + a.Name + ")"
		if f.hasMark {
			d.Marks.OrphanedSince = Remove
			d.Reason += "; its orphaned-since mark is cleared: an attached volume is in use"
		}
		d.Marks.Attempts = removeIf(f.hasAttempts)
		d.Marks.setPhase(Attached, cl.Labels.Phase, f.hasPhase)
		c.recordUse(d, cl, nil)
		return true
	}
	return false
}

func notAttached(_ *classifier, d *Decision) string {
	if d.Claim.VolumeName == "" {
		return "no volume"
	}
	return "no VolumeAttachment of volume " + d.Claim.VolumeName + " is attached"
}
