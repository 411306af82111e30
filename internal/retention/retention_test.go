package retention

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ago(h int) *time.Time { t := now.Add(-time.Duration(h) * time.Hour); return &t }

// r is an intact rescue of claim (uid "uid-"+claim) in workspace ws, its
// data hours ago, cut an hour later.
func r(name, claim, ws string, dataHoursAgo int) Rescue {
	return Rescue{Snapshot: inventory.Snapshot{Namespace: "ns", Name: name, UID: types.UID(name), SourceClaim: claim,
		SourceUID: types.UID("uid-" + claim), Workspace: ws, ManagedByJanitor: true,
		OrphanedSince: ago(dataHoursAgo), CutTime: ago(dataHoursAgo - 1), CreationTimestamp: *ago(dataHoursAgo - 1),
		ReadyToUse: true, ContentName: "c-" + name}}
}

func snap(x Rescue) *inventory.Snapshot { return &x.Snapshot }

// restoringMark is x with a restore's pvc-janitor.io/restoring mark v.
func restoringMark(x Rescue, v string) Rescue { x.Restoring = v; return x }

// foreignOf is x as someone else's snapshot (a backup tool's): not the
// janitor's, no recorded data time.
func foreignOf(x Rescue) *inventory.Snapshot {
	x.ManagedByJanitor, x.OrphanedSince = false, nil
	return &x.Snapshot
}

func contents(rs []Rescue, retain ...string) map[string]inventory.Content {
	m := map[string]inventory.Content{}
	for _, x := range rs {
		policy := "Delete"
		for _, n := range retain {
			if n == x.Name {
				policy = "Retain"
			}
		}
		m[x.ContentName] = inventory.Content{Name: x.ContentName, SnapshotUID: x.UID, HasHandle: true, DeletionPolicy: policy}
	}
	return m
}

func verdicts(vs []Verdict) map[string]Verdict {
	m := map[string]Verdict{}
	for _, v := range vs {
		m[v.Snapshot.Name] = v
	}
	return m
}

