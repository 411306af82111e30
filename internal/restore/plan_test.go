package restore

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(min int) *time.Time { t := t0.Add(time.Duration(min) * time.Minute); return &t }

// rescue is an intact rescue of the janitor's of claim, cut at cut with
// data up to data (minutes after t0).
func rescue(name, claim, ws string, data, cut int) Snapshot {
	tmpl, _, _ := NewTemplate(claimNamed(claim, ws))
	return Snapshot{Snapshot: inventory.Snapshot{Namespace: "ws", Name: name, UID: types.UID("uid-" + name),
		SourceClaim: claim, Workspace: ws, ManagedByJanitor: true, OrphanedSince: at(data), CutTime: at(cut),
		CreationTimestamp: *at(cut), ReadyToUse: true, ContentName: "c-" + name}, Template: tmpl}
}

func claimNamed(name, ws string) *corev1.PersistentVolumeClaim {
	p := claim()
	p.Name = name
	p.Labels["workspace"] = ws
	return p
}

func contentsOf(snaps ...Snapshot) map[string]inventory.Content {
	m := map[string]inventory.Content{}
	for _, s := range snaps {
		m[s.ContentName] = inventory.Content{Name: s.ContentName, SnapshotUID: s.UID, HasHandle: true, DeletionPolicy: "Delete"}
	}
	return m
}

