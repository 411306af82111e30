package classify

import (
	"os"
	"regexp"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
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
		if got := RuleFor(r.State); got.State != r.State || got.Live != r.Live || got.Rescue != r.Rescue || got.Teardown != r.Teardown ||
			got.Reap != r.Reap || got.Snapshot != r.Snapshot {
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
	for i, r := range StateRules {
		// Rules 7–12 are the orphans' (docs/spec.md#states).
		if r.Orphan != (i >= lifeRules) {
			t.Errorf("rule %d (%s): Orphan %v, want %v", i+1, r.State, r.Orphan, i >= lifeRules)
		}
		// The reap deletes a claim on its rescue only when the decision
		// carries one.
		if r.Reap == ReapOnRescue && r.Snapshot != SnapRescue {
			t.Errorf("rule %d (%s): reaped on its rescue, but its Snapshot is not one", i+1, r.State)
		}
	}
	for _, tc := range []struct {
		state        State
		live, rescue bool
		atRisk       bool // a teardown loses its data (Rescued: depends on its rescue)
		archive      bool // rescued under --superseded archive too
		snap         SnapshotRole
		reap         ReapRule
	}{
		{Terminating, false, false, false, false, SnapOther, NotReaped},
		{Held, false, false, true, false, SnapOther, NotReaped},
		{Unbound, false, false, false, false, SnapOther, NotReaped},
		{InUse, true, false, true, false, SnapOther, NotReaped},
		{Young, false, false, true, false, SnapOther, NotReaped},
		{Attached, true, false, true, false, SnapOther, NotReaped},
		{Rescued, false, false, false, false, SnapRescue, ReapOnRescue},
		{Superseded, false, false, true, true, SnapOther, ReapOnDiscard},
		{SnapshotFailed, false, true, true, false, SnapAttempt, NotReaped},
		{Snapshotting, false, true, true, false, SnapAttempt, NotReaped},
		{Grace, false, false, true, false, SnapOther, NotReaped},
		{Orphaned, false, true, true, false, SnapOther, NotReaped},
	} {
		r := RuleFor(tc.state)
		if r.Live != tc.live || r.Rescue != tc.rescue || (r.Teardown != "") != tc.atRisk {
			t.Errorf("%s: live %v, rescue %v, teardown %q; want live %v, rescue %v, at risk %v",
				tc.state, r.Live, r.Rescue, r.Teardown, tc.live, tc.rescue, tc.atRisk)
		}
		if r.Archive != tc.archive || r.Snapshot != tc.snap || r.Reap != tc.reap {
			t.Errorf("%s: archive %v, snapshot %d, reap %d; want %v, %d, %d",
				tc.state, r.Archive, r.Snapshot, r.Reap, tc.archive, tc.snap, tc.reap)
		}
		// docs/spec.md#rescue: the targets, under each --superseded.
		for _, sup := range []string{SupersededKeep, SupersededArchive, SupersededDiscard} {
			if want := tc.rescue || (tc.archive && sup == SupersededArchive); r.Targeted(sup) != want {
				t.Errorf("%s: Targeted(%s) = %v, want %v", tc.state, sup, r.Targeted(sup), want)
			}
		}
		snap := &inventory.Snapshot{}
		if got := (&Decision{State: tc.state, Snapshot: snap}).Rescue(); (got != nil) != (tc.snap == SnapRescue) {
			t.Errorf("%s: Decision.Rescue() = %v, want the snapshot only for a rescue", tc.state, got)
		}
	}
	if r := RuleFor("NoSuchState"); r.match != nil || r.Live || r.Rescue || r.Teardown != "" || r.Orphan || r.Archive ||
		r.Snapshot != SnapOther || r.Reap != NotReaped {
		t.Errorf("RuleFor of an unknown state = %+v, want the zero rule", r)
	}
}
