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
// the wording of the report's example in docs/spec.md#output.
const orphanReason = "no pod or workload references this claim"

// Classify decides the state of every claim of inv (docs/spec.md#states) and the marks
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
	_, out := classify(inv, p, now)
	return out
}

// classify is Classify, also returning the classifier with its indexes (for
// Explain).
func classify(inv *inventory.Inventory, p Policy, now time.Time) (*classifier, []Decision) {
	trust, _ := UnusedCondition(inv, now)
	c := classifier{inv: inv, p: p, now: now, condTrusted: trust == ConditionTrusted, ix: &index{}, buf: make([]byte, 0, 256)}
	c.ix.buildSts(inv)
	out := make([]Decision, len(inv.Claims))
	// One backing array for every Decision.OrphanedSince, rather than one
	// allocation per orphaned claim.
	since := make([]time.Time, len(inv.Claims))
	// Two passes: the first decides states 1–6 and every orphan's
	// orphaned-since, which the second needs for the data times of other
	// claims' snapshots (docs/spec.md#evidence) and for supersession.
	orphans := make([]bool, len(inv.Claims))
	for i := range inv.Claims {
		orphans[i] = c.use(&out[i], &inv.Claims[i], &since[i])
	}
	c.ix.build(inv, p, out, orphans)
	for i := range inv.Claims {
		d := &out[i]
		if orphans[i] {
			c.orphan(d, &inv.Claims[i])
			d.Marks.setPhase(d.State, d.Claim.Labels.Phase, d.Claim.Labels.HasPhase)
		}
		c.notice(d, orphans[i])
	}
	return &c, out
}

type classifier struct {
	inv *inventory.Inventory
	p   Policy
	now time.Time
	ix  *index
	// condTrusted: the controller manager maintains the Unused condition
	// (UnusedCondition); when false the condition's True is ignored.
	condTrusted bool
	// buf is scratch space for reasons: each reason costs one allocation,
	// the final string.
	buf []byte
	// f is the facts of the claim being decided (use, orphan).
	f facts
}

// use decides states 1–6 (the first lifeRules of StateRules) and, for a claim
// that is none of them (an orphan), its orphaned-since and marks; it
// reports whether the claim is an orphan.
func (c *classifier) use(d *Decision, cl *inventory.Claim, since *time.Time) bool {
	d.Claim = cl
	if c.p.WorkspaceLabel != "" {
		d.Workspace = cl.Labels.Workspace
	}
	_, hasMark := cl.Annotations[inventory.AnnotationOrphanedSince]
	// One facts value for every claim (the rules take a pointer to it,
	// which would otherwise cost an allocation per claim).
	c.f = facts{cl: cl, hasPhase: cl.Labels.HasPhase, hasMark: hasMark, hasAttempts: hasAttemptRecord(cl)}
	f := &c.f
	if cl.DeletionTimestamp == nil {
		f.refs = c.referrers(cl)
		f.usedNow = len(f.refs) > 0 || (cl.Unused != nil && cl.Unused.Status == "False")
	}
	if cl.VolumeName != "" {
		f.atts = c.inv.Attachments[cl.VolumeName]
	}
	for i := range StateRules[:lifeRules] {
		if StateRules[i].match(c, f, d) {
			return false
		}
	}
	c.date(f, d, since)
	return true
}

// date records an orphan's orphaned-since (docs/spec.md#rule-orphaned-since)
// and the marks that come with it; the dating's note opens its reason.
func (c *classifier) date(f *facts, d *Decision, since *time.Time) {
	ev := OrphanedSince(f.cl, f.atts, c.condTrusted, c.p.ClockSkew, c.now)
	if ev.Known {
		*since = ev.At
		d.OrphanedSince = since
	}
	if ev.Mark {
		d.Marks.OrphanedSince, d.Marks.OrphanedSinceValue = Set, ev.MarkValue
	}
	if ev.UsedAfterMark {
		d.Marks.Attempts = removeIf(f.hasAttempts)
	}
	if ev.LastUsed {
		d.Marks.LastUsed, d.Marks.LastUsedValue = Set, ev.LastUsedValue
	}
	if ev.Note != "" {
		d.Reason = ev.Note
	}
}

