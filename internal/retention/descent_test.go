package retention

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// TestDecideByDescent is issue 38's findings in retention
// (docs/spec.md#rule-descent): a rescue is pruned only when a copy that
// descends from its data holds it; a newer claim of the workspace, a claim
// of the same name or someone else's snapshot of another claim never does,
// unless the operator states --sessions-carry-data (and then only within a
// named workspace, with someone else's snapshot dated by its claim's last
// use).
func TestDecideByDescent(t *testing.T) {
	keepFor := Policy{KeepFor: time.Hour}
	carry := Policy{KeepFor: time.Hour, SessionsCarryData: true}
	// KubeSpawner's shape, no workspace label: claim-alice's rescue, then
	// claim-alice again (another UID), created empty.
	jupyter := r("claim-alice-r1", "claim-alice", "", 100)
	again := Claim{UID: "uid-claim-alice-2", Name: "claim-alice", State: classify.InUse, Bound: true, Created: *ago(1)}
	pending := again
	pending.State, pending.Bound = classify.Unbound, false
	outside := again
	outside.State = classify.InUse // outside the selector: prune counts it in use, with no workspace
	r2 := r("alice-2-rescue", "alice-2", "alice", 100)
	// nightly is a backup tool's snapshot of alice-1, cut 2 hours ago: no
	// pvc-janitor.io/source-uid, as a real one comes.
	nightly := foreignOf(r("nightly", "alice-1", "alice", 3))
	nightly.SourceUID = ""
	rows := []struct {
		name    string
		policy  Policy
		rescues []Rescue
		claims  []Claim
		kept    []string // every other rescue is pruned
		reasons map[string]string
	}{
		{name: "A: a new claim of the reused name, in use and created empty, does not hold the old claim's only rescue",
			policy: keepFor, rescues: []Rescue{jupyter}, claims: []Claim{again},
			kept: []string{"claim-alice-r1"}, reasons: map[string]string{"claim-alice-r1": "the only copy"}},
		{name: "A: nor a Pending one", policy: keepFor, rescues: []Rescue{jupyter}, claims: []Claim{pending}, kept: []string{"claim-alice-r1"}},
		{name: "A: nor one under --sessions-carry-data (no workspace label: no session line)",
			policy: carry, rescues: []Rescue{jupyter}, claims: []Claim{outside}, kept: []string{"claim-alice-r1"}},
		{name: "A: a new claim of the name restored from the rescue (dataSource) and Bound holds it",
			policy: keepFor, rescues: []Rescue{jupyter},
			claims: []Claim{{UID: "uid-claim-alice-2", Name: "claim-alice", State: classify.InUse, Bound: true, Created: *ago(1), RestoresFrom: "claim-alice-r1"}},
			kept:   nil, reasons: map[string]string{"claim-alice-r1": "its data is also in claim claim-alice: created from it (spec.dataSource"}},
		{name: "returning user: a newer claim of the workspace in use, created empty, does not hold the rescue",
			policy: keepFor, rescues: []Rescue{r2},
			claims: []Claim{{UID: "uid-alice-3", Name: "alice-3", Workspace: "alice", State: classify.InUse, Bound: true, Created: *ago(1)}},
			kept:   []string{"alice-2-rescue"}},
		{name: "returning user under --sessions-carry-data: the operator says it does",
			policy: carry, rescues: []Rescue{r2},
			claims: []Claim{{UID: "uid-alice-3", Name: "alice-3", Workspace: "alice", State: classify.InUse, Bound: true, Created: *ago(1)}},
			kept:   nil, reasons: map[string]string{"alice-2-rescue": "claim alice-3: it carries the workspace's line past it (--sessions-carry-data)"}},
		{name: "returning user restored by the janitor (restored-from): the restored claim holds the rescue",
			policy: keepFor, rescues: []Rescue{r2},
			claims: []Claim{{UID: "uid-alice-3", Name: "alice-3", Workspace: "alice", State: classify.InUse, Bound: true, Created: *ago(1),
				RestoredFrom: "alice-2-rescue", RestoredDataTime: ago(100).Format(time.RFC3339)}},
			kept: nil},
		{name: "two claims: data's only rescue is kept beside a home restored from home's rescue and a data claim created empty",
			policy:  keepFor,
			rescues: []Rescue{r("home-1-r", "home-1", "alice", 100), r("data-1-r", "data-1", "alice", 100)},
			claims: []Claim{{UID: "uid-home-2", Name: "home-2", Workspace: "alice", State: classify.InUse, Bound: true, Created: *ago(1), RestoresFrom: "home-1-r"},
				{UID: "uid-data-2", Name: "data-2", Workspace: "alice", State: classify.InUse, Bound: true, Created: *ago(1)}},
			kept: []string{"data-1-r"}, reasons: map[string]string{"home-1-r": "its data is also in claim home-2: created from it", "data-1-r": "the only copy"}},
		{name: "E: a nightly backup of session 1's idle claim does not hold session 2's only rescue",
			policy: keepFor, rescues: []Rescue{r2},
			claims: []Claim{{UID: "uid-alice-1", Name: "alice-1", Workspace: "alice", State: classify.Rescued, Bound: true, Created: *ago(300),
				OrphanedSince: ago(200), Rescue: nightly}},
			kept: []string{"alice-2-rescue"}},
		{name: "E under --sessions-carry-data: the backup is dated by its claim's orphaned-since, before session 2's data",
			policy: carry, rescues: []Rescue{r2},
			claims: []Claim{{UID: "uid-alice-1", Name: "alice-1", Workspace: "alice", State: classify.Rescued, Bound: true, Created: *ago(300),
				OrphanedSince: ago(200), Rescue: nightly}},
			kept: []string{"alice-2-rescue"}},
		{name: "two rescues of one claim with equal data times: one is kept",
			policy: keepFor, rescues: []Rescue{r("a-x", "a", "w", 100), r("a-y", "a", "w", 100)},
			kept: []string{"a-y"}},
		{name: "an older rescue of the same claim is held by its newer one",
			policy: keepFor, rescues: []Rescue{r("a-1", "a", "w", 300), r("a-2", "a", "w", 100)},
			kept: []string{"a-2"}, reasons: map[string]string{"a-1": "its data is also in rescue a-2: a snapshot of the same claim with data as new"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			vs := verdicts(Decide(row.policy, row.rescues, contents(row.rescues), row.claims, now))
			checkKept(t, vs, row.rescues, row.kept, row.reasons)
		})
	}
}
