//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// TestLibraryRunsWithoutTheCommandLine builds janitor.RunOptions with real
// clients and calls janitor.Run under janitor.Lock, as an integration test
// of the library does (cert-manager's cmctl style): no flags, no report,
// typed outcomes, then the cluster's state.
func TestLibraryRunsWithoutTheCommandLine(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	rc, _, _, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClients(rc, kube.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := labels.Parse(wsSel)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, MaxElapsed: time.Minute}
	scan := janitor.ScanOptions{Scope: kube.Scope{Namespaces: []string{ns}, Selector: sel, WorkspaceLabel: "workspace"},
		Policy: classify.Policy{WorkspaceLabel: "workspace"}, Concurrency: 2}
	o := janitor.RunOptions{
		Rescue: janitor.RescueOptions{Scan: scan, Rescue: rescue.Options{Superseded: rescue.SupersededKeep,
			Timeout: time.Minute, ErrorGrace: 30 * time.Second, Attempts: 2, RetryBackoff: time.Minute}},
		Reap: janitor.ReapOptions{Superseded: rescue.SupersededKeep, MaxDeletions: 10, MaxDeletionPercent: 100},
	}
	ctx, release, err := janitor.Lock(context.Background(), c, janitor.LockOptions{Namespace: ns, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	// The snapshot controller drops its finalizer from the claim right
	// after the rescue; a delete racing that is left to the next run.
	for run := 1; ; run++ {
		res, err := janitor.Run(ctx, c, o)
		if err != nil {
			t.Fatal(err)
		}
		if run == 1 && (len(res.Rescue.Outcomes) != 1 || res.Rescue.Outcomes[0].Action != rescue.ActionCreated) {
			t.Fatalf("rescue outcomes %+v, want ws-a's snapshot created", res.Rescue.Outcomes)
		}
		if res.Reap.Blocked != reap.NotBlocked || len(res.Reap.Failures) > 0 || res.Reap.Err != nil || len(res.Reap.Outcomes) != 1 {
			t.Fatalf("reap: blocked %v (%s), failures %v, error %v, outcomes %+v", res.Reap.Blocked, res.Reap.BlockedWhy, res.Reap.Failures, res.Reap.Err, res.Reap.Outcomes)
		}
		out := res.Reap.Outcomes[0]
		if out.Action == reap.ActionDeleted {
			break
		}
		if run > 1 || out.Action != reap.ActionSkipped || !strings.Contains(out.Message, "changed since it was read") {
			t.Fatalf("run %d: ws-a %s (%s), want deleted", run, out.Action, out.Message)
		}
	}
	if exists(t, f, ns, "ws-a") {
		t.Error("ws-a still exists")
	}
	if n := len(snapshots(t, f, ns)); n != 1 {
		t.Errorf("%d snapshots, want ws-a's rescue", n)
	}
}
