package retention

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestKeepForAtTheSecond is --keep-for (docs/spec.md#retention) at its
// boundary (mutant T01 of scripts/mutants): of two rescues of one claim, the
// older is a candidate once cut exactly --keep-for ago, not a second
// before; the newer, which holds its data, stays.
func TestKeepForAtTheSecond(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rescue := func(name string, cut time.Time) Rescue {
		data := cut.Add(-time.Hour)
		return Rescue{Snapshot: inventory.Snapshot{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), SourceClaim: "a",
			SourceUID: "uid-a", Workspace: "w", ManagedByJanitor: true, OrphanedSince: &data, CutTime: &cut,
			CreationTimestamp: cut, ReadyToUse: true, ContentName: "c-" + name}}
	}
	older, newer := at.Add(-300*time.Hour), at.Add(-100*time.Hour)
	rs := []Rescue{rescue("a-1", older), rescue("a-2", newer)}
	cs := map[string]inventory.Content{}
	for _, x := range rs {
		cs[x.ContentName] = inventory.Content{Name: x.ContentName, SnapshotUID: x.UID, HasHandle: true, DeletionPolicy: "Delete"}
	}
	for _, c := range []struct {
		name    string
		keepFor time.Duration
		prune   bool
	}{
		{"cut exactly --keep-for ago", 300 * time.Hour, true},
		{"cut a second less than --keep-for ago", 300*time.Hour + time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range Decide(Policy{KeepFor: c.keepFor}, rs, cs, nil, at) {
				want := c.prune && v.Snapshot.Name == "a-1"
				if v.Prune != want {
					t.Errorf("%s: prune %v (%s), want %v", v.Snapshot.Name, v.Prune, v.Reason, want)
				}
			}
		})
	}
}
