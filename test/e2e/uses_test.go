//go:build integration

package cli_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestUseIsWrittenDownWhenTheRunEnds: a use the janitor saw is written down
// (its marks removed) even when the run's context has ended (a lost lease,
// a stop signal), while new marks are not written after that; a removal the
// API server refuses for the whole retry budget is reported as a lost use
// (docs/spec.md#marks: on a cluster without the Unused condition the next run
// cannot see it).
func TestUseIsWrittenDownWhenTheRunEnds(t *testing.T) {
	bg := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	marked := map[string]string{inventory.AnnotationOrphanedSince: "2026-01-01T00:00:00Z"}
	for _, name := range []string{"used", "orphan", "refused"} {
		s := testenv.ClaimSpec{Namespace: ns, Name: name, Labels: map[string]string{"workspace": name}}
		if name != "orphan" {
			s.Annotations = marked
		}
		if _, err := f.BoundClaim(bg, s); err != nil {
			t.Fatal(err)
		}
	}
	decision := func(c *kube.Clients, name string, m classify.Marks) classify.Decision {
		p, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(bg, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cl := kube.Claim(p, "workspace")
		return classify.Decision{Claim: &cl, State: classify.InUse, Marks: m}
	}
	remove := classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove, Attempts: classify.Remove}
	set := classify.Marks{OrphanedSince: classify.Set, OrphanedSinceValue: time.Now().UTC().Truncate(time.Second)}

	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200})
	if err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(bg)
	cancel()
	retry := kube.RetryPolicy{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, MaxElapsed: 2 * time.Second}
	c.Retry = retry
	res := mark.Apply(ended, c, []classify.Decision{decision(c, "orphan", set), decision(c, "used", remove)},
		mark.Options{Concurrency: 2})
	if len(res.Errors) != 0 {
		t.Fatalf("errors: %v", res.Errors)
	}
	used, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(bg, "used", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := used.Annotations[inventory.AnnotationOrphanedSince]; ok {
		t.Errorf("the use was not written down after the run ended: orphaned-since still %q", v)
	}
	orphan, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(bg, "orphan", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := orphan.Annotations[inventory.AnnotationOrphanedSince]; ok {
		t.Errorf("a new mark was written after the run ended: %q", v)
	}
	if lost := c.Uses.Unrecorded(); len(lost) != 0 {
		t.Errorf("lost uses %v, want none", lost)
	}

	// Every write refused with 500 for the whole retry budget.
	p := env.StartFaultProxy(t, 1)
	p.Set(testenv.Faults{Rate500: 1, Verbs: []string{"PATCH"}})
	rc, _, _, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: p.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := kube.NewClients(rc, kube.ClientOptions{QPS: 100, Burst: 200, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	res = mark.Apply(bg, pc, []classify.Decision{decision(pc, "refused", remove)}, mark.Options{Concurrency: 1})
	if len(res.Errors) != 1 {
		t.Fatalf("errors %v, want the refused removal", res.Errors)
	}
	if lost := pc.Uses.Unrecorded(); len(lost) != 1 || lost[0] != ns+"/refused" {
		t.Errorf("lost uses %v, want [%s/refused]", lost, ns)
	}
	if _, ok := pc.Uses.Seen(used.UID); ok {
		t.Errorf("a claim of another client's run is in this run's uses")
	}
}
