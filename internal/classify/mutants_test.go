package classify

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The rows of this file sit exactly on the boundaries of the safety rules
// that the test audit of 2f2dc47 found unguarded (issue 40): each boundary
// is pinned one second on either side, with --clock-skew 0s where the
// default 2s would hide a second moved. scripts/mutants lists the mutants
// they kill.

// TestNoticeMarkOfAnEarlierPeriod is docs/spec.md#notice's "a mark that ends
// before the current orphan period's orphaned-since plus the notice period
// is no notice of this period" at the second (mutant M01): a mark ending one
// second short of orphaned-since + notice is written again from now; one
// ending exactly there is this period's notice.
func TestNoticeMarkOfAnEarlierPeriod(t *testing.T) {
	old := ago(2 * time.Hour)
	const notice = time.Hour
	rescued := snaps(ownSnap("s", "c", ready, snapAt(ago(time.Hour))))
	for _, tc := range []struct {
		name    string
		mark    time.Time
		rewrite bool
		until   time.Time
	}{
		{"a mark ending a second short of orphaned-since + notice", old.Add(notice - time.Second), true, now.Add(notice)},
		{"a mark ending within the orphan period's first notice", old.Add(notice / 2), true, now.Add(notice)},
		{"a mark ending exactly at orphaned-since + notice", old.Add(notice), false, old.Add(notice)},
		{"a mark ending a second later", old.Add(notice + time.Second), false, old.Add(notice + time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.NoticePeriod, p.MaxSnooze = notice, 720*time.Hour
			cl := pvc("c", marked(old), annot(inventory.AnnotationReapAfter, tc.mark.Format(time.RFC3339)))
			d := Classify(build(claims(cl), rescued), p, now)[0]
			if got := d.Marks.ReapAfter == Set; got != tc.rewrite {
				t.Fatalf("mark written again: %v, want %v (%s)", got, tc.rewrite, d.Reason)
			}
			if d.NotBefore == nil || !d.NotBefore.Equal(tc.until) {
				t.Errorf("not before %v, want %s", d.NotBefore, tc.until)
			}
		})
	}
}

// TestLastUseBoundsTheEvidence is docs/spec.md#rule-last-used at the second
// (mutants M14 and M15): an orphaned-since mark, or an Unused condition,
// of a second before the last use the janitor saw dates nothing; at that
// second it does. A condition of the second before the recorded use (the
// use is rounded up) cannot be told apart from one that came before the
// use: the model checker found the loss when it was trusted (issue 38: a
// frozen condition of 20:00.2, a pod seen at 20:00.4, used until 20:05). OrphanedSince is asked directly, then
// the whole classifier with --clock-skew 0s and a rescue cut at the second
// of the last use: it rescues the claim only when the evidence is trusted.
func TestLastUseBoundsTheEvidence(t *testing.T) {
	used := ago(3 * time.Hour) // the last use the janitor saw
	for _, tc := range []struct {
		name  string
		opt   claimOpt
		known bool
		at    time.Time
	}{
		{"a mark a second before the last use", marked(used.Add(-time.Second)), false, time.Time{}},
		{"a mark at the second of the last use", marked(used), true, used},
		{"a condition whose second ends a second before the last use", unused("True", used.Add(-2*time.Second)), false, time.Time{}},
		{"a condition within the second before the last use, ending at it", unused("True", used.Add(-time.Second/2)), false, time.Time{}},
		{"a condition of the second before the last use", unused("True", used.Add(-time.Second)), false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := pvc("a", lastUsedAt(used), tc.opt)
			got := OrphanedSince(&cl, nil, true, 0, now)
			if got.Known != tc.known || (tc.known && !got.At.Equal(tc.at)) {
				t.Fatalf("OrphanedSince = known %v at %s (%s); want known %v at %s", got.Known, got.At, got.Note, tc.known, tc.at)
			}
			p := defaultPolicy()
			p.ClockSkew = 0
			inv := build(claims(cl), snaps(ownSnap("a-r", "a", ready, snapAt(used), cutAt(used))))
			d := Classify(inv, p, now)[0]
			if rescued := d.State == Rescued; rescued != tc.known {
				t.Errorf("with --clock-skew 0s and a rescue cut at the last use: %s (%s); want rescued %v", d.State, d.Reason, tc.known)
			}
		})
	}
}

// TestNoticeBoundaries is docs/spec.md#notice at the second: the notice
// begins once the grace period is over, not a second before (mutant C06);
// its end is rounded up to the second, never down (C08); a snooze up to
// --max-snooze past the notice's end stands, one a second beyond is capped
// (C07).
func TestNoticeBoundaries(t *testing.T) {
	const notice, maxSnooze = time.Hour, 720 * time.Hour
	end := ago(time.Minute) // a notice that ended
	rescued := snaps(ownSnap("s", "c", ready, snapAt(ago(90*time.Minute)), cutAt(ago(90*time.Minute))))
	for _, tc := range []struct {
		name      string
		at        time.Time // the read's time
		claim     inventory.Claim
		on        bool
		markAt    time.Time // zero: no mark written
		notBefore time.Time
	}{
		{name: "orphaned exactly the grace period: the notice begins", at: now, claim: pvc("c", marked(ago(30*time.Minute))),
			on: true, markAt: now.Add(notice), notBefore: now.Add(notice)},
		{name: "a second short of the grace period: no notice yet", at: now, claim: pvc("c", marked(ago(30*time.Minute-time.Second)))},
		{name: "read within a second: the end is rounded up", at: now.Add(500 * time.Millisecond), claim: pvc("c", marked(ago(2*time.Hour))),
			on: true, markAt: now.Add(notice + time.Second), notBefore: now.Add(notice + time.Second)},
		{name: "a snooze exactly --max-snooze past the end stands", at: now,
			claim: pvc("c", marked(ago(2*time.Hour)), annot(inventory.AnnotationReapAfter, end.Format(time.RFC3339)),
				annot(inventory.AnnotationSnoozeUntil, end.Add(maxSnooze).Format(time.RFC3339))),
			on: true, notBefore: end.Add(maxSnooze)},
		{name: "a snooze a second beyond --max-snooze is capped", at: now,
			claim: pvc("c", marked(ago(2*time.Hour)), annot(inventory.AnnotationReapAfter, end.Format(time.RFC3339)),
				annot(inventory.AnnotationSnoozeUntil, end.Add(maxSnooze+time.Second).Format(time.RFC3339))),
			on: true, notBefore: end.Add(maxSnooze)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.NoticePeriod, p.MaxSnooze = notice, maxSnooze
			inv := build(claims(tc.claim), rescued)
			inv.ServerTime = tc.at
			d := Classify(inv, p, tc.at)[0]
			if d.Notice != tc.on {
				t.Fatalf("notice %v, want %v (%s: %s)", d.Notice, tc.on, d.State, d.Reason)
			}
			if written := d.Marks.ReapAfter == Set; written != !tc.markAt.IsZero() || (written && !d.Marks.ReapAfterValue.Equal(tc.markAt)) {
				t.Errorf("mark written %v at %s, want at %s", written, d.Marks.ReapAfterValue, tc.markAt)
			}
			switch {
			case tc.notBefore.IsZero() && d.NotBefore != nil:
				t.Errorf("not before %s, want none", d.NotBefore)
			case !tc.notBefore.IsZero() && (d.NotBefore == nil || !d.NotBefore.Equal(tc.notBefore)):
				t.Errorf("not before %v, want %s", d.NotBefore, tc.notBefore)
			}
		})
	}
}
