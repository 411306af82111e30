package classify

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// State is a claim's state. The strings are public interface: JSON output,
// the phase label, exit codes, the chart and the docs use them.
type State string

// The states of docs/spec.md#states, in order of precedence (first match wins).
const (
	Terminating    State = "Terminating"
	Held           State = "Held"
	Unbound        State = "Unbound"
	InUse          State = "InUse"
	Young          State = "Young"
	Attached       State = "Attached"
	Rescued        State = "Rescued"
	Superseded     State = "Superseded"
	SnapshotFailed State = "SnapshotFailed"
	Snapshotting   State = "Snapshotting"
	Grace          State = "Grace"
	Orphaned       State = "Orphaned"
)

// States lists every state in precedence order.
var States = func() []State {
	out := make([]State, len(StateRules))
	for i, r := range StateRules {
		out[i] = r.State
	}
	return out
}()

// StateRules are the state rules of docs/spec.md#states, as data: one row per
// state, in the order they are tried; the first that matches decides. A
// row names the state, what the state means to the steps that act on a
// claim (restore, rescue, reap, prune, export, guard and notify read it
// here instead of restating it by the states' names), the
// function that decides whether a claim is in it (and, when it is, writes
// the decision's reason, snapshot and marks), and, for explain, the
// functions that say why it did not match and what happens next.
//
// Rules 1–6 (life.go) are decided on the claim, its users and its volume;
// a claim none of them matches is an orphan, and rules 7–12 (copies.go) are
// decided on its copies once every claim's orphaned-since is known.
//
// To add a state rule: its constant above, a row here (its functions beside
// their neighbours, or in the row), a row in TestClassify, and
// docs/spec.md#states. Nothing else lists the states: metrics, reports,
// explain, guard and its help, the rescue and the reap read this table
// (TestStateRules checks it against the contract's list).
var StateRules = [...]StateRule{
	{State: Terminating, match: (*classifier).terminating, not: notTerminating, then: thenTerminating},
	{State: Held, match: (*classifier).held, not: notHeld, then: thenHeld,
		Teardown: "held by an operator: a teardown would not keep it"},
	{State: Unbound, match: (*classifier).unbound, not: notUnbound, then: thenUnbound},
	{State: InUse, match: (*classifier).inUse, not: notInUse, then: thenInUse, Live: true,
		Teardown: "in use: live data (stop the workspace first)"},
	{State: Young, match: (*classifier).young, not: (*classifier).notYoung, then: (*classifier).thenYoung,
		Teardown: "young: it may be about to be used (stop the workspace first)"},
	{State: Attached, match: (*classifier).attached, not: notAttached, then: thenInUse, Live: true, Teardown: noCopy},
	{State: Rescued, match: (*classifier).rescued, not: (*classifier).notRescued, then: (*classifier).thenRescued,
		Orphan: true, Idle: true, Snapshot: SnapRescue, Reap: ReapOnRescue},
	{State: Superseded, match: (*classifier).supersededRule, not: notSuperseded, then: thenSuperseded,
		Orphan: true, Archive: true, Reap: ReapOnDiscard, Teardown: noCopy},
	{State: SnapshotFailed, match: (*classifier).snapshotFailed, not: notSnapshotFailed, then: (*classifier).thenSnapshotFailed,
		Orphan: true, Rescue: true, Idle: true, Snapshot: SnapAttempt, Teardown: noCopy},
	{State: Snapshotting, match: (*classifier).snapshotting, not: notSnapshotting, then: thenSnapshotting,
		Orphan: true, Rescue: true, Idle: true, Snapshot: SnapAttempt, Teardown: noCopy},
	{State: Grace, match: (*classifier).grace, not: (*classifier).notGrace, then: (*classifier).thenGrace,
		Orphan: true, Idle: true, Teardown: noCopy},
	{State: Orphaned, match: (*classifier).orphaned, not: notOrphaned, then: (*classifier).thenOrphaned,
		Orphan: true, Rescue: true, Idle: true, Teardown: noCopy},
}

// noCopy is why a teardown would lose an orphan's data.
const noCopy = "its data has no durable snapshot"

// lifeRules is how many of StateRules are decided before the orphans' copies
// are looked at (rules 1–6).
const lifeRules = 6

