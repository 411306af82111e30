package model

import (
	"fmt"
	"sort"
)

// The invariants (docs/safety.md#the-model-checker). Each violation's text
// starts with its name.
const (
	// InvLost: no data version that is the newest of its line is lost
	// by a janitor's deletion.
	InvLost = "lost"
	// InvGuard: guard exits 0 only when deleting every claim and every
	// snapshot whose content is Delete loses no such version.
	InvGuard = "guard"
	// InvRestore: a restore without --allow-older never puts older data
	// beside a newer copy of the same line.
	InvRestore = "restore"
	// InvNotice: no claim is deleted before its reap-after, nor in the
	// run that began its notice.
	InvNotice = "notice"
	// InvHeld: no claim or rescue an operator held is deleted.
	InvHeld = "held"
)

func (w *World) violate(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	w.Violations = append(w.Violations, msg)
	w.say("VIOLATION %s", msg)
}

// check is the lost-data invariant after a step of the janitor that may
// have deleted: every version no later write superseded is in a live claim
// or a snapshot.
func (w *World) check(step string) {
	lines := make([]Line, 0, len(w.Needed))
	for l := range w.Needed {
		lines = append(lines, l)
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].String() < lines[j].String() })
	for _, l := range lines {
		for v := range w.Needed[l] {
			if w.holds(l, v) {
				continue
			}
			w.violate("lost: %s version %d, the newest of its line, is in no claim or snapshot after the janitor's %s", l, v, step)
			// Reported once.
			delete(w.Needed[l], v)
		}
	}
}

func (w *World) holds(l Line, v int) bool {
	for _, c := range w.Claims {
		if !c.Deleted && c.Line == l && c.Data[v] {
			return true
		}
	}
	for _, s := range w.Snaps {
		if !s.Deleted && s.Line == l && s.Data[v] {
			return true
		}
	}
	return false
}

// checkReap is the notice and hold invariants for a claim run just
// deleted.
func (w *World) checkReap(c *Claim, run int) {
	if heldValue(c.HoldLabel) || heldValue(c.Ann["pvc-janitor.io/hold"]) {
		w.violate("held: claim %s, held by an operator, was reaped", c.Name)
	}
	if w.Cfg.Policy.NoticePeriod <= 0 {
		return
	}
	switch {
	case c.ReapAfter.IsZero():
		w.violate("notice: %s was reaped without a notice (no reap-after)", c.Name)
	case c.NoticeRun == run:
		w.violate("notice: %s was reaped in run %d, the run that began its notice (reap-after t=%s)", c.Name, run, fmtDur(c.ReapAfter.Sub(T0)))
	case w.Now.Before(c.ReapAfter):
		w.violate("notice: %s was reaped at t=%s, before its reap-after t=%s", c.Name, fmtDur(w.Now.Sub(T0)), fmtDur(c.ReapAfter.Sub(T0)))
	}
}

// checkRestore is the restore invariant: restored claim c from snapshot s
// (without --allow-older) must not stand beside a newer copy of s's data
// in s's workspace (docs/spec.md#restore-refusals): one that holds s's
// newest version of the line and a later one (it descends from s's data
// and moved on). The workspace is the one the janitor can know: with a
// workspace label on s, the copies labelled alike; without, s's source
// claim's name, which is its own workspace. A copy that descends from s
// under another name, without a label, is beyond what any read shows once
// the claim that linked them is gone (docs/spec.md#rule-descent: the
// restore is then not refused; the gap is documented there).
func (w *World) checkRestore(c *Claim, s *Snap) {
	top := maxOf(s.Data)
	if top == 0 {
		return
	}
	if w.unknowable(s) {
		return
	}
	labelled := w.Cfg.Policy.WorkspaceLabel != "" && s.Workspace != ""
	inClaim := func(o *Claim) bool {
		if labelled {
			return o.Labeled && o.Line.User == s.Workspace
		}
		return o.Name == s.SourceName
	}
	inSnap := func(o *Snap) bool {
		if labelled {
			return o.Workspace == s.Workspace
		}
		return o.SourceName == s.SourceName
	}
	for _, o := range w.LiveClaims() {
		if o != c && inClaim(o) && o.Line == s.Line && o.Data[top] && maxOf(o.Data) > top {
			w.violate("restore: %s restores %s %s of %s beside claim %s, which holds newer data of it %s", c.Name, s.Name,
				dataString(s.Data), s.Line, o.Name, dataString(o.Data))
			return
		}
	}
	for _, o := range w.LiveSnaps() {
		if o != s && inSnap(o) && o.Line == s.Line && o.Data[top] && maxOf(o.Data) > top {
			w.violate("restore: %s restores %s %s of %s beside snapshot %s, which holds newer data of it %s", c.Name, s.Name,
				dataString(s.Data), s.Line, o.Name, dataString(o.Data))
			return
		}
	}
}

// unknowable reports whether s is someone else's snapshot of a claim that
// is gone and was itself created from a snapshot: its data time is only
// its cut (docs/spec.md#rule-data-time), and the record of what that claim
// was restored from went with it, so no read can tell that s holds older
// data than its cut (a restore --allow-older's copy backed up, then
// deleted). The restore invariant does not judge such a restore.
func (w *World) unknowable(s *Snap) bool {
	if s.Janitor {
		return false
	}
	var src *Claim
	for _, c := range w.Claims {
		if c.Name == s.SourceName && !c.Created.After(s.Created) && (src == nil || c.Created.After(src.Created)) {
			src = c
		}
	}
	return src != nil && src.Deleted && src.DataSource != ""
}