// recordUse writes down the use of cl seen now as its last-used
// (docs/spec.md#rule-last-used), when it matters and is not written yet:
// when the claim is patched anyway (marks to remove), or when a pod that
// has not ended references it while its Unused condition says True: that
// contradicts the use (the controller manager is down or lagging), and the
// condition could date a later orphan period before it. A claim whose
// condition agrees with what the controller manager counts (False; True
// with only ended pods, workload templates or owners, which it does not
// count; no condition and no marks) is not written every run: the next
// orphan period is dated after the use by the condition's next transition
// or by a fresh mark.
func (c *classifier) recordUse(d *Decision, cl *inventory.Claim, refs []inventory.Referrer) {
	if !d.Marks.Changed() && !contradicts(cl, refs) {
		return
	}
	t := CeilSecond(c.now)
	if raw, ok := cl.Annotations[inventory.AnnotationLastUsed]; ok {
		if prev, err := time.Parse(time.RFC3339, raw); err == nil && !prev.Before(t) {
			return
		}
	}
	d.Marks.LastUsed, d.Marks.LastUsedValue = Set, t
}

// contradicts reports whether cl's Unused condition says True while a pod
// that has not ended references it: the controller manager has not seen
// that use (yet).
func contradicts(cl *inventory.Claim, refs []inventory.Referrer) bool {
	if cl.Unused == nil || cl.Unused.Status != "True" {
		return false
	}
	for i := range refs {
		if refs[i].Kind == "Pod" && !refs[i].Terminal {
			return true
		}
	}
	return false
}

// Dating is how OrphanedSince dates a claim's orphan period from its
// evidence (docs/spec.md#marks): the orphaned-since, and the marks to write.
type Dating struct {
	// At is the effective orphaned-since; Known is false when no
	// trustworthy evidence exists yet.
	At    time.Time
	Known bool
	// Mark: write MarkValue as the claim's pvc-janitor.io/orphaned-since.
	Mark      bool
	MarkValue time.Time
	// UsedAfterMark: a VolumeAttachment of the claim's volume was created
	// after its mark (or after the condition's time): the volume was used
	// again, so that evidence is void and the clock restarts.
	UsedAfterMark bool
	// LastUsed: the claim's pvc-janitor.io/last-used does not parse; it is
	// taken as a use seen now and rewritten with LastUsedValue (the fresh
	// mark), so that the next run dates the orphan by that mark.
	LastUsed      bool
	LastUsedValue time.Time
	// Note says which evidence was ignored and why ("" when none).
	Note string
}

// lastUse is a claim's pvc-janitor.io/last-used as OrphanedSince reads it.
type lastUse struct {
	at      time.Time // zero when absent or ignored
	raw     string
	note    string
	rewrite bool // does not parse: rewrite it
}

// lastUsed reads the last use the janitor saw on cl (docs/spec.md#rule-last-used).
// One that does not parse is taken as a use seen now (the conservative
// side: the orphan period starts afresh); one before the claim's creation
// was copied from another claim and is ignored.
func lastUsed(cl *inventory.Claim, now time.Time) lastUse {
	raw, ok := cl.Annotations[inventory.AnnotationLastUsed]
	if !ok {
		return lastUse{}
	}
	t, err := time.Parse(time.RFC3339, raw)
	switch {
	case err != nil:
		return lastUse{at: CeilSecond(now), raw: raw, rewrite: true,
			note: "its last-used mark " + strconv.Quote(raw) + " does not parse: taken as a use seen now"}
	case t.Before(cl.CreationTimestamp):
		return lastUse{raw: raw, note: "its last-used mark " + raw + " predates the claim's creation (copied from another claim?): ignored"}
	}
	return lastUse{at: t, raw: raw}
}

