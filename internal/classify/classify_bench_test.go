package classify

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// benchNamespaces is how many namespaces the benchmark inventory spreads its
// claims over.
const benchNamespaces = 1000

// benchInventory builds a fleet-sized inventory of n claims (n a multiple of
// 20*benchNamespaces for the figures in the comments to hold; n = 100k gives
// 100 claims per namespace). Claims are dealt into 20 buckets by index:
//
//	0 Terminating, 1 Held, 2 Unbound, 3 Young, 4 Attached,
//	5–12 InUse by pods (5 also by a second pod, 6 also by a live owner),
//	13 InUse by a StatefulSet template only, 14 InUse by a pod,
//	15 Rescued, 16 Snapshotting, 17 SnapshotFailed,
//	18 Orphaned by the Unused condition alone (no mark yet),
//	19 Superseded by the bucket-10 claim of its workspace.
//
// That is 50k referrers (45k claims, 5k with a second pod) and 50k
// snapshots: one each for buckets 15–17 and 19, and a user snapshot in the
// workspace of each claim of buckets 5–10. The benchmark is about cost, but
// the mix is checked too (see TestBenchInventoryMix), so that a change that
// short-circuits the expensive states cannot make it look fast.
func benchInventory(n int) *inventory.Inventory {
	inv := &inventory.Inventory{
		Claims:      make([]inventory.Claim, 0, n),
		Referrers:   make(map[inventory.Key][]inventory.Referrer, n/2),
		LiveOwners:  map[types.UID]string{},
		PVs:         make(map[string]inventory.PV, n),
		Attachments: map[string][]inventory.Attachment{},
		Snapshots:   map[string][]inventory.Snapshot{},
		Contents:    map[string]inventory.Content{},
		ServerTime:  now,
	}
	perNS := n / benchNamespaces
	if perNS < 20 {
		perNS = 20
	}
	mark := ago(2 * time.Hour).Format(time.RFC3339)
	for i := range n {
		ns := "team-" + strconv.Itoa(i/perNS)
		name := "ws-" + strconv.Itoa(i)
		bucket := i % 20
		wsName := name
		if bucket == 19 {
			wsName = "ws-" + strconv.Itoa(i-9)
		}
		if bucket == 13 {
			name = "data-ide-" + strconv.Itoa(i)
		}
		c := inventory.Claim{
			Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(i),
			CreationTimestamp: ago(24 * time.Hour),
			Labels: inventory.PickLabels(map[string]string{
				"app.kubernetes.io/name": "workspace", "app.kubernetes.io/managed-by": "ide",
				wsLabel: wsName,
			}, wsLabel),
			Annotations: map[string]string{},
			Phase:       "Bound", VolumeName: "pv-" + strconv.Itoa(i),
		}
		key := c.Key()
		switch bucket {
		case 0:
			c.DeletionTimestamp = tp(ago(time.Minute))
		case 1:
			c.Annotations[inventory.KeyHold] = "true"
		case 2:
			c.Phase, c.VolumeName = "Pending", ""
		case 3:
			c.CreationTimestamp = ago(time.Minute)
		case 4:
			c.Annotations[inventory.AnnotationOrphanedSince] = mark
			inv.Attachments[c.VolumeName] = []inventory.Attachment{{Name: "va-" + strconv.Itoa(i), PVName: c.VolumeName, NodeName: "node-" + strconv.Itoa(i%50), Attached: true}}
		case 13:
			if i%perNS == 13 { // one StatefulSet per namespace
				inv.StatefulSetTemplates = append(inv.StatefulSetTemplates,
					inventory.StatefulSetTemplate{Namespace: ns, StatefulSet: "ide", Template: "data"})
			}
		case 15, 16, 17:
			c.Annotations[inventory.AnnotationOrphanedSince] = mark
			c.Labels.Phase, c.Labels.HasPhase = "Orphaned", true
			s := inventory.Snapshot{Namespace: ns, Name: name + "-rescue-0123456789", UID: types.UID("snap-" + name),
				CreationTimestamp: ago(time.Hour), SourceClaim: name, SourceUID: c.UID, Workspace: wsName, ManagedByJanitor: true,
				OrphanedSince: tp(ago(2 * time.Hour))}
			switch bucket {
			case 15:
				s.ReadyToUse = true
			case 17:
				s.Error = &inventory.SnapshotError{Message: "rpc error: code = ResourceExhausted desc = quota exceeded", Time: ago(time.Minute)}
			}
			inv.Snapshots[ns] = append(inv.Snapshots[ns], s)
		case 18:
			c.Unused = &inventory.Condition{Status: "True", LastTransitionTime: ago(3 * time.Hour)}
		case 19:
			c.CreationTimestamp = ago(48 * time.Hour)
			c.Annotations[inventory.AnnotationOrphanedSince] = mark
			c.Labels.Phase, c.Labels.HasPhase = "Superseded", true
			inv.Snapshots[ns] = append(inv.Snapshots[ns], inventory.Snapshot{Namespace: ns, Name: name + "-old", UID: types.UID("snap-" + name),
				CreationTimestamp: ago(40 * time.Hour), SourceClaim: name, Workspace: wsName, ReadyToUse: true})
		}
		if bucket >= 5 && bucket <= 14 && bucket != 13 {
			inv.Referrers[key] = append(inv.Referrers[key], inventory.Referrer{Kind: "Pod", Namespace: ns, Name: name + "-pod", Detail: "volume home"})
			if bucket == 5 {
				inv.Referrers[key] = append(inv.Referrers[key], inventory.Referrer{Kind: "Pod", Namespace: ns, Name: name + "-backup", Detail: "volume src"})
			}
		}
		if bucket == 6 {
			c.Owners = []inventory.OwnerRef{{APIVersion: "ide.example.com/v1", Kind: "Workspace", Name: name, UID: types.UID("owner-" + name)}}
			inv.LiveOwners[types.UID("owner-"+name)] = "Workspace/" + name
		}
		if bucket >= 5 && bucket <= 10 {
			inv.Snapshots[ns] = append(inv.Snapshots[ns], inventory.Snapshot{Namespace: ns, Name: name + "-daily", UID: types.UID("snap-" + name),
				CreationTimestamp: ago(12 * time.Hour), SourceClaim: name, Workspace: wsName, ReadyToUse: true})
		}
		inv.PVs[c.VolumeName] = inventory.PV{Name: c.VolumeName, CSIDriver: "csi.example.com", VolumeHandle: "vol-" + strconv.Itoa(i)}
		inv.Claims = append(inv.Claims, c)
	}
	// Every ready snapshot is bound to an intact content, as on a cluster.
	for _, list := range inv.Snapshots {
		for j := range list {
			if s := &list[j]; s.ReadyToUse {
				s.ContentName = "snapcontent-" + string(s.UID)
				inv.Contents[s.ContentName] = inventory.Content{Name: s.ContentName, DeletionPolicy: "Delete",
					Snapshot: s.Key(), SnapshotUID: s.UID, HasHandle: true}
			}
		}
	}
	return inv
}