func TestDecide(t *testing.T) {
	// Workspace w: claim a rescued twice (old, new), claim b rescued once
	// with the newest data; none of the claims exists any more.
	base := []Rescue{r("a-1", "a", "w", 300), r("a-2", "a", "w", 200), r("b-1", "b", "w", 100)}
	// c is a newer claim of the workspace (created an hour ago), in use.
	inUse := []Claim{{UID: "uid-c", Name: "c", Workspace: "w", State: classify.InUse, Created: *ago(1)}}
	rows := []struct {
		name    string
		policy  Policy
		rescues []Rescue
		claims  []Claim
		retain  []string
		prune   []string // the rescues pruned; every other is kept
		reasons map[string]string
	}{
		{name: "no retention: nothing", policy: Policy{}, prune: nil,
			reasons: map[string]string{"a-1": "no retention set"}},
		{name: "--keep-for: older cuts go, the last copy stays", policy: Policy{KeepFor: 150 * time.Hour}, prune: []string{"a-1", "a-2"},
			reasons: map[string]string{"b-1": "kept by --keep-for"}},
		{name: "--keep-last 1: all but the newest data of the workspace", policy: Policy{KeepLast: 1}, prune: []string{"a-1", "a-2"},
			reasons: map[string]string{"b-1": "kept by --keep-last 1", "a-2": "; its data is also in rescue b-1"}},
		{name: "both: kept when either keeps it", policy: Policy{KeepFor: 250 * time.Hour, KeepLast: 1}, prune: []string{"a-1"},
			reasons: map[string]string{"a-2": "kept by --keep-for"}},
		{name: "never: the only copy of the workspace's last data, even when retention lets it go", policy: Policy{KeepFor: time.Hour}, prune: []string{"a-1", "a-2"},
			reasons: map[string]string{"b-1": "the only copy of its workspace's last data"}},
		{name: "the newest may go once a claim of the workspace is in use", policy: Policy{KeepFor: time.Hour}, claims: inUse, prune: []string{"a-1", "a-2", "b-1"}},
		{name: "the newest may go once a claim is rescued by newer data (a foreign snapshot)", policy: Policy{KeepFor: time.Hour},
			claims: []Claim{{UID: "uid-c", Name: "c", Workspace: "w", State: classify.Rescued,
				Rescue: &inventory.Snapshot{Name: "manual", UID: "manual", CutTime: ago(2), CreationTimestamp: *ago(2)}}},
			prune: []string{"a-1", "a-2", "b-1"}},
		{name: "a not-intact newest never counts as the last copy: the intact one before it does", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{r("a-1", "a", "w", 300), func() Rescue { x := r("a-2", "a", "w", 200); x.ReadyToUse = false; return x }()},
			prune:   []string{"a-2"}, reasons: map[string]string{"a-1": "the only copy"}},
		{name: "never: held", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{func() Rescue { x := r("a-1", "a", "w", 300); x.Hold = true; return x }(), r("a-2", "a", "w", 200)},
			prune:   nil, reasons: map[string]string{"a-1": "held"}},
		{name: "never: a claim restores from it and is not Bound", policy: Policy{KeepFor: time.Hour}, claims: append(inUse, Claim{UID: "uid-r", Name: "r", Workspace: "w2", State: classify.Unbound, RestoresFrom: "a-1"}),
			prune: []string{"a-2", "b-1"}, reasons: map[string]string{"a-1": "claim r restores from it and is not Bound yet"}},
		{name: "never: a restore is reading it (pvc-janitor.io/restoring under a day old)", policy: Policy{KeepFor: time.Hour}, claims: inUse,
			rescues: []Rescue{restoringMark(r("a-1", "a", "w", 300), inventory.RestoringValue("ns", "back", now.Add(-inventory.RestoringFor+time.Minute))), r("a-2", "a", "w", 200), r("b-1", "b", "w", 100)},
			prune:   []string{"a-2", "b-1"}, reasons: map[string]string{"a-1": "a restore is reading it (pvc-janitor.io/restoring: ns/back@"}},
		{name: "never: a restoring mark that cannot be dated", policy: Policy{KeepFor: time.Hour}, claims: inUse,
			rescues: []Rescue{restoringMark(r("a-1", "a", "w", 300), "by hand"), r("a-2", "a", "w", 200), r("b-1", "b", "w", 100)},
			prune:   []string{"a-2", "b-1"}, reasons: map[string]string{"a-1": "a restore is reading it"}},
		{name: "a restoring mark a day old no longer keeps it", policy: Policy{KeepFor: time.Hour}, claims: inUse,
			rescues: []Rescue{restoringMark(r("a-1", "a", "w", 300), inventory.RestoringValue("ns", "back", now.Add(-inventory.RestoringFor))), r("a-2", "a", "w", 200), r("b-1", "b", "w", 100)},
			prune:   []string{"a-1", "a-2", "b-1"}},
		{name: "a restore that is Bound no longer keeps it", policy: Policy{KeepFor: time.Hour}, claims: append(inUse, Claim{UID: "uid-r", Name: "r", Workspace: "w2", State: classify.InUse, Bound: true, RestoresFrom: "a-1"}),
			prune: []string{"a-1", "a-2", "b-1"}},
		{name: "never: its source claim exists and is not rescued by newer data", policy: Policy{KeepFor: time.Hour},
			claims: append(inUse, Claim{UID: "uid-a", Name: "a", Workspace: "w", State: classify.Orphaned}),
			prune:  []string{"b-1"}, reasons: map[string]string{"a-1": "its source claim a exists"}},
		{name: "its source claim rescued by a newer rescue: the older may go", policy: Policy{KeepFor: time.Hour},
			claims: append(inUse, Claim{UID: "uid-a", Name: "a", Workspace: "w", State: classify.Rescued, Rescue: snap(r("a-2", "a", "w", 200))}),
			prune:  []string{"a-1", "b-1"}, reasons: map[string]string{"a-2": "its source claim a exists"}},
		{name: "Retain content without --delete-contents: kept, and says why", policy: Policy{KeepFor: time.Hour}, claims: inUse, retain: []string{"a-1"},
			prune: []string{"a-2", "b-1"}, reasons: map[string]string{"a-1": "is Retain"}},
		{name: "Retain content with --delete-contents: pruned", policy: Policy{KeepFor: time.Hour, DeleteContents: true}, claims: inUse, retain: []string{"a-1"},
			prune: []string{"a-1", "a-2", "b-1"}},
		{name: "without a workspace label, --keep-last counts per source claim", policy: Policy{KeepLast: 1},
			rescues: []Rescue{r("a-1", "a", "", 300), r("a-2", "a", "", 200), r("b-1", "b", "", 100)},
			prune:   []string{"a-1"}, reasons: map[string]string{"a-2": "kept by --keep-last 1", "b-1": "kept by --keep-last 1"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			rs := row.rescues
			if rs == nil {
				rs = base
			}
			// These rows are of the workspace's line: the operator's
			// statement --sessions-carry-data (TestDecideByDescent: without it).
			row.policy.SessionsCarryData = true
			vs := verdicts(Decide(row.policy, rs, contents(rs, row.retain...), row.claims, now))
			for _, x := range rs {
				want := false
				for _, n := range row.prune {
					want = want || n == x.Name
				}
				if v := vs[x.Name]; v.Prune != want {
					t.Errorf("%s: prune %v (%s), want %v", x.Name, v.Prune, v.Reason, want)
				}
			}
			for n, why := range row.reasons {
				if !strings.Contains(vs[n].Reason, why) {
					t.Errorf("%s: reason %q, want it to say %q", n, vs[n].Reason, why)
				}
			}
		})
	}
}

