//go:build integration

package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

func clients(t *testing.T) *kube.Clients {
	t.Helper()
	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadReducesEverything seeds one namespace with every kind of evidence
// and checks the inventory, reading with a page size of 2 so that every
// list is paginated.
func TestReadReducesEverything(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	ws := map[string]string{"workspace": "yes"}
	for i := 0; i < 5; i++ {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: fmt.Sprintf("ws-%d", i), Labels: ws}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "not-a-workspace"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-0", Claims: []string{"ws-0", "not-a-workspace"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Deployment(ctx, ns, "web", "ws-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Job(ctx, ns, "batch", "ws-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.StatefulSet(ctx, ns, "db", "data"); err != nil {
		t.Fatal(err)
	}
	// A claim owned by a live pod. (A claim whose owner is gone is deleted by
	// the garbage collector; the classifier's tests cover that case.)
	owner, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "owner", UID: owner.UID}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-owned", Labels: ws, OwnerReferences: []metav1.OwnerReference{ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.VolumeAttachment(ctx, "va-"+ns, "pv-"+ns+"-ws-3", "node-1", true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.StorageV1().VolumeAttachments().Delete(context.Background(), "va-"+ns, metav1.DeleteOptions{})
	})
	if _, err := f.Snapshot(ctx, ns, "snap-4", "ws-4", "", map[string]string{"workspace": "yes", "ws": "four"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "snap-4", 30*time.Second, testenv.Ready); err != nil {
		t.Fatal(err)
	}

	sel, _ := labels.Parse("workspace=yes")
	before := time.Now().Add(-2 * time.Second)
	inv, err := kube.Read(ctx, clients(t), kube.Scope{Namespaces: []string{ns}, Selector: sel, PageSize: 2, WorkspaceLabel: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Claims) != 6 {
		t.Fatalf("read %d claims, want the 6 selected ones", len(inv.Claims))
	}
	if inv.ServerTime.Before(before) || inv.ServerTime.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("server time %v is not now", inv.ServerTime)
	}
	refs := func(claim string) string {
		var s []string
		for _, r := range inv.Referrers[inventory.Key{Namespace: ns, Name: claim}] {
			s = append(s, r.Kind+"/"+r.Name)
		}
		return strings.Join(s, ",")
	}
	for claim, want := range map[string]string{"ws-0": "Pod/ide-0", "ws-1": "Deployment/web", "ws-2": "Job/batch", "ws-3": "", "ws-4": ""} {
		if got := refs(claim); got != want {
			t.Errorf("referrers of %s = %q, want %q", claim, got, want)
		}
	}
	if _, ok := inv.Referrers[inventory.Key{Namespace: ns, Name: "not-a-workspace"}]; ok {
		t.Error("references to a claim out of scope were kept")
	}
	if len(inv.StatefulSetTemplates) != 1 || inv.StatefulSetTemplates[0].Template != "data" {
		t.Errorf("statefulset templates = %+v", inv.StatefulSetTemplates)
	}
	if inv.LiveOwners[owner.UID] != "Pod/owner" || len(inv.LiveOwners) != 1 {
		t.Errorf("live owners = %v, want only the existing pod", inv.LiveOwners)
	}
	if a := inv.Attachments["pv-"+ns+"-ws-3"]; len(a) != 1 || !a[0].Attached || a[0].NodeName != "node-1" {
		t.Errorf("attachments of ws-3 = %+v", a)
	}
	snaps := inv.Snapshots[ns]
	if len(snaps) != 1 || snaps[0].SourceClaim != "ws-4" || !snaps[0].ReadyToUse || snaps[0].Workspace != "four" || snaps[0].ContentName == "" {
		t.Fatalf("snapshots = %+v", snaps)
	}
	if c, ok := inv.Contents[snaps[0].ContentName]; !ok || c.DeletionPolicy != "Retain" {
		t.Errorf("content of snap-4 = %+v", c)
	}
	for _, c := range inv.Claims {
		if c.Phase != "Bound" || c.VolumeName == "" || c.UID == "" || c.ResourceVersion == "" {
			t.Errorf("claim %s poorly reduced: %+v", c.Name, c)
		}
	}
}

