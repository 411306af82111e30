package classify

import (
	"strconv"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// maxListedReferrers caps the referrers named in an InUse reason, so that a
// claim mounted by a thousand pods still gets a one-line reason;
// Decision.Referrers keeps them all.
const maxListedReferrers = 5

// orphanReason opens the reason of every state from Grace to Orphaned. It is
// the wording of the report's example in SPEC §8.
const orphanReason = "no pod or workload references this claim"

// Classify decides the state of every claim of inv (SPEC §3) and the marks
// to record on it. now is the API server's clock (the Date of the list
// response), never the janitor host's: it is what age, grace and new marks
// are measured on.
//
// It returns one Decision per inv.Claims element, in the same order, each
// pointing into inv.Claims; it does not modify inv. The indexes it needs are
// built once per call, so a call costs a few map look-ups per claim.
func Classify(inv *inventory.Inventory, p Policy, now time.Time) []Decision {
	if inv == nil || len(inv.Claims) == 0 {
		return nil
	}
	c := classifier{inv: inv, p: p, now: now, ix: buildIndex(inv, p), buf: make([]byte, 0, 256)}
	out := make([]Decision, len(inv.Claims))
	// One backing array for every Decision.OrphanedSince, rather than one
	// allocation per orphaned claim.
	since := make([]time.Time, len(inv.Claims))
	for i := range inv.Claims {
		c.decide(&out[i], &inv.Claims[i], &since[i])
	}
	return out
}

type classifier struct {
	inv *inventory.Inventory
	p   Policy
	now time.Time
	ix  *index
	// buf is scratch space for reasons: each reason costs one allocation,
	// the final string.
	buf []byte
}

func (c *classifier) decide(d *Decision, cl *inventory.Claim, since *time.Time) {
	d.Claim = cl
	if c.p.WorkspaceLabel != "" {
		d.Workspace = cl.Labels.Workspace
	}
	phaseLabel, hasPhase := cl.Labels.Phase, cl.Labels.HasPhase
	markRaw, hasMark := cl.Annotations[inventory.AnnotationOrphanedSince]

	// 1. A claim that is going away is never patched.
	if cl.DeletionTimestamp != nil {
		d.State = Terminating
		c.buf = append(c.buf[:0], "claim is being deleted (deletionTimestamp "...)
		c.buf = appendTime(c.buf, *cl.DeletionTimestamp)
		c.buf = append(c.buf, ')')
		d.Reason = string(c.buf)
		return
	}

	// 2.
	if how := heldBy(cl); how != "" {
		d.State = Held
		d.Reason = how
		d.Marks.Phase = removeIf(hasPhase)
		return
	}

	// 3.
	if cl.Phase != "Bound" {
		phase := cl.Phase
		if phase == "" {
			phase = "Pending"
		}
		d.State = Unbound
		d.Reason = "claim is " + phase + ", not Bound"
		d.Marks.Phase = removeIf(hasPhase)
		return
	}

	// 4. Use clears the janitor's marks: each time a claim becomes orphaned
	// its clock starts afresh.
	if refs := c.referrers(cl); len(refs) > 0 {
		d.State = InUse
		d.Referrers = refs
		d.Reason = c.usedBy(refs)
		d.Marks.OrphanedSince = removeIf(hasMark)
		d.Marks.Phase = removeIf(hasPhase)
		return
	}
	// The controller manager still counts a pod using the claim (Unused:
	// False) though none was listed: the pod went before it noticed, or it
	// lags or is down. Where the two notions of use differ the stricter
	// wins: the claim is in use until the condition turns True, and its
	// orphaned-since will be that moment, after whatever the pod wrote.
	if u := cl.Unused; u != nil && u.Status == "False" {
		d.State = InUse
		c.buf = append(c.buf[:0], "the claim's Unused condition is False since "...)
		c.buf = appendTime(c.buf, u.LastTransitionTime)
		c.buf = append(c.buf, " (a pod used it; no pod references it now: waiting for the controller manager to see it go)"...)
		d.Reason = string(c.buf)
		d.Marks.OrphanedSince = removeIf(hasMark)
		d.Marks.Phase = removeIf(hasPhase)
		return
	}

	// 5.
	if age := c.now.Sub(cl.CreationTimestamp); age < c.p.MinAge {
		d.State = Young
		d.Reason = "created " + age.Round(time.Second).String() + " ago, younger than min-age " + c.p.MinAge.String()
		d.Marks.Phase = removeIf(hasPhase)
		return
	}

	// 6. Not orphaned (a node may still hold unflushed data), so no
	// orphaned-since mark is written; one already there is kept.
	if cl.VolumeName != "" {
		atts := c.inv.Attachments[cl.VolumeName]
		for i := range atts {
			if a := &atts[i]; a.Attached {
				d.State = Attached
				d.Reason = "volume " + cl.VolumeName + " is still attached to node " + a.NodeName +
					" (VolumeAttachment " + a.Name + ")"
				d.Marks.setPhase(Attached, phaseLabel, hasPhase)
				return
			}
		}
	}

	// 7–12: orphaned. Orphaned-since is the later of the janitor's mark and
	// the Unused condition's lastTransitionTime when True.
	var mark, cond, eff time.Time
	markOK := false
	if hasMark {
		if t, err := time.Parse(time.RFC3339, markRaw); err == nil {
			mark, markOK = t, true
		}
	}
	condOK := cl.Unused != nil && cl.Unused.Status == "True"
	if condOK {
		cond = cl.Unused.LastTransitionTime
	}
	effOK := markOK || condOK
	switch {
	case markOK && condOK:
		eff = mark
		if cond.After(mark) {
			eff = cond
		}
	case markOK:
		eff = mark
	case condOK:
		eff = cond
	}
	if effOK {
		*since = eff
		d.OrphanedSince = since
	}
	switch {
	case !markOK && condOK:
		d.Marks.OrphanedSince, d.Marks.OrphanedSinceValue = Set, secs(cond)
	case !markOK:
		d.Marks.OrphanedSince, d.Marks.OrphanedSinceValue = Set, secs(c.now)
	case condOK && secs(cond).After(mark):
		// Used again between two runs: the condition moved forward.
		d.Marks.OrphanedSince, d.Marks.OrphanedSinceValue = Set, secs(cond)
	}
	c.orphan(d, cl, eff, effOK)
	d.Marks.setPhase(d.State, phaseLabel, hasPhase)
}

// orphan decides among states 7–12.
func (c *classifier) orphan(d *Decision, cl *inventory.Claim, eff time.Time, effOK bool) {
	// One walk over the snapshots whose source has this claim's name finds
	// the rescue, the janitor's own pending snapshot and the snapshots of an
	// earlier claim of the same name (another source, as far as
	// supersession goes).
	var rescue, own, otherUID *inventory.Snapshot
	if head, ok := c.ix.bySource[nsName{cl.Namespace, cl.Name}]; ok {
		for j := head; j >= 0; j = c.ix.snapNext[j] {
			s := c.ix.snaps[j]
			if s.SourceUID != "" && s.SourceUID != cl.UID {
				if d.Workspace != "" && s.Workspace == d.Workspace && !s.Superseded && s.DeletionTimestamp == nil &&
					(otherUID == nil || newerSnap(s, otherUID)) {
					otherUID = s
				}
				continue
			}
			if s.DeletionTimestamp != nil {
				continue
			}
			if s.ReadyToUse {
				if c.rescues(s, cl, eff, effOK) && (rescue == nil || newerSnap(s, rescue)) {
					rescue = s
				}
				continue
			}
			if s.ManagedByJanitor && s.SourceUID == cl.UID && !s.Superseded && (own == nil || newerSnap(s, own)) {
				own = s
			}
		}
	}

	// 7.
	if rescue != nil {
		d.State = Rescued
		d.Snapshot = rescue
		c.buf = append(c.buf[:0], "rescued by snapshot "...)
		c.buf = append(c.buf, cl.Namespace...)
		c.buf = append(c.buf, '/')
		c.buf = append(c.buf, rescue.Name...)
		c.buf = append(c.buf, " (ready, created "...)
		c.buf = appendTime(c.buf, rescue.CreationTimestamp)
		c.buf = append(c.buf, ')')
		d.Reason = string(c.buf)
		return
	}

	// 8.
	if d.Workspace != "" && c.superseded(d, cl, otherUID) {
		return
	}

	// 9, 10.
	if own != nil {
		d.Snapshot = own
		c.buf = append(c.buf[:0], "snapshot "...)
		c.buf = append(c.buf, cl.Namespace...)
		c.buf = append(c.buf, '/')
		c.buf = append(c.buf, own.Name...)
		if own.Error != nil {
			d.State = SnapshotFailed
			c.buf = append(c.buf, " failed: "...)
			msg := own.Error.Message
			if msg == "" {
				msg = "status.error without a message"
			}
			c.buf = append(c.buf, msg...)
		} else {
			d.State = Snapshotting
			c.buf = append(c.buf, " is not ready yet"...)
		}
		d.Reason = string(c.buf)
		return
	}

	// 11, 12.
	c.buf = append(c.buf[:0], orphanReason...)
	switch {
	case !effOK:
		d.State = Grace
		c.buf = append(c.buf, "; orphaned-since not known yet, marking it now"...)
	case c.now.Sub(eff) < c.p.GracePeriod:
		d.State = Grace
		c.buf = append(c.buf, "; orphaned since "...)
		c.buf = appendTime(c.buf, eff)
		c.buf = append(c.buf, ", within the grace period of "...)
		c.buf = append(c.buf, c.p.GracePeriod.String()...)
	default:
		d.State = Orphaned
		c.buf = append(c.buf, "; orphaned since "...)
		c.buf = appendTime(c.buf, eff)
	}
	d.Reason = string(c.buf)
}

// rescues reports whether the ready snapshot s, whose source is cl, counts as
// cl's rescue.
func (c *classifier) rescues(s *inventory.Snapshot, cl *inventory.Claim, eff time.Time, effOK bool) bool {
	// A snapshot older than the claim cannot hold its data: it is of an
	// earlier claim of the same name, even when trusting existing snapshots.
	if s.CreationTimestamp.Before(cl.CreationTimestamp) {
		return false
	}
	if c.p.TrustExistingSnapshots {
		return true
	}
	return effOK && !s.CreationTimestamp.Before(eff)
}

// superseded decides state 8 for a claim of a named workspace; otherUID is
// the newest evidence snapshot of an earlier claim with cl's name.
func (c *classifier) superseded(d *Decision, cl *inventory.Claim, otherUID *inventory.Snapshot) bool {
	e, ok := c.ix.ws[nsName{cl.Namespace, d.Workspace}]
	if !ok {
		e = emptyWS
	}

	// The newest claim of the workspace other than cl.
	j := e.claims.a
	if j >= 0 && c.inv.Claims[j].UID == cl.UID {
		j = e.claims.b
	}
	if j >= 0 {
		if n := &c.inv.Claims[j]; n.UID != cl.UID && n.CreationTimestamp.After(cl.CreationTimestamp) {
			d.State = Superseded
			c.buf = append(c.buf[:0], "superseded by newer claim "...)
			c.buf = append(c.buf, n.Namespace...)
			c.buf = append(c.buf, '/')
			c.buf = append(c.buf, n.Name...)
			c.buf = append(c.buf, " of workspace "...)
			c.buf = append(c.buf, d.Workspace...)
			c.buf = append(c.buf, ", created "...)
			c.buf = appendTime(c.buf, n.CreationTimestamp)
			d.Reason = string(c.buf)
			return true
		}
	}

	// The newest evidence snapshot of the workspace whose source is not cl.
	ev := otherUID
	j = e.snaps.a
	if j >= 0 && c.ix.snaps[j].SourceClaim == cl.Name {
		j = e.snaps.b
	}
	if j >= 0 && (ev == nil || newerSnap(c.ix.snaps[j], ev)) {
		ev = c.ix.snaps[j]
	}
	if ev == nil || !ev.CreationTimestamp.After(cl.CreationTimestamp) {
		return false
	}
	d.State = Superseded
	d.Snapshot = ev
	c.buf = append(c.buf[:0], "superseded by newer snapshot "...)
	c.buf = append(c.buf, cl.Namespace...)
	c.buf = append(c.buf, '/')
	c.buf = append(c.buf, ev.Name...)
	c.buf = append(c.buf, " of workspace "...)
	c.buf = append(c.buf, d.Workspace...)
	switch {
	case ev.SourceClaim == "":
		c.buf = append(c.buf, " (pre-provisioned)"...)
	case ev.SourceClaim == cl.Name:
		c.buf = append(c.buf, " (of an earlier claim "...)
		c.buf = append(c.buf, ev.SourceClaim...)
		c.buf = append(c.buf, " with UID "...)
		c.buf = append(c.buf, ev.SourceUID...)
		c.buf = append(c.buf, ')')
	default:
		c.buf = append(c.buf, " (of claim "...)
		c.buf = append(c.buf, ev.SourceClaim...)
		c.buf = append(c.buf, ')')
	}
	c.buf = append(c.buf, ", created "...)
	c.buf = appendTime(c.buf, ev.CreationTimestamp)
	d.Reason = string(c.buf)
	return true
}

// referrers returns what keeps cl in use: the referrers the reader found,
// then live owners, then StatefulSet claim templates producing its name. The
// common case (only the reader's referrers, or none) allocates nothing.
func (c *classifier) referrers(cl *inventory.Claim) []inventory.Referrer {
	refs := c.inv.Referrers[cl.Key()]
	// A full slice expression, so that appending never writes into the
	// inventory's array.
	refs = refs[:len(refs):len(refs)]
	for _, o := range cl.Owners {
		if _, ok := c.inv.LiveOwners[o.UID]; ok {
			refs = append(refs, inventory.Referrer{Kind: o.Kind, Namespace: cl.Namespace, Name: o.Name, Detail: "owner"})
		}
	}
	if c.ix.sts != nil {
		if prefix, ok := stsOrdinal(cl.Name); ok {
			if head, ok := c.ix.sts[nsName{cl.Namespace, prefix}]; ok {
				for j := head; j >= 0; j = c.ix.stsNext[j] {
					t := &c.inv.StatefulSetTemplates[j]
					refs = append(refs, inventory.Referrer{Kind: "StatefulSet", Namespace: t.Namespace,
						Name: t.StatefulSet, Detail: "volumeClaimTemplate " + t.Template})
				}
			}
		}
	}
	return refs
}

// usedBy renders the InUse reason.
func (c *classifier) usedBy(refs []inventory.Referrer) string {
	c.buf = append(c.buf[:0], "used by "...)
	for i := range refs {
		if i == maxListedReferrers {
			c.buf = append(c.buf, " and "...)
			c.buf = strconv.AppendInt(c.buf, int64(len(refs)-i), 10)
			c.buf = append(c.buf, " more"...)
			break
		}
		if i > 0 {
			c.buf = append(c.buf, ", "...)
		}
		r := &refs[i]
		c.buf = append(c.buf, r.Kind...)
		c.buf = append(c.buf, ' ')
		if r.Namespace != "" {
			c.buf = append(c.buf, r.Namespace...)
			c.buf = append(c.buf, '/')
		}
		c.buf = append(c.buf, r.Name...)
		if r.Detail != "" {
			c.buf = append(c.buf, " ("...)
			c.buf = append(c.buf, r.Detail...)
			c.buf = append(c.buf, ')')
		}
	}
	return string(c.buf)
}

// heldBy returns the Held reason, or "" when the claim is not held. The value
// is compared case-insensitively: an operator who wrote "True" meant it, and
// erring towards a hold is the safe side.
func heldBy(cl *inventory.Claim) string {
	if v, ok := cl.Labels.Hold, cl.Labels.HasHold; ok && strings.EqualFold(v, "true") {
		return "held by label " + inventory.KeyHold + "=" + "true"
	}
	if v, ok := cl.Annotations[inventory.KeyHold]; ok && strings.EqualFold(v, "true") {
		return "held by annotation " + inventory.KeyHold + "=" + "true"
	}
	return ""
}

func removeIf(present bool) MarkAction {
	if present {
		return Remove
	}
	return Keep
}

// setPhase sets the phase label to s unless it already says so.
func (m *Marks) setPhase(s State, label string, present bool) {
	if present && label == string(s) {
		return
	}
	m.Phase, m.PhaseValue = Set, s
}

func appendTime(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, time.RFC3339)
}