// TestDecideAsksTheLineage is findings 2 and 3 of issue 23 in retention
// (docs/spec.md#retention-last-copy, docs/spec.md#retention-archives): a claim in use
// shields a rescue only when it carries the workspace's line past the
// rescue's data; an archive never shields itself over a rescue of newer or
// equal data and ranks after it.
func TestDecideAsksTheLineage(t *testing.T) {
	archived := func(x Rescue) Rescue { x.Superseded = true; return x }
	// restoredRescue is the rescue of a restored claim (gone now) that
	// records the data time, hours ago, its claim was restored from.
	restoredRescue := func(x Rescue, hours int) Rescue { x.RestoredDataTime = ago(hours); return x }
	r2 := r("alice-2-rescue", "alice-2", "alice", 100)
	r1 := r("alice-1-rescue", "alice-1", "alice", 300)
	rows := []struct {
		name    string
		policy  Policy
		rescues []Rescue
		claims  []Claim
		kept    []string // every other rescue is pruned
		reasons map[string]string
	}{
		{name: "a restored claim of older data in use does not shield the newest rescue (the issue's sequence)", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{r1, r2},
			claims: []Claim{{UID: "uid-old", Name: "alice-old", Workspace: "alice", State: classify.InUse, Created: *ago(1),
				RestoredDataTime: ago(300).Format(time.RFC3339)}},
			kept: []string{"alice-2-rescue"}, reasons: map[string]string{"alice-2-rescue": "the only copy"}},
		{name: "a restored claim of the newest data in use holds it", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{r1, r2},
			claims: []Claim{{UID: "uid-new", Name: "alice-new", Workspace: "alice", State: classify.InUse, Created: *ago(1),
				RestoredDataTime: ago(50).Format(time.RFC3339)}},
			kept: nil},
		{name: "an older claim kept in use by a lingering pod does not shield a newer rescue", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{r2},
			claims:  []Claim{{UID: "uid-alice-1", Name: "alice-1", Workspace: "alice", State: classify.InUse, Created: *ago(500)}},
			kept:    []string{"alice-2-rescue"}},
		{name: "--keep-for: an archive of equal data time is held by the rescue, the rescue by nothing", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{archived(r("zz-archive", "alice-1", "alice", 100)), r2},
			kept:    []string{"alice-2-rescue"}, reasons: map[string]string{"alice-2-rescue": "the only copy"}},
		{name: "--keep-last 1: the rescue ranks before an archive of equal data time", policy: Policy{KeepLast: 1},
			rescues: []Rescue{archived(r("zz-archive", "alice-1", "alice", 100)), r2},
			kept:    []string{"alice-2-rescue"}, reasons: map[string]string{"alice-2-rescue": "kept by --keep-last 1"}},
		{name: "an archive of newer data never shields itself over the rescue", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{archived(r("zz-archive", "alice-1", "alice", 50)), r2},
			kept:    []string{"zz-archive", "alice-2-rescue"}},
		{name: "--keep-last 1: the rescue of a reaped restored claim of older data does not shield the newer line's rescue (chaos, 2026-12-03)",
			policy:  Policy{KeepLast: 1},
			rescues: []Rescue{restoredRescue(r("alice-old-rescue", "alice-old", "alice", 50), 300), r2},
			kept:    []string{"alice-old-rescue", "alice-2-rescue"}, reasons: map[string]string{"alice-2-rescue": "the only copy"}},
		{name: "--keep-last 1: someone else's snapshot that rescues a claim holds only that claim's data, not a tied rescue of another claim",
			policy:  Policy{KeepLast: 1},
			rescues: []Rescue{r("ws-170-rescue", "ws-170", "w170", 100), r("ws-175-rescue", "ws-175", "w170", 100)},
			claims: []Claim{{UID: "uid-ws-176", Name: "ws-176", Workspace: "w170", State: classify.Rescued, Bound: true, Created: *ago(300),
				Rescue: foreignOf(r("backup-176", "ws-176", "w170", 90))}},
			kept: []string{"ws-170-rescue", "ws-175-rescue"}},
		{name: "--keep-last 1: a rescue the run's reap deleted its claim on is kept, whatever the ranking",
			policy:  Policy{KeepLast: 1, Keep: map[types.UID]string{"ws-170-rescue-old": "claim ns/ws-170 was reaped on it in this run"}},
			rescues: []Rescue{r("ws-170-rescue-old", "ws-170", "w170", 300), r("ws-175-rescue", "ws-175", "w170", 100)},
			kept:    []string{"ws-170-rescue-old", "ws-175-rescue"}, reasons: map[string]string{"ws-170-rescue-old": "was reaped on it in this run"}},
		{name: "two rescues of equal data of two sessions: both kept", policy: Policy{KeepFor: time.Hour},
			rescues: []Rescue{r("alice-1-rescue", "alice-1", "alice", 100), r2},
			kept:    []string{"alice-1-rescue", "alice-2-rescue"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			row.policy.SessionsCarryData = true // of the workspace's line: see TestDecide
			vs := verdicts(Decide(row.policy, row.rescues, contents(row.rescues), row.claims, now))
			checkKept(t, vs, row.rescues, row.kept, row.reasons)
		})
	}
}

// checkKept fails t unless exactly the rescues named in kept are kept and
// each reason says what reasons wants.
func checkKept(t *testing.T, vs map[string]Verdict, rescues []Rescue, kept []string, reasons map[string]string) {
	t.Helper()
	for _, x := range rescues {
		want := true
		for _, n := range kept {
			want = want && n != x.Name
		}
		if v := vs[x.Name]; v.Prune != want {
			t.Errorf("%s: prune %v (%s), want %v", x.Name, v.Prune, v.Reason, want)
		}
	}
	for n, why := range reasons {
		if !strings.Contains(vs[n].Reason, why) {
			t.Errorf("%s: reason %q, want it to say %q", n, vs[n].Reason, why)
		}
	}
}