// OrphanedSince decides when cl stopped being used, for a claim that no pod
// or workload references (docs/spec.md#marks). The evidence is the janitor's mark
// and the Unused condition (when condTrusted), the later of the two; evidence
// that cannot be true (a mark that does not parse or predates the claim, a
// condition without a lastTransitionTime or with one before the claim's
// creation) is ignored; a VolumeAttachment of the claim's volume created after
// either is a use that voids it, and so is a claim whose phase label says the
// last run saw it Attached (for the condition). No evidence older than the
// last use the janitor saw (pvc-janitor.io/last-used) dates the orphan
// (docs/spec.md#rule-last-used): a stale condition cannot erase that use.
// Without evidence, the claim is marked with now (the API server's clock
// after the use lists were read) rounded up to the next second, never
// earlier than its last use, and its orphaned-since is not known yet.
func OrphanedSince(cl *inventory.Claim, atts []inventory.Attachment, condTrusted bool, skew time.Duration, now time.Time) Dating {
	var out Dating
	ev := evidence{cl: cl, lu: lastUsed(cl, now), skew: skew}
	for i := range atts {
		if atts[i].Created.After(ev.floor) {
			ev.floor, ev.floorBy = atts[i].Created, atts[i].Name
		}
	}
	if ev.lu.note != "" {
		ev.notes = append(ev.notes, ev.lu.note)
	}
	out.LastUsed = ev.lu.rewrite
	mark, markOK := ev.mark(&out)
	cond, condOK := ev.condition(condTrusted, markOK)
	switch {
	case markOK && condOK:
		out.At, out.Known = mark, true
		if cond.After(mark) {
			// Used again between two runs: the condition moved forward.
			out.At = cond
			out.Mark, out.MarkValue = true, cond
		}
	case markOK:
		out.At, out.Known = mark, true
	case condOK:
		out.At, out.Known = cond, true
		out.Mark, out.MarkValue = true, cond
	default:
		out.Mark, out.MarkValue = true, CeilSecond(now)
		if out.MarkValue.Before(ev.lu.at) {
			// A use seen later than this run's clock (a clock that
			// stepped back): the orphan period starts after it.
			out.MarkValue = ev.lu.at
		}
	}
	if out.LastUsed {
		out.LastUsedValue = out.MarkValue
	}
	if len(ev.notes) > 0 {
		out.Note = strings.Join(ev.notes, "; ")
	}
	return out
}

// evidence is what OrphanedSince weighs for one claim: the latest use its
// volume's attachments show (floor, by VolumeAttachment floorBy), the last
// use the janitor saw, and the notes on the evidence it ignored.
type evidence struct {
	cl      *inventory.Claim
	floor   time.Time
	floorBy string
	lu      lastUse
	notes   []string
	// skew is --clock-skew: the condition is on the controller manager's
	// clock, the last use on the API server's.
	skew time.Duration
}

// mark reads the janitor's orphaned-since mark, unless it cannot be true or
// a later use voids it (then out.UsedAfterMark).
func (ev *evidence) mark(out *Dating) (time.Time, bool) {
	raw, ok := ev.cl.Annotations[inventory.AnnotationOrphanedSince]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, raw)
	switch {
	case err != nil:
		ev.notes = append(ev.notes, "its orphaned-since mark "+strconv.Quote(raw)+" does not parse: ignored")
	case t.Before(ev.cl.CreationTimestamp):
		ev.notes = append(ev.notes, "its orphaned-since mark "+raw+" predates the claim's creation (copied from another claim?): ignored")
	case t.Before(ev.floor):
		out.UsedAfterMark = true
		ev.notes = append(ev.notes, "VolumeAttachment "+ev.floorBy+" was created after its orphaned-since mark "+raw+": used again, the clock restarts")
	case t.Before(ev.lu.at):
		out.UsedAfterMark = true
		ev.notes = append(ev.notes, "its orphaned-since mark "+raw+" predates the last use the janitor saw ("+ev.lu.raw+"): ignored")
	default:
		return t, true
	}
	return time.Time{}, false
}

// condition reads the Unused condition's True (when condTrusted), unless it
// cannot be true, is stale, or cannot see the last use (an attachment).
func (ev *evidence) condition(condTrusted, markOK bool) (time.Time, bool) {
	cl := ev.cl
	u := cl.Unused
	if u == nil || u.Status != "True" {
		return time.Time{}, false
	}
	t := u.LastTransitionTime
	switch {
	case !condTrusted:
		// Said once per run by the report's unusedCondition.
	case t.IsZero():
		ev.notes = append(ev.notes, "its Unused condition has no lastTransitionTime: ignored")
	case t.Before(cl.CreationTimestamp):
		ev.notes = append(ev.notes, "its Unused condition's lastTransitionTime predates the claim's creation: ignored")
	case t.Before(ev.floor):
		ev.notes = append(ev.notes, "its Unused condition's lastTransitionTime predates VolumeAttachment "+ev.floorBy+": ignored")
	case ev.lu.at.Add(ev.skew).After(t):
		// The controller manager was down or lagging while the janitor
		// saw the claim in use: the condition is stale. A condition of
		// the second before the recorded use (rounded up) cannot be told
		// apart from one that came before the use the janitor saw: it
		// is stale too, the safe side (the claim is marked afresh), and
		// so is one within --clock-skew of it: the controller manager's
		// clock may be ahead (found by the model checker: a frozen
		// condition of 0.2 s read 1 s on a clock a second ahead).
		ev.notes = append(ev.notes, "its Unused condition's lastTransitionTime "+t.UTC().Format(time.RFC3339)+
			" predates the last use the janitor saw ("+ev.lu.raw+"): stale, ignored")
	case !markOK && cl.Labels.HasPhase && cl.Labels.Phase == string(Attached):
		// The last run saw the volume attached: it was in use after
		// whatever the condition (which counts pods, not attachments)
		// says.
		ev.notes = append(ev.notes, "the volume was attached when last seen, and the Unused condition does not see attachments: marked afresh")
	default:
		// The API keeps whole seconds: the use ended at some moment of
		// the second the condition names, up to its end.
		return endOfSecond(t), true
	}
	return time.Time{}, false
}

