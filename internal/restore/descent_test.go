package restore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestPlanDatesByDescent is issue 38's findings C and D in restore
// (docs/spec.md#restore-refusals, docs/spec.md#rule-descent).
//
// C: restore --from someone else's snapshot of an idle claim is dated by
// that claim's last use, not by the cut: a nightly backup of session 1's
// claim, cut after session 2's rescue, holds session 1's data; restoring
// it beside session 2's newer rescue is refused, and with --allow-older the
// restored claim records session 1's data time, so it never carries the
// workspace's line past session 2's rescue.
//
// D: a held claim a pod mounts is in use, whatever its old mark says: a
// restore of older data beside it is refused.
func TestPlanDatesByDescent(t *testing.T) {
	nightly := rescue("nightly", "alice-1", "w", 300, 300) // cut at +300m
	nightly.ManagedByJanitor, nightly.OrphanedSince, nightly.Template = false, nil, ""
	size := resource.MustParse("1Gi")
	nightly.RestoreSize = &size
	r2 := rescue("alice-2-rescue", "alice-2", "w", 200, 210) // session 2's data, +200m
	snaps := []Snapshot{nightly, r2}
	contents := contentsOf(snaps...)
	// alice-1: session 1's claim, created at t0, idle since +100m.
	idle := Claim{Name: "alice-1", Workspace: "w", State: classify.Rescued, Created: t0, DataTime: *at(100)}

	t.Run("C: --from a backup of an idle claim is refused beside a newer rescue of the workspace", func(t *testing.T) {
		_, err := Plan(Request{Namespace: "ws", From: "nightly", As: "alice-3", StorageClass: "fast"}, snaps, contents, []Claim{idle})
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "alice-2-rescue") {
			t.Fatalf("err = %v, want a refusal naming alice-2-rescue", err)
		}
	})
	t.Run("C: with --allow-older it records the idle claim's data time, not the cut", func(t *testing.T) {
		res, err := Plan(Request{Namespace: "ws", From: "nightly", As: "alice-3", StorageClass: "fast", AllowOlder: true}, snaps, contents, []Claim{idle})
		if err != nil {
			t.Fatal(err)
		}
		if !res.DataTime.Equal(*at(100)) {
			t.Errorf("data time %s, want the idle claim's %s", res.DataTime, *at(100))
		}
		if got := res.Claim.Annotations[classify.AnnotationRestoredDataTime]; got != at(100).Format(time.RFC3339) {
			t.Errorf("restored-data-time %q, want %q", got, at(100).Format(time.RFC3339))
		}
	})
	t.Run("C: a backup of a claim created after it is dated by its cut (the claim of that name is another)", func(t *testing.T) {
		later := idle
		later.Created = *at(400)
		res, err := Plan(Request{Namespace: "ws", From: "nightly", As: "alice-3", StorageClass: "fast", AllowOlder: true}, snaps, contents, []Claim{later})
		if err != nil {
			t.Fatal(err)
		}
		if !res.DataTime.Equal(*at(300)) {
			t.Errorf("data time %s, want the cut %s", res.DataTime, *at(300))
		}
	})

	t.Run("a backup of the same claim cut in the same second may hold later writes: refused", func(t *testing.T) {
		b1 := rescue("backup-1", "alice-1", "", 300, 300)
		b1.ManagedByJanitor, b1.OrphanedSince, b1.Template = false, nil, ""
		b1.RestoreSize = &size
		b2 := b1
		b2.Name, b2.UID, b2.ContentName = "backup-2", "uid-backup-2", "c-backup-2"
		both := []Snapshot{b1, b2}
		_, err := Plan(Request{Namespace: "ws", From: "backup-1", As: "alice-3", StorageClass: "fast"}, both, contentsOf(both...), nil)
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "backup-2") {
			t.Fatalf("err = %v, want a refusal naming backup-2", err)
		}
	})
	t.Run("a rescue of a restored claim is weighed by the data it was restored from", func(t *testing.T) {
		rr := rescue("restored-2-rescue", "restored-2", "w", 400, 401)
		rr.RestoredDataTime = at(100)
		alice := Claim{Name: "alice-1", Workspace: "w", State: classify.Grace, Created: t0, DataTime: *at(300)}
		_, err := Plan(Request{Namespace: "ws", Claim: "restored-2"}, []Snapshot{rr}, contentsOf(rr), []Claim{alice})
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "alice-1") {
			t.Fatalf("err = %v, want a refusal naming alice-1", err)
		}
		res, err := Plan(Request{Namespace: "ws", Claim: "restored-2", AllowOlder: true}, []Snapshot{rr}, contentsOf(rr), []Claim{alice})
		if err != nil || !res.DataTime.Equal(*at(100)) {
			t.Fatalf("with --allow-older: %v, data time %v; want the restored data time %s", err, res, *at(100))
		}
	})
	t.Run("a backup cut on a storage clock ahead, within --clock-skew of the claim's last use, may be older: refused", func(t *testing.T) {
		b := rescue("backup", "alice-1", "", 300, 300) // cut at +300m on the storage clock
		b.ManagedByJanitor, b.OrphanedSince, b.Template = false, nil, ""
		b.RestoreSize = &size
		// alice-1 is young and undated: possibly used until the read,
		// a second before the backup's cut as the storage clock reads it.
		young := Claim{Name: "alice-1", State: classify.Young, Created: t0, DataTime: at(300).Add(-time.Second), Undated: true}
		req := Request{Namespace: "ws", From: "backup", As: "alice-3", StorageClass: "fast", ClockSkew: 2 * time.Second}
		_, err := Plan(req, []Snapshot{b}, contentsOf(b), []Claim{young})
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "alice-1") {
			t.Fatalf("err = %v, want a refusal naming alice-1", err)
		}
		req.ClockSkew = 0
		if _, err := Plan(req, []Snapshot{b}, contentsOf(b), []Claim{young}); err != nil {
			t.Fatalf("with --clock-skew 0s: %v, want the restore", err)
		}
		// The janitor's rescue of the claim, dated a second before the
		// backup's cut on the API server's clock, may hold newer data.
		r := rescue("alice-1-rescue", "alice-1", "", 0, 301)
		since := at(300).Add(-time.Second)
		r.OrphanedSince = &since
		req.ClockSkew = 2 * time.Second
		_, err = Plan(req, []Snapshot{b, r}, contentsOf(b, r), nil)
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "alice-1-rescue") {
			t.Fatalf("beside the claim's rescue: err = %v, want a refusal naming alice-1-rescue", err)
		}
	})
	t.Run("someone else's snapshot of another claim of the workspace cut after the data time: refused", func(t *testing.T) {
		rr := rescue("restored-2-rescue", "restored-2", "w", 400, 401)
		rr.RestoredDataTime = at(100)
		b3 := rescue("backup-3", "alice-1", "w", 200, 200) // of alice-1 (gone), labelled w
		b3.ManagedByJanitor, b3.OrphanedSince, b3.Template = false, nil, ""
		_, err := Plan(Request{Namespace: "ws", Workspace: "w"}, []Snapshot{rr, b3}, contentsOf(rr, b3), nil)
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "backup-3") || !strings.Contains(ref.Reason, "workspace w") {
			t.Fatalf("err = %v, want a refusal naming backup-3 and workspace w", err)
		}
	})
	t.Run("a claim created from the snapshot, of another workspace, in use: refused", func(t *testing.T) {
		b := rescue("backup-1", "claim-alice", "", 300, 300)
		b.ManagedByJanitor, b.OrphanedSince, b.Template = false, nil, ""
		b.RestoreSize = &size
		again := Claim{Name: "claim-alice", Workspace: "alice", State: classify.InUse, Created: *at(301), DataTime: *at(400), InUse: true, From: "backup-1"}
		_, err := Plan(Request{Namespace: "ws", From: "backup-1", As: "restored-3", StorageClass: "fast"}, []Snapshot{b}, contentsOf(b), []Claim{again})
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "claim-alice") {
			t.Fatalf("err = %v, want a refusal naming claim-alice", err)
		}
	})
	t.Run("D: a held claim in use is refused beside, however old its mark", func(t *testing.T) {
		cl := inventory.Claim{Namespace: "ws", Name: "alice-2", UID: "uid-alice-2", Phase: "Bound", CreationTimestamp: t0,
			Annotations: map[string]string{inventory.AnnotationOrphanedSince: at(5).Format(time.RFC3339)}}
		d := classify.Decision{Claim: &cl, Workspace: "w", State: classify.Held,
			Referrers: []inventory.Referrer{{Kind: "Pod", Name: "ide"}}, Marks: classify.Marks{OrphanedSince: classify.Remove}}
		held := ClaimOf(&d, *at(500))
		if !held.InUse || !held.DataTime.Equal(*at(500)) {
			t.Fatalf("ClaimOf = %+v, want in use and dated at the read", held)
		}
		old := rescue("alice-old", "alice-2", "w", 10, 20)
		_, err := Plan(Request{Namespace: "ws", From: "alice-old", As: "alice-4"}, []Snapshot{old}, contentsOf(old), []Claim{held})
		var ref *Refusal
		if !errors.As(err, &ref) || !strings.Contains(ref.Reason, "in use") {
			t.Fatalf("err = %v, want a refusal: the held claim is in use", err)
		}
	})
}

