//go:build integration

package restore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

type world struct {
	t  *testing.T
	f  *testenv.Fixtures
	c  *kube.Clients
	ns string
}

// rescue takes a rescue of the claim as the janitor writes one (labels,
// annotations, claim template), with the claim's bytes as they are now.
func (w *world) rescue(name, claim, ws string) {
	w.t.Helper()
	ctx := context.Background()
	p, err := w.c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	tmpl, _, err := restore.NewTemplate(p)
	if err != nil {
		w.t.Fatal(err)
	}
	ann := map[string]string{inventory.AnnotationSourceUID: string(p.UID), inventory.AnnotationSourceName: claim,
		inventory.AnnotationOrphanedSince: time.Now().UTC().Format(time.RFC3339), restore.AnnotationTemplate: tmpl}
	labels := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": ws}
	if _, err := w.f.Snapshot(ctx, w.ns, name, claim, testenv.SnapshotClassDelete, labels, ann); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.f.WaitSnapshot(ctx, w.ns, name, time.Minute, testenv.Ready); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) restore(req restore.Request, dry bool) (*restore.Outcome, error) {
	req.Namespace = w.ns
	return restore.Do(context.Background(), w.c, req, restore.Options{
		Policy:  classify.Policy{WorkspaceLabel: "workspace", MinAge: time.Minute, GracePeriod: time.Hour},
		DryRun:  dry,
		Timeout: time.Minute,
	})
}

func (w *world) read(claim string) string {
	w.t.Helper()
	b, err := w.f.ReadVolume(context.Background(), w.ns, claim, "notes.txt")
	if err != nil {
		w.t.Fatalf("read %s: %v", claim, err)
	}
	return string(b)
}

// TestRestoreOnRealBytes: a workspace rescued twice, its claim deleted; a
// restore by workspace brings back the newer bytes, one from the older
// rescue only with --allow-older, a dry run creates nothing, and a name
// still taken by the terminating claim is refused.
func TestRestoreOnRealBytes(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200,
		Retry: kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxElapsed: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, f: f, c: c, ns: env.Namespace(t)}
	if _, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: "ws-a", Labels: map[string]string{"workspace": "a"},
		Annotations: map[string]string{"example.com/owner": "alice"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteVolume(ctx, w.ns, "ws-a", "notes.txt", []byte("first draft")); err != nil {
		t.Fatal(err)
	}
	w.rescue("ws-a-rescue-1", "ws-a", "a")
	time.Sleep(1100 * time.Millisecond) // orphaned-since marks are whole seconds
	if err := f.WriteVolume(ctx, w.ns, "ws-a", "notes.txt", []byte("final version")); err != nil {
		t.Fatal(err)
	}
	w.rescue("ws-a-rescue-2", "ws-a", "a")
	if err := c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Delete(ctx, "ws-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Dry run: the plan, nothing created.
	out, err := w.restore(restore.Request{Workspace: "a", As: "back"}, true)
	if err != nil || out.Created || out.Plan.Snapshot.Name != "ws-a-rescue-2" {
		t.Fatalf("dry run: %+v, %v", out, err)
	}
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, "back", metav1.GetOptions{}); err == nil {
		t.Fatal("a dry run created the claim")
	}

	// By workspace: the newest data, bytes and all.
	out, err = w.restore(restore.Request{Workspace: "a", As: "back"}, false)
	if err != nil || !out.Created || !out.Bound {
		t.Fatalf("restore by workspace: %+v, %v", out, err)
	}
	if got := w.read("back"); got != "final version" {
		t.Errorf("restored bytes %q, want the newest rescue's", got)
	}
	back, err := c.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, "back", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Labels["workspace"] != "a" || back.Annotations["example.com/owner"] != "alice" ||
		back.Annotations[restore.AnnotationRestoredFrom] != "ws-a-rescue-2" || back.Annotations[inventory.AnnotationOrphanedSince] != "" {
		t.Errorf("restored claim labels %v annotations %v", back.Labels, back.Annotations)
	}

	// The older rescue: refused beside newer data unless --allow-older.
	_, err = w.restore(restore.Request{From: "ws-a-rescue-1", As: "old"}, false)
	if !restore.IsRefusal(err) || !strings.Contains(err.Error(), "claim "+w.ns+"/back of workspace a") {
		t.Fatalf("older rescue beside newer data: %v, want a refusal naming back", err)
	}
	if _, err := w.restore(restore.Request{From: "ws-a-rescue-1", As: "old", AllowOlder: true}, false); err != nil {
		t.Fatal(err)
	}
	if got := w.read("old"); got != "first draft" {
		t.Errorf("restored bytes %q, want the older rescue's", got)
	}

	// The name of a claim that exists is refused.
	_, err = w.restore(restore.Request{Claim: "ws-a", As: "back"}, false)
	var ref *restore.Refusal
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "exists") {
		t.Errorf("restore onto an existing name: %v, want a refusal", err)
	}
}
