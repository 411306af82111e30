package reap

import (
	"strings"
	"testing"
)

// TestLimitAtTheBoundary is the blast radius (docs/spec.md#reap) one step on
// either side of each limit (mutant M25 of issue 40 let
// --max-deletion-percent be exceeded by a point): exactly at a limit
// passes, one deletion or one point over it blocks, and a fractional
// percentage is not rounded down into the limit.
func TestLimitAtTheBoundary(t *testing.T) {
	for _, c := range []struct {
		name          string
		n, total, max int
		pct           float64
		want          string
	}{
		{"at --max-deletions", 5, 100, 5, 100, ""},
		{"one over --max-deletions", 6, 100, 5, 100, "6 claims would be deleted, over --max-deletions 5"},
		{"at --max-deletion-percent", 30, 100, 100, 30, ""},
		{"one point over --max-deletion-percent", 31, 100, 100, 30, "31 of 100 claims in scope (31.0%)"},
		{"a tenth of a point over", 301, 1000, 1000, 30, "301 of 1000 claims in scope (30.1%)"},
		{"one of three under 33%", 1, 3, 10, 33, "1 of 3 claims in scope (33.3%)"},
		{"one of three under 33.34%", 1, 3, 10, 33.34, ""},
		{"everything at 100%", 7, 7, 10, 100, ""},
		{"one of one at 0%", 1, 1, 10, 0, "1 of 1 claims in scope (100.0%)"},
		{"nothing to delete at 0%", 0, 10, 0, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Limit(c.n, c.total, c.max, c.pct)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("Limit(%d, %d, %d, %g) = %q, want %q", c.n, c.total, c.max, c.pct, got, c.want)
			}
		})
	}
}
