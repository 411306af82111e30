package classify

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestExplainAgreesWithClassify: for every case of TestClassify (so for
// every state: TestClassifyCoversEveryState), explain gives the state
// Classify gives, as the one matching rule with the decision's reason (the
// rules before it say why they did not match, the ones after were not
// reached), and a next action. A new state rule needs no case here.
func TestExplainAgreesWithClassify(t *testing.T) {
	for _, tc := range allCases() {
		t.Run(tc.name, func(t *testing.T) {
			inv, p := buildCase(tc)
			d := Classify(inv, p, now)[0]
			e, ok := Explain(inv, p, now, inventory.Key{Namespace: d.Claim.Namespace, Name: d.Claim.Name})
			if !ok {
				t.Fatal("claim not found")
			}
			if e.State != d.State || len(e.Rules) != len(States) {
				t.Fatalf("explain: state %s with %d rules, classify: %s; want %d rules", e.State, len(e.Rules), d.State, len(States))
			}
			for i, rule := range e.Rules {
				at := indexOf(d.State)
				switch {
				case rule.Number != i+1 || rule.State != States[i] || rule.Why == "":
					t.Errorf("rule %d: %+v", i+1, rule)
				case rule.Matched != (i == at):
					t.Errorf("rule %d (%s) matched %v, classify decided rule %d", i+1, rule.State, rule.Matched, at+1)
				case i == at && !strings.Contains(rule.Why, d.Reason):
					t.Errorf("matching rule says %q, the decision %q", rule.Why, d.Reason)
				case i < at && strings.HasPrefix(rule.Why, "not reached"):
					t.Errorf("rule %s before the state says %q", rule.State, rule.Why)
				case i > at && !strings.HasPrefix(rule.Why, "not reached"):
					t.Errorf("rule %s after the state says %q", rule.State, rule.Why)
				}
			}
			if e.Next.Action == "" {
				t.Error("no next action")
			}
		})
	}
}

// TestExplainEachState: for each state, the explanation's deciding
// evidence, and the next action with its earliest time.
func TestExplainEachState(t *testing.T) {
	p := defaultPolicy()
	grace := ago(10 * time.Minute) // within the 30m grace period
	old := ago(2 * time.Hour)      // past it
	rows := []struct {
		state    State
		inv      *inventory.Inventory
		evidence string // substring of the matching rule's why
		next     string // substring of Next.Action
		earliest *time.Time
		snapRole string // substring of the role of snapshot "s", if any
	}{
		{Terminating, build(claims(pvc("c", deleting(ago(time.Minute))))), "being deleted", "being deleted", nil, ""},
		{Held, build(claims(pvc("c", annot(inventory.KeyHold, "true")))), "held by annotation", "held", nil, ""},
		{Unbound, build(claims(pvc("c", phase("Pending")))), "Pending, not Bound", "Bound", nil, ""},
		{InUse, build(claims(pvc("c")), refs("c", pod("ide", "volume data"))), "used by Pod ws/ide", "in use", nil, ""},
		{Young, build(claims(pvc("c", created(ago(time.Minute))))), "younger than min-age", "older than min-age", tp(ago(time.Minute).Add(p.MinAge)), ""},
		{Attached, build(claims(pvc("c", marked(old))), attachment("pv-c", "n1", "va-1", true)), "still attached to node n1", "in use", nil, ""},
		{Rescued, build(claims(pvc("c", marked(old))), snaps(ownSnap("s", "c", ready, snapAt(ago(time.Hour))))), "rescued by snapshot ws/s",
			"next reap", tp(now), "the rescue"},
		{Superseded, build(claims(pvc("c", workspace("w"), marked(old)), pvc("d", workspace("w"), created(ago(time.Hour)), fromSnapshot("c-early"))),
			refs("d", pod("ide", "volume data")), snaps(snap("c-early", "c", ready, inWorkspace("w"), snapAt(old.Add(-time.Hour)), cutAt(old.Add(-time.Hour))))),
			"superseded by claim ws/d of workspace w, created from snapshot c-early of this claim", "superseded=keep", nil, ""},
		{SnapshotFailed, build(claims(pvc("c", marked(old))), snaps(ownSnap("s", "c", failed("quota exceeded"), snapAt(ago(time.Hour))))),
			"failed: quota exceeded", "tried again", nil, "orphan period"},
		{Snapshotting, build(claims(pvc("c", marked(old))), snaps(ownSnap("s", "c", snapAt(ago(time.Hour))))), "is not ready yet",
			"waits for snapshot s", nil, "orphan period"},
		{Grace, build(claims(pvc("c", marked(grace)))), "within the grace period", "grace period", tp(grace.Add(p.GracePeriod)), ""},
		{Orphaned, build(claims(pvc("c", marked(old)))), "orphaned since " + old.Format(time.RFC3339), "next snapshot", tp(now), ""},
	}
	seen := map[State]bool{}
	for _, r := range rows {
		t.Run(string(r.state), func(t *testing.T) {
			e, ok := Explain(r.inv, p, now, inventory.Key{Namespace: "ws", Name: "c"})
			if !ok {
				t.Fatal("claim not found")
			}
			if e.State != r.state {
				t.Fatalf("state %s (%s), want %s", e.State, e.Reason, r.state)
			}
			seen[e.State] = true
			if len(e.Rules) != len(States) {
				t.Fatalf("%d rules, want %d", len(e.Rules), len(States))
			}
			matched := 0
			for i, rule := range e.Rules {
				if rule.Number != i+1 || rule.State != States[i] || rule.Why == "" {
					t.Errorf("rule %d: %+v", i+1, rule)
				}
				before := i < indexOf(r.state)
				switch {
				case rule.Matched:
					matched++
					if rule.State != r.state || !strings.Contains(rule.Why, r.evidence) {
						t.Errorf("matching rule %s: %q, want %s with %q", rule.State, rule.Why, r.state, r.evidence)
					}
				case before && strings.HasPrefix(rule.Why, "not reached"):
					t.Errorf("rule %s before the state says %q", rule.State, rule.Why)
				case !before && !strings.HasPrefix(rule.Why, "not reached"):
					t.Errorf("rule %s after the state says %q", rule.State, rule.Why)
				}
			}
			if matched != 1 {
				t.Errorf("%d rules matched, want 1", matched)
			}
			if !strings.Contains(e.Next.Action, r.next) {
				t.Errorf("next %q, want %q", e.Next.Action, r.next)
			}
			switch {
			case r.earliest == nil && e.Next.Earliest != nil:
				t.Errorf("earliest %s, want none", e.Next.Earliest)
			case r.earliest != nil && (e.Next.Earliest == nil || !e.Next.Earliest.Equal(*r.earliest)):
				t.Errorf("earliest %v, want %s", e.Next.Earliest, r.earliest)
			}
			if r.snapRole != "" {
				if len(e.Snapshots) != 1 || !strings.Contains(e.Snapshots[0].Role, r.snapRole) {
					t.Errorf("snapshots %+v, want s with role %q", e.Snapshots, r.snapRole)
				}
			}
		})
	}
	if len(seen) != len(rows) {
		t.Errorf("states explained: %v, want the %d of the rows", seen, len(rows))
	}
}

func indexOf(s State) int {
	for i, x := range States {
		if x == s {
			return i
		}
	}
	return -1
}

// TestExplainEvidence: the mark and the condition side by side and which
// one counts; snapshots that do not count say why; the workspace's other
// claims are listed.
func TestExplainEvidence(t *testing.T) {
	p := defaultPolicy()
	mark := ago(3 * time.Hour)
	cond := ago(2 * time.Hour)
	inv := build(
		claims(pvc("c", workspace("w"), marked(mark), unused("True", cond)), pvc("d", workspace("w"), created(ago(30*time.Hour)), marked(ago(20*time.Hour)))),
		snaps(
			ownSnap("before-use", "c", ready, snapAt(ago(150*time.Minute))),           // cut before the condition's time
			ownSnap("broken", "c", snapAt(ago(time.Hour)), failed("io error")),        // not intact
			snap("other-ws", "d", ready, inWorkspace("w"), snapAt(ago(19*time.Hour))), // older data of the workspace
		),
	)
	for i := range inv.Snapshots["ws"] {
		if s := &inv.Snapshots["ws"][i]; s.Name == "before-use" {
			s.Stale = true // labelled pvc-janitor.io/stale
		}
	}
	e, ok := Explain(inv, p, now, inventory.Key{Namespace: "ws", Name: "c"})
	if !ok {
		t.Fatal("not found")
	}
	if e.Mark != mark.Format(time.RFC3339) || e.Condition == nil || !strings.Contains(e.Counts, "Unused condition") ||
		e.OrphanedSince == nil || !e.OrphanedSince.Equal(cond.Add(time.Second)) {
		t.Errorf("mark %q condition %+v counts %q since %v", e.Mark, e.Condition, e.Counts, e.OrphanedSince)
	}
	roles := map[string]string{}
	for _, s := range e.Snapshots {
		roles[s.Name] = s.Role
		if s.Stale != (s.Name == "before-use") {
			t.Errorf("%s: stale %v, want it only on the labelled before-use", s.Name, s.Stale)
		}
		if s.Name == "broken" && (s.Intact || !strings.Contains(s.NotIntact, "not ready")) {
			t.Errorf("broken: %+v", s)
		}
	}
	for name, want := range map[string]string{"before-use": "cut before this claim's orphaned-since", "broken": "orphan period", "other-ws": "older data of the workspace"} {
		if !strings.Contains(roles[name], want) {
			t.Errorf("%s: role %q, want %q", name, roles[name], want)
		}
	}
	if len(e.OtherClaims) != 1 || e.OtherClaims[0].Name != "d" {
		t.Errorf("other claims %+v", e.OtherClaims)
	}
	if _, ok := Explain(inv, p, now, inventory.Key{Namespace: "ws", Name: "nope"}); ok {
		t.Error("an unknown claim explained")
	}
}

// TestExplainRescueBehindTheClock: explain shows why the janitor's own rescue
// cut within --clock-skew of orphaned-since is no rescue (issue 23 finding
// 6): the SnapshotFailed rule's reason and the snapshot's role name it.
func TestExplainRescueBehindTheClock(t *testing.T) {
	inv := build(claims(pvc("a", marked(ago(2*time.Hour)))),
		snaps(janitorSnap("a-rescue", "a", ago(2*time.Hour), cutAt(ago(2*time.Hour).Add(time.Second)))))
	e, ok := Explain(inv, defaultPolicy(), now, inventory.Key{Namespace: "ws", Name: "a"})
	if !ok {
		t.Fatal("not found")
	}
	if e.State != SnapshotFailed || !strings.Contains(e.Reason, "is within --clock-skew 2s of orphaned-since") {
		t.Errorf("state %s (%q), want SnapshotFailed naming the clock skew", e.State, e.Reason)
	}
	for _, r := range e.Rules {
		if r.State == Rescued && !strings.Contains(r.Why, "plus --clock-skew 2s") {
			t.Errorf("rule Rescued: %q, want it to name the clock skew", r.Why)
		}
	}
	if len(e.Snapshots) != 1 || !strings.Contains(e.Snapshots[0].Role, "cut within --clock-skew 2s of orphaned-since") {
		t.Errorf("snapshots %+v, want a-rescue's role to name the clock skew", e.Snapshots)
	}
}