func TestPlan(t *testing.T) {
	old := rescue("a-rescue-1", "a", "w", 10, 20)
	newer := rescue("a-rescue-2", "a", "w", 30, 40)
	otherClaim := rescue("b-rescue-1", "b", "w", 50, 60) // workspace w's newest data
	notReady := rescue("a-rescue-3", "a", "w", 70, 80)
	notReady.ReadyToUse = false
	foreign := rescue("manual", "a", "w", 90, 90)
	foreign.ManagedByJanitor, foreign.OrphanedSince, foreign.Template = false, nil, ""
	// A backup tool that does not copy the workspace label: it weighs on
	// its own claim's restores only (a labelled one weighs on the whole
	// workspace's: TestPlanDatesByDescent).
	foreign.Workspace = ""
	size := resource.MustParse("8Gi")
	foreign.RestoreSize = &size
	foreignOld := rescue("manual-old", "a", "w", 25, 25)
	foreignOld.ManagedByJanitor, foreignOld.OrphanedSince, foreignOld.Template = false, nil, ""
	ownWS := rescue("n-rescue-1", "n", "", 30, 40) // of a claim without a workspace label
	all := []Snapshot{old, newer, otherClaim, notReady, foreign, foreignOld}
	contents := contentsOf(append(all, ownWS)...)

	rows := []struct {
		name   string
		req    Request
		claims []Claim
		snaps  []Snapshot
		want   string // snapshot chosen, or the refusal's start
		as     string // the new claim's name
	}{
		// b-rescue-1 holds newer data of workspace w than any rescue of
		// a: restoring a takes --allow-older (TestPlanRefusesOlderData).
		{name: "by claim: the newest intact rescue of that name", req: Request{Claim: "a", AllowOlder: true}, want: "a-rescue-2", as: "a"},
		{name: "by claim: a snapshot not ready is skipped, a foreign one never counts", req: Request{Claim: "a", AllowOlder: true}, want: "a-rescue-2", as: "a"},
		{name: "by workspace: the newest data of any claim of it", req: Request{Workspace: "w"}, want: "b-rescue-1", as: "b"},
		{name: "by workspace with --as", req: Request{Workspace: "w", As: "restored"}, want: "b-rescue-1", as: "restored"},
		{name: "--from a foreign snapshot with class and size", req: Request{From: "manual", As: "x", StorageClass: "fast"}, want: "manual", as: "x"},
		{name: "--from a janitor rescue keeps its template's name", req: Request{From: "a-rescue-1", AllowOlder: true}, want: "a-rescue-1", as: "a"},
		{name: "refused: no rescue of the claim", req: Request{Claim: "zz"}, want: "!no rescue of claim ws/zz found"},
		{name: "refused: no intact rescue (names why)", req: Request{Claim: "a"}, snaps: []Snapshot{notReady}, want: "!no intact rescue of claim ws/a: a-rescue-3 (not ready to use)"},
		{name: "refused: --from not found", req: Request{From: "nope"}, want: "!snapshot ws/nope not found"},
		{name: "refused: --from not intact", req: Request{From: "a-rescue-3"}, want: "!snapshot ws/a-rescue-3 is not intact: not ready to use"},
		{name: "refused: --from without template needs a class", req: Request{From: "manual", As: "x"}, want: "!snapshot ws/manual carries no claim template: --storage-class required"},
		{name: "refused: a claim of that name exists", req: Request{Claim: "a"}, claims: []Claim{{Name: "a", Workspace: "w", State: classify.Rescued, Created: *at(0), DataTime: *at(30)}}, want: "!claim ws/a exists: restore under another name with --as"},
		{name: "refused: a claim of that name is terminating", req: Request{Claim: "a"}, claims: []Claim{{Name: "a", DeletionTimestamp: at(45)}}, want: "!claim ws/a exists and is being deleted"},
		{name: "the rescued claim itself, still there, does not block --as", req: Request{Claim: "a", As: "a2", AllowOlder: true}, claims: []Claim{{Name: "a", Workspace: "w", State: classify.Rescued, Created: *at(0), DataTime: *at(30)}}, want: "a-rescue-2", as: "a2"},
		{name: "refused: a claim of the workspace in use", req: Request{Claim: "a", As: "a2"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.InUse, Created: *at(0)}}, want: "!claim ws/c of workspace w is InUse"},
		{name: "refused: a claim of the workspace attached", req: Request{Claim: "a", As: "a2"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.Attached, Created: *at(0)}}, want: "!claim ws/c of workspace w is Attached"},
		{name: "refused: a claim of the workspace created after the data", req: Request{Claim: "a"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.Young, Created: *at(35)}}, want: "!claim ws/c of workspace w may hold newer data (created 2026-12-01T12:35:00Z"},
		{name: "refused: a claim of the workspace used after the data", req: Request{Claim: "a"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.Orphaned, Created: *at(0), DataTime: *at(31)}}, want: "!claim ws/c of workspace w may hold newer data (last used 2026-12-01T12:31:00Z"},
		{name: "refused: a claim of the workspace that nothing dates yet (no run has marked it)", req: Request{Claim: "a"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.Grace, Created: *at(0), DataTime: *at(90), Undated: true}}, want: "!claim ws/c of workspace w may hold newer data (nothing dates its last use yet, so possibly used until 2026-12-01T13:30:00Z"},
		{name: "a claim of the workspace last used before the data does not block", req: Request{Claim: "b"}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.Orphaned, Created: *at(0), DataTime: *at(49)}}, want: "b-rescue-1", as: "b"},
		{name: "refused: someone else's snapshot of the claim cut after the rescue's data (the claim may have been reaped on it)", req: Request{Claim: "a"},
			snaps: []Snapshot{old, newer, foreign}, want: "!snapshot ws/manual of claim a, not the janitor's, was cut at 2026-12-01T13:30:00Z, after the data time 2026-12-01T12:30:00Z of a-rescue-2"},
		{name: "someone else's snapshot of the claim cut before the rescue's data does not block", req: Request{Claim: "a"},
			snaps: []Snapshot{old, newer, foreignOld}, want: "a-rescue-2", as: "a"},
		{name: "--allow-older restores beside newer data", req: Request{Claim: "a", AllowOlder: true}, claims: []Claim{{Name: "c", Workspace: "w", State: classify.InUse, Created: *at(0)}}, want: "a-rescue-2", as: "a"},
		{name: "a claim of another workspace does not block", req: Request{Claim: "b"}, claims: []Claim{{Name: "c", Workspace: "other", State: classify.InUse, Created: *at(99)}}, want: "b-rescue-1", as: "b"},
		// Without a workspace label, a claim is its own workspace.
		{name: "no workspace label: refused while its own claim is in use", req: Request{Claim: "n", As: "n2"}, snaps: []Snapshot{ownWS},
			claims: []Claim{{Name: "n", State: classify.InUse, Created: *at(0)}}, want: "!claim ws/n is InUse: restore beside it with --allow-older"},
		{name: "no workspace label: refused when its own claim was used after the data", req: Request{Claim: "n", As: "n2"}, snaps: []Snapshot{ownWS},
			claims: []Claim{{Name: "n", State: classify.Orphaned, Created: *at(0), DataTime: *at(31)}}, want: "!claim ws/n may hold newer data (last used 2026-12-01T12:31:00Z"},
		{name: "no workspace label: another claim without one does not block", req: Request{Claim: "n", As: "n2"}, snaps: []Snapshot{ownWS},
			claims: []Claim{{Name: "m", State: classify.InUse, Created: *at(0)}}, want: "n-rescue-1", as: "n2"},
		{name: "no workspace label: --allow-older restores beside its claim in use", req: Request{Claim: "n", As: "n2", AllowOlder: true}, snaps: []Snapshot{ownWS},
			claims: []Claim{{Name: "n", State: classify.InUse, Created: *at(0)}}, want: "n-rescue-1", as: "n2"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			r.req.Namespace = "ws"
			snaps := r.snaps
			if snaps == nil {
				snaps = all
			}
			res, err := Plan(r.req, snaps, contents, r.claims)
			if strings.HasPrefix(r.want, "!") {
				var ref *Refusal
				if !errors.As(err, &ref) || !strings.HasPrefix(err.Error(), r.want[1:]) {
					t.Fatalf("got %v, %v; want the refusal %q", res, err, r.want[1:])
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if res.Snapshot.Name != r.want || res.Claim.Name != r.as {
				t.Fatalf("restores %s as %s, want %s as %s", res.Snapshot.Name, res.Claim.Name, r.want, r.as)
			}
			ref := res.Claim.Spec.DataSourceRef
			if ref == nil || ref.Kind != "VolumeSnapshot" || ref.Name != r.want || *ref.APIGroup != "snapshot.storage.k8s.io" {
				t.Errorf("dataSourceRef %+v", ref)
			}
			if res.Claim.Annotations[AnnotationRestoredFrom] != r.want {
				t.Errorf("annotations %v: no restored-from", res.Claim.Annotations)
			}
			for k := range res.Claim.Annotations {
				if strings.HasPrefix(k, inventory.Prefix) && k != AnnotationRestoredFrom && k != AnnotationRestoredDataTime {
					t.Errorf("the restored claim carries the janitor's key %s", k)
				}
			}
			for k := range res.Claim.Labels {
				if strings.HasPrefix(k, inventory.Prefix) {
					t.Errorf("the restored claim carries the janitor's label %s", k)
				}
			}
		})
	}
}

