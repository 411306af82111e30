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
	inUse := []Claim{{UID: "uid-c", Name: "c", Workspace: "w", State: classify.InUse}}
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
			reasons: map[string]string{"b-1": "kept by --keep-last 1"}},
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