// orphan decides states 7–12 (the rules of StateRules after lifeRules) for a
// claim that use found orphaned: the first rule that matches decides.
func (c *classifier) orphan(d *Decision, cl *inventory.Claim) {
	c.f = facts{cl: cl, since: d.OrphanedSince, note: d.Reason}
	f := &c.f
	d.Reason = ""
	c.copiesOf(f)
	for i := lifeRules; i < len(StateRules); i++ {
		if StateRules[i].match(c, f, d) {
			return
		}
	}
}

// startReason starts a reason in c.buf: prefix, then namespace/name.
func (c *classifier) startReason(prefix, namespace, name string) {
	c.buf = append(c.buf[:0], prefix...)
	c.buf = append(c.buf, namespace...)
	c.buf = append(c.buf, '/')
	c.buf = append(c.buf, name...)
}

// withNote finishes the reason in c.buf with the evidence note, if any.
func (c *classifier) withNote(note string) string {
	if note != "" {
		c.buf = append(c.buf, "; "...)
		c.buf = append(c.buf, note...)
	}
	return string(c.buf)
}

// current reports whether the janitor's own snapshot s belongs to the
// claim's current orphan period: one taken for an earlier period (the claim
// was used since) is stale, neither progress nor a failure of this period.
func (c *classifier) current(s *inventory.Snapshot, since *time.Time) bool {
	if since == nil {
		return true
	}
	if s.OrphanedSince != nil {
		return !s.OrphanedSince.Before(*since)
	}
	return !s.CreationTimestamp.Before(*since)
}

// rescues reports whether the intact snapshot s, whose source is cl, counts
// as cl's rescue: cut at or after its orphaned-since plus the clocks' margin
// (docs/spec.md#rule-clock-skew), and created after the claim itself.
func (c *classifier) rescues(s *inventory.Snapshot, cl *inventory.Claim, since *time.Time) bool {
	// A snapshot older than the claim cannot hold its data: it is of an
	// earlier claim of the same name, even when trusting existing snapshots.
	if s.CreationTimestamp.Before(cl.CreationTimestamp) {
		return false
	}
	if c.p.TrustExistingSnapshots {
		return true
	}
	// The cut is on the storage system's clock, orphaned-since on the
	// controller manager's or the API server's: a cut within the margin
	// may precede the end of the use.
	return since != nil && !CutTime(s).Before(since.Add(c.p.ClockSkew))
}

// ownBehind reports whether the intact snapshot s, which does not rescue
// cl, is the janitor's own rescue of cl's current orphan period all the
// same: taken for this orphaned-since, but cut before orphaned-since plus
// the clocks' margin (docs/spec.md#rescue-behind-clock: the storage clock
// is behind).
func (c *classifier) ownBehind(s *inventory.Snapshot, cl *inventory.Claim, since *time.Time) bool {
	return since != nil && s.ManagedByJanitor && s.SourceUID == cl.UID && !s.Superseded &&
		s.OrphanedSince != nil && !s.OrphanedSince.Before(*since) && !s.CreationTimestamp.Before(cl.CreationTimestamp)
}

// superseded decides state 8 for a claim of a named workspace: the
// workspace moved on without this claim's last data. It also decides
// whether the evidence is durable enough for a discard.
func (c *classifier) superseded(d *Decision, cl *inventory.Claim, since *time.Time) bool {
	if !c.p.SessionsCarryData {
		return c.forked(d, cl, since)
	}
	e, ok := c.ix.ws[nsName{cl.Namespace, d.Workspace}]
	if !ok {
		e = emptyWS
	}
	n := newerData{}
	c.newerClaim(&n, &e, cl, since)
	if since != nil {
		c.newerSnapshots(&n, &e, cl, *since)
	}
	if n.claim == nil && n.snap == nil {
		return false
	}
	d.State = Superseded
	c.supersededReason(d, cl, since, &e, &n)
	c.discardEvidence(d, cl, since, &e, &n)
	return true
}

