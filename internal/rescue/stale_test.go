package rescue

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestStale: only the janitor's rescues of this very claim (by UID), for an
// orphaned-since before the current one, not being deleted and not
// labelled yet, are labelled stale.
func TestStale(t *testing.T) {
	since := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	earlier, later := since.Add(-time.Hour), since.Add(time.Hour)
	gone := since
	base := func() inventory.Snapshot {
		return inventory.Snapshot{Name: "r", ManagedByJanitor: true, SourceUID: "u1", OrphanedSince: &earlier}
	}
	for _, c := range []struct {
		name string
		edit func(*inventory.Snapshot)
		want bool
	}{
		{"a rescue of an earlier orphan period", func(*inventory.Snapshot) {}, true},
		{"the rescue for this orphaned-since", func(s *inventory.Snapshot) { s.OrphanedSince = &since }, false},
		{"a rescue for a later orphaned-since", func(s *inventory.Snapshot) { s.OrphanedSince = &later }, false},
		{"no orphaned-since recorded", func(s *inventory.Snapshot) { s.OrphanedSince = nil }, false},
		{"another claim's, even of that name", func(s *inventory.Snapshot) { s.SourceUID = "u2" }, false},
		{"not the janitor's", func(s *inventory.Snapshot) { s.ManagedByJanitor = false }, false},
		{"being deleted", func(s *inventory.Snapshot) { s.DeletionTimestamp = &gone }, false},
		{"labelled already", func(s *inventory.Snapshot) { s.Stale = true }, false},
	} {
		s := base()
		c.edit(&s)
		if got := Stale(&s, "u1", since); got != c.want {
			t.Errorf("%s: Stale = %v, want %v", c.name, got, c.want)
		}
	}
}