// A StateRule is one state rule (StateRules).
type StateRule struct {
	State State
	// Live: the claim is in use now (a pod, or its volume attached): a
	// restore beside it needs --allow-older.
	Live bool
	// Orphan: decided by rules 7–12, on the orphan's copies: nobody uses
	// the claim (Idle, or Superseded by newer data). A mark of such a
	// claim is news to its owner (notify).
	Orphan bool
	// Rescue: the rescue pipeline snapshots a claim in this state.
	Rescue bool
	// Archive: under --superseded archive the rescue snapshots a claim in
	// this state too, as an archive (docs/spec.md#rule-superseded-policy).
	// Targeted reads both.
	Archive bool
	// Idle: nobody uses the claim and it is still there, what the janitor
	// exists to rescue and free (the report's unused bytes and cost).
	Idle bool
	// Snapshot is what the decision's Snapshot is to the claim: its
	// intact rescue (what the reap deletes it on, prune keeps for it,
	// export bundles, guard checks), or the janitor's own attempt of this
	// orphan period, or neither (Superseded: the newer snapshot is another
	// claim's).
	Snapshot SnapshotRole
	// Reap is what the state means to the reap (docs/spec.md#reap-only-rescued):
	// whether a claim in it may be deleted at all. The grace period, the
	// owner's notice and the workspace are the reap's own checks
	// (reap.Reapable).
	Reap ReapRule
	// Teardown is why tearing the cluster down would lose the claim's data
	// (guard); "" when it would not, and for Rescued, where that depends on
	// its rescue.
	Teardown string

	// match decides whether the claim is in this state and, when it is,
	// writes the decision's state, reason, snapshot and marks.
	match func(c *classifier, f *facts, d *Decision) bool
	// not says why the claim is not in this state (explain, for the rules
	// before the one that matched).
	not func(c *classifier, d *Decision) string
	// then is what happens next to a claim in this state (explain).
	then func(c *classifier, d *Decision) Next
}

// SnapshotRole is what a Decision's Snapshot is to its claim (StateRule.Snapshot).
type SnapshotRole uint8

// Snapshot roles.
const (
	// SnapOther: no snapshot, or another claim's (the newer snapshot that
	// supersedes the claim).
	SnapOther SnapshotRole = iota
	// SnapAttempt: the janitor's own snapshot of this orphan period, not
	// intact yet or failed (nil when only the attempt record decided).
	SnapAttempt
	// SnapRescue: the claim's intact rescue (docs/spec.md#evidence).
	SnapRescue
)

// ReapRule is what a state means to the reap (StateRule.Reap).
type ReapRule uint8

// Reap rules.
const (
	// NotReaped: never deleted.
	NotReaped ReapRule = iota
	// ReapOnRescue: deleted on its intact rescue (Decision.Snapshot), once
	// the reap's own checks pass.
	ReapOnRescue
	// ReapOnDiscard: deleted without a snapshot, only under
	// --superseded=discard and only when the decision's Discard is set
	// (its durable evidence is Decision.Durable: docs/spec.md#rule-superseded).
	ReapOnDiscard
)

// Targeted reports whether the rescue snapshots a claim in this state
// under the --superseded policy superseded (docs/spec.md#rescue).
func (r StateRule) Targeted(superseded string) bool {
	return r.Rescue || (r.Archive && superseded == SupersededArchive)
}

// Rescue is the claim's intact rescue: its Snapshot when its state's
// Snapshot role is SnapRescue (Rescued), else nil.
func (d *Decision) Rescue() *inventory.Snapshot {
	if RuleFor(d.State).Snapshot != SnapRescue {
		return nil
	}
	return d.Snapshot
}

// RuleFor is the row of StateRules for state s (the zero StateRule for a
// state that is none of them).
func RuleFor(s State) StateRule {
	for _, r := range StateRules {
		if r.State == s {
			return r
		}
	}
	return StateRule{State: s}
}

// facts are what the state rules of one claim are decided on: gathered once, in
// the order the rules need them.
type facts struct {
	cl          *inventory.Claim
	refs        []inventory.Referrer
	usedNow     bool // a referrer, or the Unused condition False
	hasPhase    bool // the phase label is set
	hasMark     bool // the orphaned-since mark is set
	hasAttempts bool // the attempt record is set
	atts        []inventory.Attachment
	// For rules 7–12: the orphan's orphaned-since (nil: not known yet),
	// the dating's note, and its copies: the newest rescue, the janitor's
	// own snapshot of this orphan period that is not intact yet, and its
	// own intact one cut behind the clocks' margin.
	since               *time.Time
	note                string
	rescue, own, behind *inventory.Snapshot
}
