package classify

import (
	"fmt"
	"strconv"
	"time"
)

// Rules 7–12 of docs/spec.md#states (StateRules): an orphan's state, decided on
// its copies once every claim's orphaned-since is known (copiesOf gathers
// them). Each match function writes the whole decision when its rule
// matches, its reason ending with the dating's note; each not function is
// explain's reason when it does not.

// copiesOf fills f with the orphan's copies: one walk over the snapshots
// whose source has the claim's name finds the rescue, the janitor's own
// snapshot of this orphan period that is not intact yet, and its own
// intact one cut behind the clocks' margin.
func (c *classifier) copiesOf(f *facts) {
	cl := f.cl
	head, ok := c.ix.bySource[nsName{cl.Namespace, cl.Name}]
	if !ok {
		return
	}
	for j := head; j >= 0; j = c.ix.snapNext[j] {
		s := c.ix.snaps[j]
		if s.SourceUID != "" && s.SourceUID != cl.UID {
			continue // another claim of the same name
		}
		if s.DeletionTimestamp != nil {
			continue
		}
		if ok, _ := Intact(s, c.inv.Contents); ok {
			switch {
			case c.rescues(s, cl, f.since):
				if f.rescue == nil || newerCut(s, f.rescue) {
					f.rescue = s
				}
			case c.ownBehind(s, cl, f.since) && (f.behind == nil || newerCut(s, f.behind)):
				f.behind = s
			}
			continue
		}
		if s.ManagedByJanitor && s.SourceUID == cl.UID && !s.Superseded && c.current(s, f.since) &&
			(f.own == nil || newerSnap(s, f.own)) {
			f.own = s
		}
	}
}

// rescued is docs/spec.md#rule-rescued.
func (c *classifier) rescued(f *facts, d *Decision) bool {
	if f.rescue == nil {
		return false
	}
	d.State = Rescued
	d.Snapshot = f.rescue
	c.startReason("rescued by snapshot ", f.cl.Namespace, f.rescue.Name)
	c.buf = append(c.buf, " (intact, cut "...)
	c.buf = appendTime(c.buf, CutTime(f.rescue))
	c.buf = append(c.buf, ')')
	d.Reason = c.withNote(f.note)
	return true
}

func (c *classifier) thenRescued(d *Decision) Next {
	at := c.graceEnd(d)
	if d.Notice && d.NotBefore != nil && d.NotBefore.After(at) {
		why := "its owner's notice"
		if d.NoticeNote != "" {
			why += "; " + d.NoticeNote
		}
		return Next{Action: "deleted by the first reap or run after " + why + " (rescued by " + snapName(d) + ")", Earliest: c.at(*d.NotBefore)}
	}
	return Next{Action: "deleted by the next reap or run (rescued by " + snapName(d) + ")", Earliest: c.at(at)}
}

func (c *classifier) notRescued(*Decision) string {
	if c.p.ClockSkew > 0 {
		return "no intact snapshot of this claim cut at or after its orphaned-since plus --clock-skew " + c.p.ClockSkew.String() + " (see snapshots)"
	}
	return "no intact snapshot of this claim cut at or after its orphaned-since (see snapshots)"
}

// supersededRule is docs/spec.md#rule-superseded (superseded decides it).
func (c *classifier) supersededRule(f *facts, d *Decision) bool {
	return d.Workspace != "" && c.superseded(d, f.cl, f.since)
}

func thenSuperseded(_ *classifier, d *Decision) Next {
	if d.Discard {
		return Next{Action: "kept under --superseded=keep; deleted without a snapshot under discard (" + d.DiscardReason + "); archived then deleted under archive"}
	}
	return Next{Action: "kept under --superseded=keep and discard (" + d.DiscardReason + "); archived then deleted under archive"}
}

func notSuperseded(_ *classifier, d *Decision) string {
	if d.Workspace == "" {
		return "no workspace: supersession needs the workspace label"
	}
	return "no newer claim of workspace " + d.Workspace + " and no snapshot of it with data after this claim's orphaned-since"
}

// snapshotFailed is docs/spec.md#rule-snapshot-failed: the janitor's own
// snapshot of this period failed; or its own intact rescue of this period
// is cut too close to orphaned-since for the clocks' margin
// (docs/spec.md#rescue-behind-clock: reported and replaced, never left
// Orphaned in silence); or the attempt record's retry backoff has not ended.
func (c *classifier) snapshotFailed(f *facts, d *Decision) bool {
	cl := f.cl
	switch {
	case f.own != nil && f.own.Error != nil:
		d.Snapshot = f.own
		c.startReason("snapshot ", cl.Namespace, f.own.Name)
		c.buf = append(c.buf, " failed: "...)
		msg := f.own.Error.Message
		if msg == "" {
			msg = "status.error without a message"
		}
		c.buf = append(c.buf, msg...)
	case f.behind != nil:
		d.Snapshot = f.behind
		d.CutBehind = true
		c.startReason("snapshot ", cl.Namespace, f.behind.Name)
		c.buf = append(c.buf, ": cut "...)
		c.buf = appendTime(c.buf, CutTime(f.behind))
		c.buf = append(c.buf, " is within --clock-skew "...)
		c.buf = append(c.buf, c.p.ClockSkew.String()...)
		c.buf = append(c.buf, " of orphaned-since "...)
		c.buf = appendTime(c.buf, *f.since)
		c.buf = append(c.buf, ": not trusted as the rescue; the next attempt takes a new one"...)
	default:
		rec := ReadAttempts(cl.Annotations)
		if rec.Due(c.now) {
			return false
		}
		n, next, _ := rec.Scheduled()
		c.buf = append(c.buf[:0], strconv.Itoa(n)...)
		c.buf = append(c.buf, " snapshot attempts failed; the next is due at "...)
		c.buf = appendTime(c.buf, next)
	}
	d.State = SnapshotFailed
	d.Reason = c.withNote(f.note)
	return true
}

