package classify

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestNotice is docs/spec.md#notice, a row per rule: when the owner's
// notice begins (the mark), when it ends (NotBefore), what the owner's
// snooze does within and beyond --max-snooze, and that a use ends it.
func TestNotice(t *testing.T) {
	old := ago(2 * time.Hour) // orphaned past the 30m grace period
	rescued := snaps(ownSnap("s", "c", ready, snapAt(ago(time.Hour))))
	end := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name      string
		notice    time.Duration
		claim     inventory.Claim
		inv       []invOpt
		state     State
		on        bool       // Decision.Notice
		mark      MarkAction // Marks.ReapAfter
		markAt    time.Time
		notBefore time.Time // zero: nil
		note      string    // substring of NoticeNote
	}{
		{name: "off: no notice, no mark", claim: pvc("c", marked(old)), inv: []invOpt{rescued}, state: Rescued},
		{name: "off: a mark left from an earlier run is ignored", claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(time.Hour))),
			inv: []invOpt{rescued}, state: Rescued},
		{name: "an orphan past grace: the notice begins now", notice: time.Hour, claim: pvc("c", marked(old)), inv: []invOpt{rescued},
			state: Rescued, on: true, mark: Set, markAt: now.Add(time.Hour), notBefore: now.Add(time.Hour)},
		{name: "not rescued yet: told all the same", notice: time.Hour, claim: pvc("c", marked(old)),
			state: Orphaned, on: true, mark: Set, markAt: now.Add(time.Hour), notBefore: now.Add(time.Hour)},
		{name: "within the grace period: not told yet", notice: time.Hour, claim: pvc("c", marked(ago(10*time.Minute))), state: Grace},
		{name: "told: the notice runs until its mark", notice: time.Hour, claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(20*time.Minute))),
			inv: []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(20 * time.Minute)},
		{name: "told: a notice that ended", notice: time.Hour, claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(-time.Minute))),
			inv: []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(-time.Minute)},
		{name: "a mark older than the orphan period is no notice of it", notice: time.Hour,
			claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, old.Add(-time.Minute).Format(time.RFC3339))),
			inv:   []invOpt{rescued}, state: Rescued, on: true, mark: Set, markAt: now.Add(time.Hour), notBefore: now.Add(time.Hour)},
		{name: "a mark that does not parse is written again", notice: time.Hour, claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, "soon")),
			inv: []invOpt{rescued}, state: Rescued, on: true, mark: Set, markAt: now.Add(time.Hour), notBefore: now.Add(time.Hour)},
		{name: "snoozed within --max-snooze", notice: time.Hour,
			claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(-time.Minute)), annot(inventory.AnnotationSnoozeUntil, end(48*time.Hour))),
			inv:   []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(48 * time.Hour), note: "snoozed by its owner until"},
		{name: "snoozed beyond --max-snooze: capped", notice: time.Hour,
			claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(-time.Minute)), annot(inventory.AnnotationSnoozeUntil, end(90*24*time.Hour))),
			inv:   []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(-time.Minute + 720*time.Hour), note: "capped at"},
		{name: "a past snooze changes nothing", notice: time.Hour,
			claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(-time.Minute)), annot(inventory.AnnotationSnoozeUntil, end(-time.Hour))),
			inv:   []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(-time.Minute)},
		{name: "a snooze that does not parse is ignored, and said so", notice: time.Hour,
			claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(-time.Minute)), annot(inventory.AnnotationSnoozeUntil, "tomorrow")),
			inv:   []invOpt{rescued}, state: Rescued, on: true, notBefore: now.Add(-time.Minute), note: "is not RFC 3339: ignored"},
		{name: "a use ends the notice", notice: time.Hour, claim: pvc("c", marked(old), annot(inventory.AnnotationReapAfter, end(time.Hour))),
			inv: []invOpt{refs("c", pod("ide", "volume data"))}, state: InUse, mark: Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.NoticePeriod, p.MaxSnooze = tc.notice, 720*time.Hour
			d := Classify(build(append([]invOpt{claims(tc.claim)}, tc.inv...)...), p, now)[0]
			if d.State != tc.state || d.Notice != tc.on || d.Marks.ReapAfter != tc.mark {
				t.Fatalf("state %s, notice %v, mark %v (%s); want %s, %v, %v", d.State, d.Notice, d.Marks.ReapAfter, d.Reason, tc.state, tc.on, tc.mark)
			}
			if tc.mark == Set && !d.Marks.ReapAfterValue.Equal(tc.markAt) {
				t.Errorf("mark %s, want %s", d.Marks.ReapAfterValue, tc.markAt)
			}
			switch {
			case tc.notBefore.IsZero() && d.NotBefore != nil:
				t.Errorf("not before %s, want none", d.NotBefore)
			case !tc.notBefore.IsZero() && (d.NotBefore == nil || !d.NotBefore.Equal(tc.notBefore)):
				t.Errorf("not before %v, want %s", d.NotBefore, tc.notBefore)
			}
			if (tc.note == "") != (d.NoticeNote == "") || !strings.Contains(d.NoticeNote, tc.note) {
				t.Errorf("note %q, want %q", d.NoticeNote, tc.note)
			}
		})
	}
}

// TestExplainShowsTheNotice: explain's next action of a rescued claim under
// a notice names the notice (and a snooze), and its earliest moment is the
// notice's end, not the grace period's.
func TestExplainShowsTheNotice(t *testing.T) {
	p := defaultPolicy()
	p.NoticePeriod, p.MaxSnooze = time.Hour, 720*time.Hour
	end := now.Add(20 * time.Minute)
	inv := build(claims(pvc("c", marked(ago(2*time.Hour)), annot(inventory.AnnotationReapAfter, end.Format(time.RFC3339)),
		annot(inventory.AnnotationSnoozeUntil, now.Add(time.Hour).Format(time.RFC3339)))),
		snaps(ownSnap("s", "c", ready, snapAt(ago(time.Hour)))))
	e, ok := Explain(inv, p, now, inventory.Key{Namespace: "ws", Name: "c"})
	if !ok || e.State != Rescued {
		t.Fatalf("explain: %v %+v", ok, e)
	}
	if !strings.Contains(e.Next.Action, "owner's notice; snoozed by its owner until") || e.Next.Earliest == nil || !e.Next.Earliest.Equal(now.Add(time.Hour)) {
		t.Errorf("next %q at %v, want the notice and its snooze, at the snooze's end %s", e.Next.Action, e.Next.Earliest, now.Add(time.Hour))
	}
}
