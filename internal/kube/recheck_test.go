//go:build integration

package kube_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestReadNamespaceForTheRecheck: the re-check's read of one namespace
// finds the pods referencing each claim (by volume and by generic ephemeral
// volume), the selected claims only, and the snapshots with their contents.
func TestReadNamespaceForTheRecheck(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	ws := map[string]string{"workspace": "w"}
	for _, n := range []string{"ws-a", "ws-b"} {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: n, Labels: ws}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}, EphemeralVolume: "scratch"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "snap-b", "ws-b", "", ws, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "snap-b", 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	c := clients(t)
	sel, _ := labels.Parse("workspace=w")
	o := kube.RecheckOptions{Selector: sel, WorkspaceLabel: "workspace", PageSize: 1, MaxAge: time.Minute}
	nr, err := kube.ReadNamespace(ctx, c, ns, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(nr.Claims) != 2 || nr.ServerTime.IsZero() {
		t.Fatalf("claims %v (want the two selected), server time %s", nr.Claims, nr.ServerTime)
	}
	// The claims as read, for a rescue's template (issue 43): the two
	// selected, across pages, with their UIDs, without managedFields.
	for _, cl := range nr.Claims {
		p := nr.Objects[cl.Name]
		if p == nil || p.UID != cl.UID || len(p.ManagedFields) != 0 || p.Spec.VolumeName == "" {
			t.Errorf("object of %s: %+v", cl.Name, p)
		}
	}
	if len(nr.Objects) != 2 {
		t.Errorf("%d objects, want the two selected claims", len(nr.Objects))
	}
	if r := nr.PodRefs["ws-a"]; len(r) != 1 || r[0].Name != "ide" || r[0].Kind != "Pod" {
		t.Errorf("ws-a referrers %v", r)
	}
	if r := nr.PodRefs["ide-scratch"]; len(r) != 1 || r[0].Detail != "ephemeral volume scratch" {
		t.Errorf("ephemeral claim referrers %v", r)
	}
	if len(nr.Snapshots) != 1 || nr.Snapshots[0].Workspace != "w" || nr.Snapshots[0].ContentName == "" {
		t.Fatalf("snapshots %+v", nr.Snapshots)
	}

	// The inventory for ws-b: its snapshot's content read now.
	rc := kube.NewRechecker(c, o)
	inv, err := rc.Inventory(ctx, &inventory.Inventory{}, inventory.Key{Namespace: ns, Name: "ws-b"})
	if err != nil {
		t.Fatal(err)
	}
	content, ok := inv.Contents[nr.Snapshots[0].ContentName]
	if !ok || content.SnapshotUID != nr.Snapshots[0].UID || !content.HasHandle {
		t.Errorf("content of snap-b: %+v (found %v)", content, ok)
	}
	if len(inv.Referrers[inventory.Key{Namespace: ns, Name: "ws-a"}]) != 1 {
		t.Errorf("referrers %v", inv.Referrers)
	}

	// Shared within MaxAge; read again past it.
	first, err := rc.Namespace(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := rc.Namespace(ctx, ns); again != first {
		t.Error("a read within MaxAge was not shared")
	}
	fresh := kube.NewRechecker(c, kube.RecheckOptions{Selector: sel, WorkspaceLabel: "workspace", MaxAge: time.Nanosecond})
	a, err := fresh.Namespace(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	b, err := fresh.Namespace(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || len(b.PodRefs["ws-b"]) != 1 {
		t.Errorf("a read older than MaxAge was reused: the new pod is not seen (%v)", b.PodRefs)
	}
}
