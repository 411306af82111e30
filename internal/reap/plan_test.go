package reap

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// rescuedInventory is one namespace at now: claim ws-a, orphaned two hours
// before t0 and rescued by the janitor's intact snapshot an hour before
// t0, with the annotations annots.
func rescuedInventory(now time.Time, annots map[string]string) *inventory.Inventory {
	cl := inventory.Claim{Namespace: "ws", Name: "ws-a", UID: "uid-ws-a", ResourceVersion: "7",
		CreationTimestamp: t0.Add(-24 * time.Hour), Phase: "Bound", VolumeName: "pv-ws-a",
		Annotations: map[string]string{inventory.AnnotationOrphanedSince: t0.Add(-2 * time.Hour).Format(time.RFC3339)}}
	for k, v := range annots {
		cl.Annotations[k] = v
	}
	cut := t0.Add(-time.Hour)
	s := inventory.Snapshot{Namespace: "ws", Name: "ws-a-rescue", UID: "uid-s", CreationTimestamp: cut, CutTime: &cut,
		SourceClaim: "ws-a", SourceUID: cl.UID, ManagedByJanitor: true, ReadyToUse: true, ContentName: "content-1"}
	return &inventory.Inventory{
		Claims:      []inventory.Claim{cl},
		Referrers:   map[inventory.Key][]inventory.Referrer{},
		LiveOwners:  map[types.UID]string{},
		PVs:         map[string]inventory.PV{"pv-ws-a": {Name: "pv-ws-a", CSIDriver: "csi.example.com", VolumeHandle: "h-1"}},
		Attachments: map[string][]inventory.Attachment{},
		Snapshots:   map[string][]inventory.Snapshot{"ws": {s}},
		Contents: map[string]inventory.Content{"content-1": {Name: "content-1", DeletionPolicy: "Retain",
			Snapshot: inventory.Key{Namespace: "ws", Name: s.Name}, SnapshotUID: s.UID, HasHandle: true}},
		ServerTime: now,
	}
}

// TestNoticeNeverEndsInItsOwnRun is issue 38's finding G (docs/spec.md#notice):
// a run begins at t0 (its scan); its reap reads again at t0+40s, as a run
// that waited for its rescues does. A notice shorter than that run, begun
// by its own scan, has ended by the re-read: the claim must not be deleted
// in that run all the same, nor under a snooze that ends during the run;
// only a run that began at or after the notice's end deletes it. The first
// row takes the mark from the scan's own decision, as the run writes it.
func TestNoticeNeverEndsInItsOwnRun(t *testing.T) {
	const notice = 5 * time.Second
	policy := classify.Policy{MinAge: 10 * time.Minute, GracePeriod: 30 * time.Minute, ClockSkew: 2 * time.Second,
		NoticePeriod: notice, MaxSnooze: 720 * time.Hour}
	// The scan of the run: the notice begins (the mark is to be written).
	scan := classify.Classify(rescuedInventory(t0, nil), policy, t0)[0]
	if scan.State != classify.Rescued || scan.Marks.ReapAfter != classify.Set || Reapable(&scan, false, policy.GracePeriod, t0) {
		t.Fatalf("the scan: %s, mark %v, reapable %v (%s); want Rescued, the notice beginning, not reapable",
			scan.State, scan.Marks.ReapAfter, Reapable(&scan, false, policy.GracePeriod, t0), scan.Reason)
	}
	written := scan.Marks.ReapAfterValue.Format(time.RFC3339)
	rfc := func(d time.Duration) string { return t0.Add(d).Format(time.RFC3339) }
	for _, c := range []struct {
		name    string
		policy  func(*classify.Policy)
		annots  map[string]string
		start   time.Time // Options.RunStart
		reread  time.Duration
		deleted bool
		reason  string
	}{
		{name: "the notice this run's scan began ended before its re-read", annots: map[string]string{inventory.AnnotationReapAfter: written},
			start: t0, reread: 40 * time.Second, reason: "notice"},
		{name: "a notice that ends a second after the run began", annots: map[string]string{inventory.AnnotationReapAfter: rfc(time.Second)},
			start: t0, reread: 40 * time.Second, reason: "notice"},
		{name: "a notice that ended as the run began", annots: map[string]string{inventory.AnnotationReapAfter: rfc(0)},
			start: t0, reread: 40 * time.Second, deleted: true},
		{name: "a notice of an earlier run", annots: map[string]string{inventory.AnnotationReapAfter: rfc(-time.Hour)},
			start: t0, reread: 40 * time.Second, deleted: true},
		{name: "a snooze that ends during the run", annots: map[string]string{inventory.AnnotationReapAfter: rfc(-time.Hour),
			inventory.AnnotationSnoozeUntil: rfc(10 * time.Second)}, start: t0, reread: 40 * time.Second, reason: "notice"},
		{name: "a snooze that ended before the run began", annots: map[string]string{inventory.AnnotationReapAfter: rfc(-time.Hour),
			inventory.AnnotationSnoozeUntil: rfc(-time.Minute)}, start: t0, reread: 40 * time.Second, deleted: true},
		{name: "the scan's mark was lost: the re-read begins the notice", start: t0, reread: 40 * time.Second, reason: "notice"},
		{name: "the run's start is not known: nothing under notice is deleted",
			annots: map[string]string{inventory.AnnotationReapAfter: rfc(-time.Hour)}, reread: 40 * time.Second, reason: "notice"},
		{name: "no notice period", policy: func(p *classify.Policy) { p.NoticePeriod = 0 }, start: t0, reread: 40 * time.Second, deleted: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy
			if c.policy != nil {
				c.policy(&p)
			}
			now := t0.Add(c.reread)
			ds := classify.Classify(rescuedInventory(now, c.annots), p, now)
			k := inventory.Key{Namespace: "ws", Name: "ws-a"}
			pl := planOf(ds, map[inventory.Key]bool{k: true}, Options{Policy: p, RunStart: c.start}, now)
			if got := len(pl.del) == 1; got != c.deleted {
				t.Fatalf("deleted %v, want %v (state %s, notice until %v; skipped %+v)", got, c.deleted, ds[0].State, ds[0].NotBefore, pl.skipped)
			}
			if !c.deleted && (len(pl.skipped) != 1 || !strings.Contains(pl.skipped[0].Message, c.reason)) {
				t.Errorf("skipped %+v, want one saying %q", pl.skipped, c.reason)
			}
		})
	}
}