// forked decides state 8 by descent (docs/spec.md#rule-superseded): the
// workspace moved on without this claim's last data when another claim of
// it was created from a snapshot of this claim cut before its last use
// ended (before orphaned-since plus --clock-skew; any, while that is not
// known): the line forked, and an ordinary rescue of this claim would be
// newer data than that claim's start that it does not hold. A claim created
// empty, or from another claim's data, supersedes nothing: claims of one
// session, or of a returning user, are each rescued and reaped on their
// own. A discard never follows: what moved on does not hold this claim's
// last data.
func (c *classifier) forked(d *Decision, cl *inventory.Claim, since *time.Time) bool {
	for _, f := range c.ix.forks[nsName{cl.Namespace, cl.Name}] {
		o := &c.inv.Claims[f.claim]
		if o.UID == cl.UID || o.Phase == "Lost" || o.Labels.Workspace != d.Workspace || c.fromOtherClaim(f.snap, cl) {
			continue
		}
		// Its cut, not its data time: someone else's snapshot of an orphan
		// is dated by the orphan's orphaned-since, whatever its cut.
		t := CutTime(f.snap)
		if since != nil && !t.Before(since.Add(c.p.ClockSkew)) {
			continue // cut after the last use: it holds all of this claim's data, no fork
		}
		d.State = Superseded
		c.startReason("superseded by claim ", o.Namespace, o.Name)
		c.buf = append(c.buf, " of workspace "...)
		c.buf = append(c.buf, d.Workspace...)
		c.buf = append(c.buf, ", created from snapshot "...)
		c.buf = append(c.buf, f.snap.Name...)
		c.buf = append(c.buf, " of this claim (cut "...)
		c.buf = appendTime(c.buf, t)
		if since != nil {
			c.buf = append(c.buf, ") before this claim's orphaned-since "...)
			c.buf = appendTime(c.buf, *since)
		} else {
			c.buf = append(c.buf, "), this claim's orphaned-since not known yet"...)
		}
		d.Reason = string(c.buf)
		d.DiscardReason = "kept: claim " + o.Name + " moved on from this claim's data before its last use: nothing holds that last data"
		return true
	}
	return false
}

// newerData is what supersedes a claim: the workspace's newer claim (or a
// restored claim of newer data), the snapshot of another claim with the
// newest data after its orphaned-since, and the newest durable one (an
// intact rescue of the janitor's, whose data time is recorded).
type newerData struct {
	claim         *inventory.Claim
	restored      bool // claim is a restored claim of newer data
	snap, durable *inventory.Snapshot
	snapT, durT   time.Time
}

// newerClaim finds the newest claim of the workspace other than cl (Lost
// claims are not indexed: they hold no data), created after it; else a
// restored claim whose source data is newer than cl's orphaned-since (a
// restored claim holds its source's data, whenever it was created:
// docs/spec.md#rule-lineage).
func (c *classifier) newerClaim(n *newerData, e *wsEntry, cl *inventory.Claim, since *time.Time) {
	j := e.claims.a
	if j >= 0 && c.inv.Claims[j].UID == cl.UID {
		j = e.claims.b
	}
	if j >= 0 {
		if o := &c.inv.Claims[j]; o.UID != cl.UID && o.CreationTimestamp.After(cl.CreationTimestamp) {
			n.claim = o
			return
		}
	}
	if since != nil && e.restored >= 0 && time.Unix(e.restoredT, 0).After(*since) {
		if o := &c.inv.Claims[e.restored]; o.UID != cl.UID {
			n.claim, n.restored = o, true
		}
	}
}

