package inventory

import (
	"testing"
	"time"
)

// TestRestoringMarkLifetime pins the restoring mark's lifetime as a number
// (docs/spec.md#restore-protects-source; mutant M22 of issue 40 made it two
// minutes and no test noticed): a mark protects its snapshot from prune for
// a day, to the second, and one that cannot be dated protects it always.
func TestRestoringMarkLifetime(t *testing.T) {
	if RestoringFor != 24*time.Hour {
		t.Fatalf("RestoringFor = %s, want 24h: the contract keeps a restore's source a day", RestoringFor)
	}
	set := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := RestoringValue("ws", "ws-a-restored", set)
	if got, ok := RestoringSince(v); !ok || !got.Equal(set) {
		t.Fatalf("RestoringSince(%q) = %s, %v; want %s", v, got, ok, set)
	}
	for _, c := range []struct {
		name  string
		v     string
		after time.Duration
		want  bool
	}{
		{"just set", v, 0, true},
		{"three minutes old (a slow restore)", v, 3 * time.Minute, true},
		{"an hour old", v, time.Hour, true},
		{"a second short of a day", v, 24*time.Hour - time.Second, true},
		{"a day old", v, 24 * time.Hour, false},
		{"older than a day", v, 25 * time.Hour, false},
		{"no mark", "", 0, false},
		{"a mark that cannot be dated, a year on", "ws/ws-a-restored", 365 * 24 * time.Hour, true},
		{"a mark whose time does not parse", "ws/ws-a-restored@yesterday", 365 * 24 * time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := RestoringBlocks(c.v, set.Add(c.after)); got != c.want {
				t.Errorf("RestoringBlocks(%q, set+%s) = %v, want %v", c.v, c.after, got, c.want)
			}
		})
	}
}