func TestBenchInventoryMix(t *testing.T) {
	const n = 20 * benchNamespaces
	inv := benchInventory(n)
	// Its Superseded claims are superseded by a newer claim of the
	// workspace: the line, under --sessions-carry-data.
	p := defaultPolicy()
	p.SessionsCarryData = true
	ds := Classify(inv, p, now)
	got := map[State]int{}
	for _, d := range ds {
		got[d.State]++
	}
	want := map[State]int{
		Terminating: n / 20, Held: n / 20, Unbound: n / 20, Young: n / 20, Attached: n / 20,
		InUse: n / 2, Rescued: n / 20, Snapshotting: n / 20, SnapshotFailed: n / 20,
		Orphaned: n / 20, Superseded: n / 20,
	}
	for _, s := range States {
		if got[s] != want[s] {
			t.Errorf("%s: %d claims, want %d", s, got[s], want[s])
		}
	}
}

// TestClassifyAllocBudget holds Classify to its allocation budget (fewer than
// 10 per claim) on the benchmark's mix; unlike time, allocations are exact, so
// this can run on a busy machine.
func TestClassifyAllocBudget(t *testing.T) {
	inv := benchInventory(20 * benchNamespaces)
	p := defaultPolicy()
	allocs := testing.AllocsPerRun(3, func() { Classify(inv, p, now) })
	if perClaim := allocs / float64(len(inv.Claims)); perClaim >= 10 {
		t.Errorf("%.2f allocations per claim, budget < 10", perClaim)
	} else {
		t.Logf("%.2f allocations per claim", perClaim)
	}
}

// BenchmarkClassify100k measures a fleet-sized run. Budget: < 2 µs and < 10
// allocations per claim.
func BenchmarkClassify100k(b *testing.B) {
	const n = 100_000
	inv := benchInventory(n)
	p := defaultPolicy()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Classify(inv, p, now)
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	calls := float64(b.N) * n
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/calls, "ns/claim")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/calls, "allocs/claim")
}
