package classify

import (
	"os"
	"regexp"
	"testing"
)

// TestStateRules checks the rule table against the contract: the states in
// the order of docs/spec.md#states, each with both of its functions, and
// what each state means to the steps that read the table (restore's
// refusal beside a claim in use, the rescue's targets, guard's claims at
// risk: docs/spec.md#restore-refusals, #rescue, #guard-at-risk).
func TestStateRules(t *testing.T) {
	spec, err := os.ReadFile("../../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| (\\d+) \\| \\[`([A-Za-z]+)`\\]\\(#rule-.*\\| (yes|no) \\|$")
	var order []State
	idle := map[State]bool{}
	for _, m := range row.FindAllStringSubmatch(string(spec), -1) {
		order = append(order, State(m[2]))
		idle[State(m[2])] = m[3] == "yes"
	}
	if len(order) != len(StateRules) {
		t.Fatalf("docs/spec.md#states lists %d states %v, the table %d", len(order), order, len(StateRules))
	}
	for i, r := range StateRules {
		if r.State != order[i] {
			t.Errorf("rule %d is %s, docs/spec.md#states says %s", i+1, r.State, order[i])
		}
		if r.match == nil || r.not == nil || r.then == nil {
			t.Errorf("rule %d (%s) lacks its match, not or then function", i+1, r.State)
		}
		if got := RuleFor(r.State); got.State != r.State || got.Live != r.Live || got.Rescue != r.Rescue || got.Teardown != r.Teardown {
			t.Errorf("RuleFor(%s) = %+v, want the table's row", r.State, got)
		}
		if r.Idle != idle[r.State] {
			t.Errorf("rule %d (%s): Idle %v, docs/spec.md#states says unused %v", i+1, r.State, r.Idle, idle[r.State])
		}
		if States[i] != r.State {
			t.Errorf("States[%d] = %s, want %s", i, States[i], r.State)
		}
	}
	// The last rule decides every orphan the others leave.
	if last := StateRules[len(StateRules)-1]; last.State != Orphaned {
		t.Errorf("the last rule is %s, want Orphaned", last.State)
	}
	for _, tc := range []struct {
		state        State
		live, rescue bool
		atRisk       bool // a teardown loses its data (Rescued: depends on its rescue)
	}{
		{Terminating, false, false, false},
		{Held, false, false, true},
		{Unbound, false, false, false},
		{InUse, true, false, true},
		{Young, false, false, true},
		{Attached, true, false, true},
		{Rescued, false, false, false},
		{Superseded, false, false, true},
		{SnapshotFailed, false, true, true},
		{Snapshotting, false, true, true},
		{Grace, false, false, true},
		{Orphaned, false, true, true},
	} {
		r := RuleFor(tc.state)
		if r.Live != tc.live || r.Rescue != tc.rescue || (r.Teardown != "") != tc.atRisk {
			t.Errorf("%s: live %v, rescue %v, teardown %q; want live %v, rescue %v, at risk %v",
				tc.state, r.Live, r.Rescue, r.Teardown, tc.live, tc.rescue, tc.atRisk)
		}
	}
	if r := RuleFor("NoSuchState"); r.match != nil || r.Live || r.Rescue || r.Teardown != "" {
		t.Errorf("RuleFor of an unknown state = %+v, want the zero rule", r)
	}
}