// TestStorageClassOverridesTheBetaAnnotation: restore --storage-class
// drops a template's volume.beta.kubernetes.io/storage-class, which
// Kubernetes reads before spec.storageClassName (a KubeSpawner claim with
// storage_class set carries both).
func TestStorageClassOverridesTheBetaAnnotation(t *testing.T) {
	p := claimNamed("claim-alice", "")
	p.Annotations = map[string]string{betaStorageClass: "standard", "hub.jupyter.org/username": "alice"}
	tmpl, _, _ := NewTemplate(p)
	s := rescue("claim-alice-r", "claim-alice", "", 10, 20)
	s.Template = tmpl
	for _, tc := range []struct {
		class, wantAnn string
		kept           bool
	}{{"fast-ssd", "", false}, {"", "standard", true}} {
		res, err := Plan(Request{Namespace: "ws", Claim: "claim-alice", StorageClass: tc.class}, []Snapshot{s}, contentsOf(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := res.Claim.Annotations[betaStorageClass]
		if ok != tc.kept || got != tc.wantAnn {
			t.Errorf("--storage-class %q: annotation %q (present %v), want %q (present %v)", tc.class, got, ok, tc.wantAnn, tc.kept)
		}
		if res.Claim.Annotations["hub.jupyter.org/username"] != "alice" {
			t.Errorf("--storage-class %q: the template's other annotations are lost", tc.class)
		}
	}
}