// newerSnapshots finds the snapshots of the workspace, from other claims,
// whose line reaches past cl's orphaned-since: the one with the newest data
// time, and the newest durable one.
func (c *classifier) newerSnapshots(n *newerData, e *wsEntry, cl *inventory.Claim, since time.Time) {
	for k := e.snaps; k >= 0; k = c.ix.wsNext[k] {
		s := c.ix.snaps[k]
		if !c.fromOtherClaim(s, cl) || s.Error != nil {
			continue
		}
		t := c.dataTime(s)
		if !c.lineTime(s, t).After(since) {
			continue
		}
		if n.snap == nil || t.After(n.snapT) || (t.Equal(n.snapT) && s.Name > n.snap.Name) {
			n.snap, n.snapT = s, t
		}
		if ok, _ := Intact(s, c.inv.Contents); ok && DataTimeKnown(s) &&
			(n.durable == nil || t.After(n.durT) || (t.Equal(n.durT) && s.Name > n.durable.Name)) {
			n.durable, n.durT = s, t
		}
	}
}

// supersededReason writes the reason of a Superseded decision: the newer
// claim, else the newer snapshot (which becomes the decision's snapshot).
func (c *classifier) supersededReason(d *Decision, cl *inventory.Claim, since *time.Time, e *wsEntry, n *newerData) {
	if o := n.claim; o != nil {
		c.buf = append(c.buf[:0], "superseded by newer claim "...)
		c.buf = append(c.buf, o.Namespace...)
		c.buf = append(c.buf, '/')
		c.buf = append(c.buf, o.Name...)
		c.buf = append(c.buf, " of workspace "...)
		c.buf = append(c.buf, d.Workspace...)
		if n.restored {
			c.buf = append(c.buf, ", restored from data of "...)
			c.buf = appendTime(c.buf, time.Unix(e.restoredT, 0))
		} else {
			c.buf = append(c.buf, ", created "...)
			c.buf = appendTime(c.buf, o.CreationTimestamp)
		}
	} else {
		ev := n.snap
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
			c.buf = append(c.buf, ')')
		default:
			c.buf = append(c.buf, " (of claim "...)
			c.buf = append(c.buf, ev.SourceClaim...)
			c.buf = append(c.buf, ')')
		}
		c.buf = append(c.buf, ", data time "...)
		c.buf = appendTime(c.buf, n.snapT)
	}
	if since != nil {
		c.buf = append(c.buf, ", after this claim's orphaned-since "...)
		c.buf = appendTime(c.buf, *since)
	}
	d.Reason = string(c.buf)
}

// discardEvidence decides whether the evidence of newer data is durable
// enough for --superseded=discard (docs/spec.md#rule-durable-evidence).
func (c *classifier) discardEvidence(d *Decision, cl *inventory.Claim, since *time.Time, e *wsEntry, n *newerData) {
	switch {
	case since == nil:
		d.DiscardReason = "kept: this claim's orphaned-since is not known yet"
	case n.durable != nil:
		d.Discard = true
		d.DiscardReason = "newer data of the workspace is in intact rescue " + n.durable.Name + " (data time " +
			n.durT.UTC().Format(time.RFC3339) + ")"
		d.Durable = n.durable
		if d.Snapshot == nil {
			d.Snapshot = n.durable
		}
	case e.inUse >= 0 && c.inv.Claims[e.inUse].CreationTimestamp.After(cl.CreationTimestamp):
		// A newer claim in use carries the workspace on; an older one
		// (a lingering pod) holds none of this claim's data.
		d.Discard = true
		d.DiscardReason = "newer claim " + c.inv.Claims[e.inUse].Name + " of the workspace is in use now"
	case e.inUseRestored >= 0 && time.Unix(e.inUseRestoredT, 0).After(*since):
		// In use, a restored claim holds its source's data plus new
		// writes; it carries this claim's data only when its source's
		// data is newer than this claim's orphaned-since.
		d.Discard = true
		d.DiscardReason = "claim " + c.inv.Claims[e.inUseRestored].Name + " of the workspace, restored from data of " +
			time.Unix(e.inUseRestoredT, 0).UTC().Format(time.RFC3339) + ", is in use now"
	default:
		d.DiscardReason = "kept: no durable evidence of newer data (a newer claim that is not in use, or a snapshot that is not an intact rescue of the janitor's, proves nothing)"
	}
}

// fromOtherClaim reports whether snapshot s, of cl's workspace, is the
// data of a claim other than cl: another name, none (pre-provisioned), or an
// earlier claim of the same name (another UID, or taken before cl existed).
func (c *classifier) fromOtherClaim(s *inventory.Snapshot, cl *inventory.Claim) bool {
	switch {
	case s.SourceClaim == "" || s.SourceClaim != cl.Name:
		return true
	case s.SourceUID != "":
		return s.SourceUID != cl.UID
	default:
		return s.CreationTimestamp.Before(cl.CreationTimestamp)
	}
}