func TestPlanManifestFollowsTheTemplate(t *testing.T) {
	s := rescue("a-rescue-1", "a", "w", 10, 20)
	res, err := Plan(Request{Namespace: "ws", Claim: "a"}, []Snapshot{s}, contentsOf(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Claim
	q := c.Spec.Resources.Requests["storage"]
	if q.String() != "5Gi" || *c.Spec.StorageClassName != "fast" || string(*c.Spec.VolumeMode) != "Block" ||
		*c.Spec.VolumeAttributesClassName != "gold" || c.Labels["workspace"] != "w" || c.Labels["team"] != "a" ||
		c.Annotations["owner"] != "alice" || c.Spec.VolumeName != "" {
		t.Errorf("manifest %+v", c)
	}
	if !res.DataTime.Equal(*at(10)) {
		t.Errorf("data time %s, want the recorded orphaned-since", res.DataTime)
	}

	// A restore size larger than the template's size wins, and is noted.
	big := resource.MustParse("20Gi")
	s.RestoreSize = &big
	res, err = Plan(Request{Namespace: "ws", Claim: "a", StorageClass: "slow"}, []Snapshot{s}, contentsOf(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := res.Claim.Spec.Resources.Requests["storage"]; q.String() != "20Gi" || len(res.Notes) != 1 {
		t.Errorf("size %s, notes %v: want 20Gi and a note", q.String(), res.Notes)
	}
	if *res.Claim.Spec.StorageClassName != "slow" {
		t.Errorf("--storage-class did not override the template's class")
	}
	if _, err := Plan(Request{Namespace: "ws", Claim: "a", Size: "lots"}, []Snapshot{s}, contentsOf(s), nil); err == nil {
		t.Errorf("a bad --size: no refusal")
	}
}

// TestPlanRefusesOlderData is finding 2 of issue 23 in restore's refusals
// (docs/spec.md#restore-refusals): alice-2 held the newest data and was
// reaped (rescue r2); restoring alice-1 from its older rescue r1 is refused
// unless --allow-older, which restores beside it with the provenance
// (docs/spec.md#rule-restored-data-time).
func TestPlanRefusesOlderData(t *testing.T) {
	r1 := rescue("r1", "alice-1", "alice", 10, 11)
	r2 := rescue("r2", "alice-2", "alice", 30, 31)
	snaps := []Snapshot{r1, r2}
	contents := contentsOf(snaps...)
	_, err := Plan(Request{Namespace: "ws", Claim: "alice-1"}, snaps, contents, nil)
	var ref *Refusal
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "rescue ws/r2 of workspace alice holds newer data") {
		t.Fatalf("restore ws/alice-1: %v, want a refusal naming r2", err)
	}
	res, err := Plan(Request{Namespace: "ws", Claim: "alice-1", As: "alice-old", AllowOlder: true}, snaps, contents, nil)
	if err != nil {
		t.Fatalf("--allow-older: %v", err)
	}
	a := res.Claim.Annotations
	if res.Snapshot.Name != "r1" || a[AnnotationRestoredFrom] != "r1" || a[AnnotationRestoredDataTime] != at(10).Format(time.RFC3339) {
		t.Errorf("--allow-older restores %s with annotations %v, want r1 with its data time %s", res.Snapshot.Name, a, at(10).Format(time.RFC3339))
	}
	// A rescue of a restored claim records how far its line reaches: a
	// claim restored from it carries no more (docs/spec.md#rule-restored-data-time).
	rr := rescue("rr", "alice-old", "alice", 40, 41)
	rr.RestoredDataTime = at(10)
	withRR := []Snapshot{r1, r2, rr}
	res, err = Plan(Request{Namespace: "ws", From: "rr", As: "alice-old-2", AllowOlder: true}, withRR, contentsOf(withRR...), nil)
	if err != nil {
		t.Fatalf("restore --from rr: %v", err)
	}
	if got := res.Claim.Annotations[AnnotationRestoredDataTime]; got != at(10).Format(time.RFC3339) {
		t.Errorf("restored from the rescue of a restored claim: restored-data-time %s, want its line's %s", got, at(10).Format(time.RFC3339))
	}
	// The newest rescue itself is not refused; nor is one of another workspace.
	if _, err := Plan(Request{Namespace: "ws", Claim: "alice-2"}, snaps, contents, nil); err != nil {
		t.Errorf("restore ws/alice-2: %v", err)
	}
	// An archive of newer data is no reason to refuse: it is not the workspace's line.
	arch := rescue("a9", "alice-9", "alice", 50, 51)
	arch.Superseded = true
	withArch := []Snapshot{r1, r2, arch}
	if _, err := Plan(Request{Namespace: "ws", Claim: "alice-2"}, withArch, contentsOf(withArch...), nil); err != nil {
		t.Errorf("restore ws/alice-2 beside a newer archive: %v", err)
	}
}

// TestPlanWorkspacePicksARescueBeforeAnArchive is finding 3 of issue 23 in
// restore (docs/spec.md#retention-archives): of equal data time, --workspace
// restores the rescue, whatever the names.
func TestPlanWorkspacePicksARescueBeforeAnArchive(t *testing.T) {
	r2 := rescue("alice-2-rescue", "alice-2", "alice", 30, 31)
	arch := rescue("zz-archive", "alice-1", "alice", 30, 32)
	arch.Superseded = true
	for _, snaps := range [][]Snapshot{{r2, arch}, {arch, r2}} {
		res, err := Plan(Request{Namespace: "ws", Workspace: "alice", As: "x"}, snaps, contentsOf(snaps...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Snapshot.Name != "alice-2-rescue" {
			t.Errorf("--workspace restores %s, want the rescue alice-2-rescue", res.Snapshot.Name)
		}
	}
}

// TestClaimOf: restore weighs a claim of the workspace by the lineage's
// data time (docs/spec.md#restore-refusals): a claim that nothing dates yet
// may be in use until the read.
func TestClaimOf(t *testing.T) {
	now := *at(90)
	claim := func(ann map[string]string) *inventory.Claim {
		return &inventory.Claim{Namespace: "ws", Name: "c", UID: "u-c", CreationTimestamp: *at(0), Phase: "Bound", Annotations: ann}
	}
	pending, deleting := claim(nil), claim(nil)
	pending.Phase, deleting.DeletionTimestamp = "Pending", at(80)
	for _, c := range []struct {
		name    string
		d       classify.Decision
		want    time.Time
		undated bool
	}{
		{"orphaned: its orphaned-since", classify.Decision{Claim: claim(nil), State: classify.Orphaned, OrphanedSince: at(31)}, *at(31), false},
		{"marked by this read only: the read's time", classify.Decision{Claim: claim(nil), State: classify.Grace}, now, true},
		{"held, never dated: the read's time", classify.Decision{Claim: claim(nil), State: classify.Held}, now, true},
		// The use the janitor saw may have gone on until the read: it is
		// no end of use (found by the model checker, issue 38).
		{"a use the janitor saw, not yet orphaned again: the read's time", classify.Decision{Claim: claim(map[string]string{inventory.AnnotationLastUsed: at(50).Format(time.RFC3339)}), State: classify.Grace}, now, true},
		{"never bound, nothing dated: no data, its creation alone", classify.Decision{Claim: pending, State: classify.Unbound}, time.Time{}, false},
		{"being deleted, nothing dated: given up, its creation alone", classify.Decision{Claim: deleting, State: classify.Terminating}, time.Time{}, false},
		{"being deleted, its mark dates it", classify.Decision{Claim: func() *inventory.Claim {
			c := claim(map[string]string{inventory.AnnotationOrphanedSince: at(20).Format(time.RFC3339)})
			c.DeletionTimestamp = at(80)
			return c
		}(), State: classify.Terminating}, *at(20), false},
		{"restored and not used since: its source's data time", classify.Decision{Claim: claim(map[string]string{classify.AnnotationRestoredDataTime: at(10).Format(time.RFC3339)}), State: classify.Grace}, *at(10), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ClaimOf(&c.d, now)
			if !got.DataTime.Equal(c.want) || got.Undated != c.undated || got.Name != "c" || !got.Created.Equal(*at(0)) {
				t.Fatalf("ClaimOf = data time %s, undated %v; want %s, %v", got.DataTime, got.Undated, c.want, c.undated)
			}
		})
	}
}
