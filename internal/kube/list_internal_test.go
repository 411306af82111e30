package kube

import (
	"maps"
	"slices"
	"testing"
)

// TestKeyedKeepDropsWhatAnAttemptAdded: a retried or restarted list drops
// what its failed attempt added to a map as it does from a slice, and
// keeps what came before.
func TestKeyedKeepDropsWhatAnAttemptAdded(t *testing.T) {
	m := map[string]int{}
	var order []string
	acc := keyed(m, &order)
	add := func(keys ...string) {
		for _, k := range keys {
			m[k] = len(order)
			order = append(order, k)
		}
	}
	add("a", "b")
	mark := acc.n()
	add("c", "d")
	acc.keep(mark)
	if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, []string{"a", "b"}) || acc.n() != 2 {
		t.Fatalf("after keep(%d): keys %v, n %d", mark, got, acc.n())
	}
	add("c")
	acc.keep(0)
	if len(m) != 0 || acc.n() != 0 {
		t.Fatalf("after keep(0): %v", m)
	}
}
