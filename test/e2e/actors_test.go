//go:build integration

package cli_test

// Issue 23's second actors, on the real control plane: someone deletes a
// rescue between reap's read and its delete (finding 5). Each test acts at
// the moment the janitor's own hook names (reap.Options.BeforeDelete), so
// nothing depends on timing.

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
)

var actorRetry = kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, MaxElapsed: time.Minute}

// libClients are the janitor's clients for the library calls of these tests.
func libClients(t *testing.T) *kube.Clients {
	t.Helper()
	rc, _, _, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClients(rc, kube.ClientOptions{Retry: actorRetry})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func actorScope(t *testing.T, ns string) kube.Scope {
	t.Helper()
	sel, err := labels.Parse(wsSel)
	if err != nil {
		t.Fatal(err)
	}
	return kube.Scope{Namespaces: []string{ns}, Selector: sel, WorkspaceLabel: "workspace"}
}

// TestRescueDeletedBeforeReapStopsTheReap (docs/spec.md#reap-rescue-reread):
// reap decides ws-a is Rescued; before its delete someone deletes the
// rescue. The claim is not deleted, and the outcome says why.
//
// Safety v3 (issue 23), finding 5.
func TestRescueDeletedBeforeReapStopsTheReap(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	rescued(t, f, ns)
	c := libClients(t)
	var gone []string
	o := reap.Options{Scope: actorScope(t, ns), Policy: classify.Policy{WorkspaceLabel: "workspace"},
		MaxDeletions: 10, MaxDeletionPercent: 100,
		BeforeDelete: func(ctx context.Context, k inventory.Key) {
			// The workspace manager's cleanup: every snapshot of the claim.
			for _, s := range snapshots(t, f, ns) {
				if s.Spec.Source.PersistentVolumeClaimName != nil && *s.Spec.Source.PersistentVolumeClaimName == k.Name {
					if err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						t.Error(err)
					}
					gone = append(gone, s.Name)
				}
			}
		}}
	res, err := reap.DeleteCandidates(context.Background(), c, map[inventory.Key]bool{{Namespace: ns, Name: "ws-a"}: true}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) == 0 {
		t.Fatal("the hook deleted no rescue: the test proves nothing")
	}
	if len(res.Outcomes) != 1 {
		t.Fatalf("outcomes %+v, want one for ws-a", res.Outcomes)
	}
	out := res.Outcomes[0]
	if !exists(t, f, ns, "ws-a") {
		t.Fatalf("ws-a was deleted after its rescue %v was: %s (%s)", gone, out.Action, out.Message)
	}
	if out.Action != reap.ActionSkipped || !strings.Contains(out.Message, "rescue") {
		t.Errorf("ws-a: %s (%s), want %s saying what became of its rescue", out.Action, out.Message, reap.ActionSkipped)
	}
}
