package classify

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestAttemptRecord: the one parser of the attempt record, and the
// questions the rescue and the classifier ask of it (AttemptRecord).
func TestAttemptRecord(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const later, earlier = "2026-03-04T06:00:00Z", "2026-03-04T05:00:00Z"
	a, n := inventory.AnnotationRescueAttempts, inventory.AnnotationNextAttempt
	cases := []struct {
		name      string
		ann       map[string]string
		attempts  int
		invalid   string
		due       bool
		scheduled bool
	}{
		{"no record", nil, 0, "", true, false},
		{"backing off", map[string]string{a: "2", n: later}, 2, "", false, true},
		{"due", map[string]string{a: "2", n: earlier}, 2, "", true, true},
		{"a count without a time never backs off, and counts", map[string]string{a: "3"}, 3, "", true, false},
		{"a time without a count never backs off", map[string]string{n: later}, 0, "", true, false},
		{"zero attempts: due, nothing scheduled", map[string]string{a: "0", n: later}, 0, "", true, false},
		{"a count that does not parse", map[string]string{a: "x", n: later}, 0, a, true, false},
		{"a negative count", map[string]string{a: "-1", n: later}, 0, a, true, false},
		{"a time that does not parse keeps the count", map[string]string{a: "4", n: "tomorrow"}, 4, n, true, false},
	}
	for _, c := range cases {
		r := ReadAttempts(c.ann)
		_, _, sched := r.Scheduled()
		if r.Attempts != c.attempts || r.Invalid != c.invalid || r.Due(now) != c.due || sched != c.scheduled {
			t.Errorf("%s: %+v: attempts %d invalid %q due %v scheduled %v; want %d %q %v %v",
				c.name, r, r.Attempts, r.Invalid, r.Due(now), sched, c.attempts, c.invalid, c.due, c.scheduled)
		}
		// SnapshotFailed's backoff is the rescue's rule: SnapshotFailed
		// exactly when a run may not try; and explain's next attempt is
		// the record's schedule.
		opts := []claimOpt{marked(now.Add(-2 * time.Hour))}
		for k, v := range c.ann {
			opts = append(opts, annot(k, v))
		}
		pol := defaultPolicy()
		ds := Classify(build(claims(pvc("a", opts...))), pol, now)
		if backingOff := ds[0].State == SnapshotFailed; backingOff == r.Due(now) {
			t.Errorf("%s: SnapshotFailed %v (%s), but Due %v", c.name, backingOff, ds[0].Reason, r.Due(now))
		}
		// With a failed snapshot of its own, the claim is SnapshotFailed
		// whatever the record says; explain dates the next attempt only
		// when the record schedules one (a record of 0 attempts does not:
		// the rescue tries at once).
		failedOwn := snaps(ownSnap("a-rescue", "a", failed("boom"), snapAt(now.Add(-time.Hour))))
		e, ok := Explain(build(claims(pvc("a", opts...)), failedOwn), pol, now, ds[0].Claim.Key())
		switch {
		case !ok || e.State != SnapshotFailed:
			t.Errorf("%s: with a failed own snapshot: %s (%v), want SnapshotFailed", c.name, e.State, ok)
		case (e.Next.Earliest != nil) != c.scheduled:
			t.Errorf("%s: explain's next attempt %v (%s), want one %v", c.name, e.Next.Earliest, e.Next.Action, c.scheduled)
		}
	}
}