// TestPlanWaitsForTheWorkspace is docs/spec.md#reap-workspace-first as
// the reap asks it: a Rescued claim whose workspace has another orphan not
// yet rescued is skipped, with that claim named; a sibling in use, or
// rescued too, is no reason to wait. The decisions are the re-read's.
func TestPlanWaitsForTheWorkspace(t *testing.T) {
	policy := classify.Policy{MinAge: 10 * time.Minute, GracePeriod: 30 * time.Minute, ClockSkew: 2 * time.Second, WorkspaceLabel: "workspace"}
	now := t0
	for _, c := range []struct {
		name    string
		sibling classify.State
		deleted bool
	}{
		{name: "a sibling in its grace period", sibling: classify.Grace},
		{name: "a sibling orphaned, not yet snapshotted", sibling: classify.Orphaned},
		{name: "a sibling being snapshotted", sibling: classify.Snapshotting},
		{name: "a sibling whose rescue failed", sibling: classify.SnapshotFailed},
		{name: "a sibling in use", sibling: classify.InUse, deleted: true},
		{name: "a sibling rescued too", sibling: classify.Rescued, deleted: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ds := classify.Classify(rescuedInventory(now, nil), policy, now)
			if len(ds) != 1 || ds[0].State != classify.Rescued {
				t.Fatalf("the claim: %+v, want one Rescued", ds)
			}
			ds[0].Workspace = "w1"
			sib := classify.Decision{Claim: &inventory.Claim{Namespace: "ws", Name: "ws-a-data", UID: "uid-data"}, Workspace: "w1", State: c.sibling}
			ds = append(ds, sib)
			k := inventory.Key{Namespace: "ws", Name: "ws-a"}
			pl := planOf(ds, map[inventory.Key]bool{k: true}, Options{Policy: policy, RunStart: now}, now)
			if got := len(pl.del) == 1; got != c.deleted {
				t.Fatalf("deleted %v, want %v (skipped %+v)", got, c.deleted, pl.skipped)
			}
			if !c.deleted && (len(pl.skipped) != 1 || !strings.Contains(pl.skipped[0].Message, "ws-a-data ("+string(c.sibling)+")")) {
				t.Errorf("skipped %+v, want one naming ws-a-data (%s)", pl.skipped, c.sibling)
			}
		})
	}
}