// dataTime is DataTime with the source claim looked up in the inventory.
func (c *classifier) dataTime(s *inventory.Snapshot) time.Time {
	if s.ManagedByJanitor && s.OrphanedSince != nil {
		return DataTime(s, nil)
	}
	var src *time.Time
	if s.SourceClaim != "" {
		if i, ok := c.ix.byName[nsName{s.Namespace, s.SourceClaim}]; ok {
			cl := &c.inv.Claims[i]
			if (s.SourceUID == "" || s.SourceUID == cl.UID) && !s.CreationTimestamp.Before(cl.CreationTimestamp) {
				src = c.ix.since[i]
			}
		}
	}
	return DataTime(s, src)
}

// hasAttemptRecord reports whether cl carries the rescue attempt record.
func hasAttemptRecord(cl *inventory.Claim) bool {
	_, a := cl.Annotations[inventory.AnnotationRescueAttempts]
	_, n := cl.Annotations[inventory.AnnotationNextAttempt]
	return a || n
}

// AttemptRecord is a claim's record of the janitor's failed snapshot
// attempts (docs/spec.md#rescue-attempts): pvc-janitor.io/rescue-attempts
// and pvc-janitor.io/next-attempt, which the rescue writes when a run's
// attempts fail. ReadAttempts is its one parser, and Scheduled its one
// meaning: a record puts the next attempt off to its time (the retry
// backoff, docs/architecture.md#words) only when at least one attempt
// failed and both keys parse. Everything else is asked of that:
//
//   - Due: may a run try now. The rescue asks it before it tries, and
//     SnapshotFailed's backoff (copies.go) asks it too: SnapshotFailed
//     exactly when not due.
//   - Scheduled: the record as explain's Next for SnapshotFailed reports
//     it, only when it schedules a later attempt (a record of 0 attempts,
//     which the janitor never writes, schedules nothing: the rescue tries
//     at once, and explain says so).
//   - Attempts alone: the rescue numbers this run's attempts and counts
//     the backoff from the failed ones even when next-attempt is missing
//     or does not parse.
//
// A value that does not parse counts as absent and is named in Invalid:
// an unreadable record must not stop the claim from ever being rescued.
type AttemptRecord struct {
	// Attempts is pvc-janitor.io/rescue-attempts: failed attempts so far;
	// 0 when absent or unparsable.
	Attempts int
	// Next is pvc-janitor.io/next-attempt; nil when absent or unparsable.
	Next *time.Time
	// Invalid names a key whose value does not parse (the last one read).
	Invalid string
}

// ReadAttempts reads the attempt record from a claim's annotations, each
// key on its own.
func ReadAttempts(ann map[string]string) AttemptRecord {
	var r AttemptRecord
	if v, ok := ann[inventory.AnnotationRescueAttempts]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			r.Invalid = inventory.AnnotationRescueAttempts
		} else {
			r.Attempts = n
		}
	}
	if v, ok := ann[inventory.AnnotationNextAttempt]; ok {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			r.Invalid = inventory.AnnotationNextAttempt
		} else {
			r.Next = &t
		}
	}
	return r
}

// Scheduled is the failed attempts and the time the record puts the next
// attempt off to (the end of the retry backoff); ok is false when it puts
// nothing off: no failed attempt, or no time (written by hand, half
// removed, or unparsable).
func (r AttemptRecord) Scheduled() (n int, next time.Time, ok bool) {
	if r.Attempts <= 0 || r.Next == nil {
		return 0, time.Time{}, false
	}
	return r.Attempts, *r.Next, true
}

// Due reports whether a run may attempt a rescue at now (the API server's
// clock): when the record schedules nothing, or its time has come.
func (r AttemptRecord) Due(now time.Time) bool {
	_, next, ok := r.Scheduled()
	return !ok || !now.Before(next)
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

// heldBy returns the Held reason, or "" when the claim is not held
// (inventory.HoldValue: case-insensitive, as on a rescue).
func heldBy(cl *inventory.Claim) string {
	if v, ok := cl.Labels.Hold, cl.Labels.HasHold; ok && inventory.HoldValue(v) {
		return "held by label " + inventory.KeyHold + "=" + "true"
	}
	if v, ok := cl.Annotations[inventory.KeyHold]; ok && inventory.HoldValue(v) {
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
