package classify

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// notice applies the owner's notice to a decision (docs/spec.md#notice).
// Under --notice-period, an orphan past its grace period gets a notice once
// (the pvc-janitor.io/reap-after mark, the end of the notice on the API
// server's clock) and may be reaped no earlier than its end, or than the
// owner's pvc-janitor.io/snooze-until, bounded by --max-snooze past the
// notice's end. A use ends the notice (the mark is removed), and a mark
// older than the orphan period (written before a use the janitor missed)
// is no notice of this one. It only ever postpones a deletion.
func (c *classifier) notice(d *Decision, orphan bool) {
	raw, has := d.Claim.Annotations[inventory.AnnotationReapAfter]
	if !orphan || d.OrphanedSince == nil {
		if has && (d.Marks.RecordsUse() || RuleFor(d.State).Live) {
			d.Marks.ReapAfter = Remove
		}
		return
	}
	if c.p.NoticePeriod <= 0 || !GraceOver(*d.OrphanedSince, c.p.GracePeriod, c.now) {
		return
	}
	d.Notice = true
	end, err := time.Parse(time.RFC3339, raw)
	if !has || err != nil || end.Before(d.OrphanedSince.Add(c.p.NoticePeriod)) {
		end = CeilSecond(c.now.Add(c.p.NoticePeriod))
		d.Marks.ReapAfter, d.Marks.ReapAfterValue = Set, end
	}
	nb := end
	if s, ok := d.Claim.Annotations[inventory.AnnotationSnoozeUntil]; ok {
		d.NoticeNote, nb = snooze(s, end, c.p.MaxSnooze)
	}
	d.NotBefore = &nb
}

// snooze is the owner's snooze-until raw applied to a notice ending at end:
// the note for the report and the earliest reap.
func snooze(raw string, end time.Time, max time.Duration) (string, time.Time) {
	until, err := time.Parse(time.RFC3339, raw)
	switch {
	case err != nil:
		return inventory.AnnotationSnoozeUntil + " " + raw + " is not RFC 3339: ignored", end
	case !until.After(end):
		return "", end
	case until.After(end.Add(max)):
		capped := end.Add(max)
		return inventory.AnnotationSnoozeUntil + " " + until.UTC().Format(time.RFC3339) + " capped at " +
			capped.UTC().Format(time.RFC3339) + " by --max-snooze " + max.String(), capped
	}
	return "snoozed by its owner until " + until.UTC().Format(time.RFC3339), until
}