// TestReadExcludesNamespaces checks --exclude-namespace on an all-namespaces read.
func TestReadExcludesNamespaces(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	a, b := env.Namespace(t), env.Namespace(t)
	lbl := map[string]string{"excl-test": a}
	for _, ns := range []string{a, b} {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "c", Labels: lbl}); err != nil {
			t.Fatal(err)
		}
	}
	sel, _ := labels.Parse("excl-test=" + a)
	inv, err := kube.Read(ctx, clients(t), kube.Scope{Selector: sel, Exclude: map[string]bool{b: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Claims) != 1 || inv.Claims[0].Namespace != a {
		t.Fatalf("claims = %+v, want only %s/c", inv.Claims, a)
	}
}

// TestReadKeepsSizesAndClasses: the inventory keeps what the report's sizes
// and money need (issue 16): the claim's capacity and classes, the PV's
// reclaim policy, the snapshot's restore size; as the API objects say.
func TestReadKeepsSizesAndClasses(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	// A dynamically provisioned volume: the driver knows its size.
	p, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-0", Labels: map[string]string{"workspace": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "s", "ws-0", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	vs, err := f.WaitSnapshot(ctx, ns, "s", time.Minute, testenv.Ready)
	if err != nil {
		t.Fatal(err)
	}
	pv, err := f.Kube.CoreV1().PersistentVolumes().Get(ctx, p.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := kube.Read(ctx, clients(t), kube.Scope{Namespaces: []string{ns}, WorkspaceLabel: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Claims) != 1 {
		t.Fatalf("%d claims", len(inv.Claims))
	}
	c := inv.Claims[0]
	capacity := pv.Spec.Capacity.Storage().Value()
	if capacity == 0 || c.Capacity != capacity || c.StorageClass != *p.Spec.StorageClassName {
		t.Errorf("claim capacity %d class %q, want %d and %q", c.Capacity, c.StorageClass, capacity, *p.Spec.StorageClassName)
	}
	if got, want := inv.PVs[pv.Name].ReclaimPolicy, string(pv.Spec.PersistentVolumeReclaimPolicy); got == "" || got != want {
		t.Errorf("PV reclaim policy %q, want %q", got, want)
	}
	s := inv.Snapshots[ns]
	if len(s) != 1 || vs.Status.RestoreSize == nil || s[0].RestoreSize == 0 || s[0].RestoreSize != vs.Status.RestoreSize.Value() {
		t.Errorf("snapshots %+v, want restore size %v", s, vs.Status.RestoreSize)
	}
}

// TestServerTimeIsTakenAfterThePodList is safety row 7
// (docs/spec.md#rule-mark-time): the inventory's server time, which dates
// every fresh mark, is taken after the lists that prove no use. The fault
// proxy makes the server's clock jump an hour forward for the lists that
// prove no use (the pods and the six workload kinds: more responses than
// the six reads before them, so that the clock, which follows what most
// responses agree on (docs/spec.md#rule-server-clock), follows the jump
// once they are in); a server time read before those lists (with the
// claims) would be an hour short of it, and a pod that ended during the
// list would end after its claim's mark.
func TestServerTimeIsTakenAfterThePodList(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a", Labels: map[string]string{"workspace": "a"}}); err != nil {
		t.Fatal(err)
	}
	const jump = time.Hour
	p := env.StartFaultProxy(t, 1)
	p.Set(testenv.Faults{DateOffsetFor: map[string]time.Duration{"pods": jump, "deployments": jump, "replicasets": jump,
		"daemonsets": jump, "statefulsets": jump, "jobs": jump, "cronjobs": jump}})
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClients(cfg, kube.ClientOptions{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	inv, err := kube.Read(ctx, c, kube.Scope{Namespaces: []string{ns}, WorkspaceLabel: "workspace"})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Claims) != 1 {
		t.Fatalf("read %d claims, want ws-a", len(inv.Claims))
	}
	// The pod list's Date is cut to the second: its clock read is at least
	// before+jump-1s.
	if floor := before.Add(jump - time.Second); inv.ServerTime.Before(floor) {
		t.Fatalf("server time %s is before the pod list's clock (at least %s): it was taken before the list",
			inv.ServerTime.UTC().Format(time.RFC3339), floor.UTC().Format(time.RFC3339))
	}
}

// TestReadOwnersOfUnlistedKinds: an owner of a kind the read does not list
// is looked up by kind through what the API server serves (the janitor's
// own discovery, api.go): a live ConfigMap keeps its claim's owner alive, a
// live cluster-scoped owner too, and a kind the server does not serve fails
// the read closed, naming the owner. The read also carries the server's
// version.
func TestReadOwnersOfUnlistedKinds(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	ws := map[string]string{"workspace": "yes"}
	cm, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "state"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]metav1.OwnerReference{
		"by-configmap": {APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID},
		"by-namespace": {APIVersion: "v1", Kind: "Namespace", Name: ns, UID: nsObj.UID},
	}
	for name, ref := range owned {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: ws, OwnerReferences: []metav1.OwnerReference{ref}}); err != nil {
			t.Fatal(err)
		}
	}
	sel, _ := labels.Parse("workspace=yes")
	scope := kube.Scope{Namespaces: []string{ns}, Selector: sel}
	inv, err := kube.Read(ctx, clients(t), scope)
	if err != nil {
		t.Fatal(err)
	}
	if inv.LiveOwners[cm.UID] != "ConfigMap/state" || inv.LiveOwners[nsObj.UID] != "Namespace/"+ns || len(inv.LiveOwners) != 2 {
		t.Errorf("live owners = %v, want the ConfigMap and the namespace", inv.LiveOwners)
	}
	if !strings.HasPrefix(inv.ServerVersion, "v1.") {
		t.Errorf("server version %q", inv.ServerVersion)
	}

	ref := metav1.OwnerReference{APIVersion: "workspaces.example.com/v1", Kind: "Workspace", Name: "alice", UID: "u-alice"}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "by-unserved", Labels: ws, OwnerReferences: []metav1.OwnerReference{ref}}); err != nil {
		t.Fatal(err)
	}
	_, err = kube.Read(ctx, clients(t), scope)
	var re *kube.ReadError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "owner Workspace alice") || !strings.Contains(err.Error(), "workspaces.example.com/v1") {
		t.Errorf("read with an owner of an unserved kind: %v, want a read error naming the owner and its group", err)
	}
}