func (c *classifier) thenSnapshotFailed(d *Decision) Next {
	if n, t, ok := ReadAttempts(d.Claim.Annotations).Scheduled(); ok {
		return Next{Action: fmt.Sprintf("another snapshot attempt (%d failed so far)", n), Earliest: c.at(t)}
	}
	return Next{Action: "the failed snapshot is deleted and the rescue tried again by the next snapshot or run"}
}

func notSnapshotFailed(*classifier, *Decision) string {
	return "no failed snapshot of the janitor's for this orphan period and no attempt record holding the next attempt back"
}

// snapshotting is docs/spec.md#rule-snapshotting: the janitor's own
// snapshot of this period is not intact yet.
func (c *classifier) snapshotting(f *facts, d *Decision) bool {
	if f.own == nil {
		return false
	}
	d.Snapshot = f.own
	d.State = Snapshotting
	c.startReason("snapshot ", f.cl.Namespace, f.own.Name)
	if f.own.ReadyToUse {
		_, why := Intact(f.own, c.inv.Contents)
		c.buf = append(c.buf, " is ready but not intact: "...)
		c.buf = append(c.buf, why...)
	} else {
		c.buf = append(c.buf, " is not ready yet"...)
	}
	d.Reason = c.withNote(f.note)
	return true
}

func thenSnapshotting(_ *classifier, d *Decision) Next {
	return Next{Action: "the next snapshot or run waits for snapshot " + snapName(d) + " to become ready"}
}

func notSnapshotting(*classifier, *Decision) string {
	return "no snapshot of the janitor's in progress for this orphan period"
}

// GraceOver reports whether an orphan orphaned since since is past a grace
// period of grace at now (the API server's clock): docs/spec.md#rule-grace.
// It is the one definition of the grace period's end: the Grace rule, the
// owner's notice, explain's dates (GraceEnd) and the reap
// (reap.Reapable) all ask it.
func GraceOver(since time.Time, grace time.Duration, now time.Time) bool {
	return now.Sub(since) >= grace
}

// GraceEnd is the moment GraceOver turns true for an orphan orphaned since
// since.
func GraceEnd(since time.Time, grace time.Duration) time.Time {
	return since.Add(grace)
}

// grace is docs/spec.md#rule-grace: orphaned for less than the grace
// period, or since a moment not known yet (the mark is written now).
func (c *classifier) grace(f *facts, d *Decision) bool {
	c.buf = append(c.buf[:0], orphanReason...)
	switch {
	case f.since == nil:
		c.buf = append(c.buf, "; orphaned-since not known yet, marking it now"...)
	case !GraceOver(*f.since, c.p.GracePeriod, c.now):
		c.buf = append(c.buf, "; orphaned since "...)
		c.buf = appendTime(c.buf, *f.since)
		c.buf = append(c.buf, ", within the grace period of "...)
		c.buf = append(c.buf, c.p.GracePeriod.String()...)
	default:
		return false
	}
	d.State = Grace
	d.Reason = c.withNote(f.note)
	return true
}

func (c *classifier) thenGrace(d *Decision) Next {
	return Next{Action: fmt.Sprintf("rescued (snapshot) when the grace period of %s ends", c.p.GracePeriod), Earliest: c.at(c.graceEnd(d))}
}

func (c *classifier) notGrace(d *Decision) string {
	return "orphaned since " + d.OrphanedSince.UTC().Format(time.RFC3339) + ", longer than the grace period " + c.p.GracePeriod.String()
}

// orphaned is docs/spec.md#rule-orphaned: every other orphan.
func (c *classifier) orphaned(f *facts, d *Decision) bool {
	d.State = Orphaned
	c.buf = append(c.buf[:0], orphanReason...)
	c.buf = append(c.buf, "; orphaned since "...)
	c.buf = appendTime(c.buf, *f.since)
	d.Reason = c.withNote(f.note)
	return true
}

func (c *classifier) thenOrphaned(*Decision) Next {
	return Next{Action: "rescued (snapshot) by the next snapshot or run", Earliest: c.at(c.now)}
}

func notOrphaned(*classifier, *Decision) string { return "" }
