//go:build integration

package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestNoticePeriod (issue 28, docs/spec.md#notice): under --notice-period
// 1h an orphan is rescued, gets the reap-after mark and a ReapScheduled
// Event, and is not reaped; once its notice ended it is; an owner's snooze
// postpones it, and one beyond --max-snooze is capped and reported.
func TestNoticePeriod(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	orphan(t, f, ns, "ws-b", "b", "")
	runNotice := func(extra ...string) report {
		t.Helper()
		args := reapArgs("run", ns, append([]string{"--yes", "--max-deletion-percent", "100", "--notice-period", "1h"}, extra...)...)
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
		}
		return parse(t, out)
	}
	entry := func(r report, name string) (action, reason, reapAfter, notice string) {
		for _, c := range r.Claims {
			if c.Name == name {
				return c.Action, c.Reason, c.ReapAfter, c.Notice
			}
		}
		t.Fatalf("%s not in the report", name)
		return
	}
	annotate := func(name string, kv map[string]string) {
		t.Helper()
		var parts []string
		for k, v := range kv {
			parts = append(parts, fmt.Sprintf("%q:%q", k, v))
		}
		patch := `{"metadata":{"annotations":{` + strings.Join(parts, ",") + `}}}`
		if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The first run rescues both and tells their owners; it deletes nothing.
	start := time.Now()
	r := runNotice()
	for _, name := range []string{"ws-a", "ws-b"} {
		action, reason, reapAfter, _ := entry(r, name)
		if !exists(t, f, ns, name) || action == "deleted" {
			t.Fatalf("%s deleted within its notice (%s: %s)", name, action, reason)
		}
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mark, err := time.Parse(time.RFC3339, c.Annotations[inventory.AnnotationReapAfter])
		if err != nil || mark.Before(start.Add(59*time.Minute)) || mark.After(time.Now().Add(61*time.Minute)) {
			t.Errorf("%s: reap-after %q (%v), want about an hour from now", name, c.Annotations[inventory.AnnotationReapAfter], err)
		}
		if reapAfter == "" || !strings.Contains(reason, "its owner's notice runs until") {
			t.Errorf("%s: report reapAfter %q, reason %q; want the notice named", name, reapAfter, reason)
		}
	}
	if len(snapshots(t, f, ns)) != 2 {
		t.Errorf("%d snapshots, want both claims rescued", len(snapshots(t, f, ns)))
	}
	events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=ReapScheduled"})
	if err != nil {
		t.Fatal(err)
	}
	told := map[string]int{}
	for _, e := range events.Items {
		told[e.InvolvedObject.Name]++
	}
	if told["ws-a"] != 1 || told["ws-b"] != 1 {
		t.Errorf("ReapScheduled events %v, want one per claim", told)
	}

	// ws-b's owner snoozes it 90 days: kept, capped at --max-snooze (720h)
	// past the notice's end, and reported.
	_, _, markB, _ := entry(r, "ws-b")
	annotate("ws-b", map[string]string{inventory.AnnotationSnoozeUntil: time.Now().Add(90 * 24 * time.Hour).UTC().Format(time.RFC3339)})
	r = runNotice()
	end, err := time.Parse(time.RFC3339, markB)
	if err != nil {
		t.Fatal(err)
	}
	action, reason, reapAfter, notice := entry(r, "ws-b")
	if action == "deleted" || !strings.Contains(notice, "capped at") || reapAfter != end.Add(720*time.Hour).UTC().Format(time.RFC3339) {
		t.Errorf("ws-b snoozed 90 days: %s (%s), reapAfter %s, notice %q; want kept, capped 720h after %s", action, reason, reapAfter, notice, markB)
	}

	// A notice that ends: the marks go (as a use would remove them), a run
	// under --notice-period 2s tells the owners again and deletes nothing;
	// once those two seconds passed, the next run reaps ws-a, and ws-b,
	// whose 90-day snooze --max-snooze 1s caps, saying so.
	for _, name := range []string{"ws-a", "ws-b"} {
		patch := `{"metadata":{"annotations":{"` + inventory.AnnotationReapAfter + `":null}}}`
		if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r = runNotice("--notice-period", "2s", "--max-snooze", "1s")
	for _, name := range []string{"ws-a", "ws-b"} {
		if action, reason, _, _ := entry(r, name); action == "deleted" || !exists(t, f, ns, name) {
			t.Errorf("%s deleted in the run that began its notice (%s)", name, reason)
		}
	}
	// Wait on the API server's clock (the notice's), not the host's.
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newEnd, err := time.Parse(time.RFC3339, c.Annotations[inventory.AnnotationReapAfter])
	if err != nil {
		t.Fatalf("ws-b's new notice: %v", err)
	}
	if err := f.WaitServerAfter(ctx, ns, newEnd.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	r = runNotice("--notice-period", "2s", "--max-snooze", "1s")
	if action, reason, _, _ := entry(r, "ws-a"); action != "deleted" {
		t.Errorf("ws-a after its notice: %s (%s), want deleted", action, reason)
	}
	if action, reason, _, notice := entry(r, "ws-b"); action != "deleted" || !strings.Contains(notice, "capped at") {
		t.Errorf("ws-b under --max-snooze 1s: %s (%s), notice %q; want deleted, the cap reported", action, reason, notice)
	}
}
