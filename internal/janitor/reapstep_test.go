package janitor

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// TestReapStepCandidates: the reap's candidates are the claims reapable on
// the scan (past grace, no notice beginning or running, a discard only
// under --superseded=discard) and the ones the run's rescue left Rescued;
// an interrupted run starts no reap (and so reads nothing: no clients).
func TestReapStepCandidates(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	old, recent, later := now.Add(-time.Hour), now.Add(-time.Minute), now.Add(time.Hour)
	d := func(name string, st classify.State, since *time.Time, f func(*classify.Decision)) classify.Decision {
		x := classify.Decision{Claim: &inventory.Claim{Namespace: "ws", Name: name}, State: st, OrphanedSince: since}
		if f != nil {
			f(&x)
		}
		return x
	}
	scan := &ScanResult{Now: now, Decisions: []classify.Decision{
		d("rescued", classify.Rescued, &old, nil),
		d("within-grace", classify.Rescued, &recent, nil),
		d("notice-begins", classify.Rescued, &old, func(x *classify.Decision) {
			x.Notice, x.NotBefore, x.Marks.ReapAfter = true, &later, classify.Set
		}),
		d("notice-runs", classify.Rescued, &old, func(x *classify.Decision) { x.Notice, x.NotBefore = true, &later }),
		d("notice-over", classify.Rescued, &old, func(x *classify.Decision) { x.Notice, x.NotBefore = true, &old }),
		d("superseded", classify.Superseded, &old, func(x *classify.Decision) { x.Discard = true }),
		d("orphaned", classify.Orphaned, &old, nil),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		superseded string
		want       []string
	}{
		{rescue.SupersededKeep, []string{"notice-over", "rescued", "rescued-by-the-run"}},
		{rescue.SupersededDiscard, []string{"notice-over", "rescued", "rescued-by-the-run", "superseded"}},
	} {
		o := ReapOptions{Scan: ScanOptions{Policy: classify.Policy{GracePeriod: 30 * time.Minute}}, Superseded: c.superseded}
		step := reapStep(ctx, nil, o, scan, map[inventory.Key]bool{{Namespace: "ws", Name: "rescued-by-the-run"}: true})
		var got []string
		for k := range maps.Keys(step.Candidates) {
			got = append(got, k.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) || step.Done {
			t.Errorf("--superseded=%s: candidates %v (done %v), want %v, not done", c.superseded, got, step.Done, c.want)
		}
	}
}

// TestRunStartIsTheFirstRead: the reap asks whether a notice ended by the
// run's start, the server's clock of its first read, not by the end of
// the scan's lists (docs/spec.md#notice).
func TestRunStartIsTheFirstRead(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	scan := &ScanResult{Start: first, Now: first.Add(5 * time.Second)}
	if got := runStart(scan); !got.Equal(first) {
		t.Errorf("runStart = %s, want the first read's %s (the scan's lists ended %s)", got, first, scan.Now)
	}
}
