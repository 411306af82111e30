package inventory

import (
	"strings"
	"time"
)

// RestoringFor is how long a pvc-janitor.io/restoring mark keeps its
// snapshot from prune on its own (docs/spec.md#restore-protects-source). A
// restore removes its mark once its claim is Bound; one killed before
// that leaves it. Past this age a mark no longer blocks prune, and what
// keeps the snapshot is the claim that is not yet Bound and restores from
// it, if there is one. A day is far longer than any --restore-timeout, and
// short enough that a killed restore never keeps a rescue for good.
const RestoringFor = 24 * time.Hour

// RestoringValue is a restore's mark: which claim it creates, and when (the
// server's clock).
func RestoringValue(ns, claim string, at time.Time) string {
	return ns + "/" + claim + "@" + at.UTC().Format(time.RFC3339)
}

// RestoringSince is when the mark v was set; ok is false when v does not
// parse (written by hand, say): such a mark keeps the snapshot as a hold does.
func RestoringSince(v string) (time.Time, bool) {
	i := strings.LastIndex(v, "@")
	if i < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v[i+1:])
	return t, err == nil
}

// RestoringBlocks reports whether a mark v protects its snapshot at now
// (the server's clock): it is younger than RestoringFor, or cannot be dated.
func RestoringBlocks(v string, now time.Time) bool {
	if v == "" {
		return false
	}
	t, ok := RestoringSince(v)
	return !ok || now.Sub(t) < RestoringFor
}
