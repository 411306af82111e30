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
// (without --allow-older) must not stand beside a newer copy of s's data:
// one that holds s's newest version of the line and a later one (it
// descends from s's data and moved on).
func (w *World) checkRestore(c *Claim, s *Snap) {
	top := maxOf(s.Data)
	if top == 0 {
		return
	}
	for _, o := range w.LiveClaims() {
		if o != c && o.Line == s.Line && o.Data[top] && maxOf(o.Data) > top {
			w.violate("restore: %s restores %s %s of %s beside claim %s, which holds newer data of it %s", c.Name, s.Name,
				dataString(s.Data), s.Line, o.Name, dataString(o.Data))
			return
		}
	}
	for _, o := range w.LiveSnaps() {
		if o != s && o.Line == s.Line && o.Data[top] && maxOf(o.Data) > top {
			w.violate("restore: %s restores %s %s of %s beside snapshot %s, which holds newer data of it %s", c.Name, s.Name,
				dataString(s.Data), s.Line, o.Name, dataString(o.Data))
			return
		}
	}
}
