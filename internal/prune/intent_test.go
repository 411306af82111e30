package prune

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestSettleIntent (docs/spec.md#retention-intent): one row per state a
// rescue carrying a prune's intent can be found in.
func TestSettleIntent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snap := func(f func(*inventory.Snapshot)) *inventory.Snapshot {
		s := &inventory.Snapshot{Namespace: "ns", Name: "r", UID: "uid-r", ContentName: "c", ReadyToUse: true, PruneIntent: "2026-01-02T03:00:00Z"}
		if f != nil {
			f(s)
		}
		return s
	}
	content := func(f func(*inventory.Content)) *inventory.Content {
		c := &inventory.Content{Name: "c", SnapshotUID: "uid-r", HasHandle: true, DeletionPolicy: "Delete"}
		if f != nil {
			f(c)
		}
		return c
	}
	for _, c := range []struct {
		name    string
		snap    *inventory.Snapshot
		content *inventory.Content
		want    IntentAction
		why     string
	}{
		{"no intent", snap(func(s *inventory.Snapshot) { s.PruneIntent = "" }), content(nil), IntentNone, ""},
		{"kept, content Delete: back to Retain", snap(nil), content(nil), IntentRetain, "goes back to Retain"},
		{"kept, not ready: back to Retain all the same", snap(func(s *inventory.Snapshot) { s.ReadyToUse = false }), content(nil), IntentRetain, "goes back to Retain"},
		{"being deleted: left", snap(func(s *inventory.Snapshot) { s.DeletionTimestamp = &now }), content(nil), IntentLeave, "being deleted"},
		{"content Retain already: cleared", snap(nil), content(func(c *inventory.Content) { c.DeletionPolicy = "Retain" }), IntentClear, "Retain already"},
		{"no content: cleared", snap(nil), nil, IntentClear, "no content"},
		{"content bound to another snapshot: not touched", snap(nil), content(func(c *inventory.Content) { c.SnapshotUID = "uid-other" }), IntentClear, "another snapshot"},
		{"content being deleted: cleared", snap(nil), content(func(c *inventory.Content) { c.DeletionTimestamp = &now }), IntentClear, "being deleted already"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, why := SettleIntent(c.snap, c.content)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Errorf("SettleIntent = %v, %q; want %v, %q", got, why, c.want, c.why)
			}
		})
	}
}
