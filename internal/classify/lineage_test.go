package classify

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Lineage fixtures: T1 is the older data (alice-1's), T2 the newer
// (alice-2's).
var (
	lT1 = ago(5 * time.Hour)
	lT2 = ago(3 * time.Hour)
)

func restoredFrom(snap string, data time.Time) claimOpt {
	return func(c *inventory.Claim) {
		c.Annotations[AnnotationRestoredFrom] = snap
		c.Annotations[AnnotationRestoredDataTime] = data.Format(time.RFC3339)
	}
}

// restoredAt is a rescue's record of the data time its claim was restored
// from (docs/spec.md#rule-restored-data-time).
func restoredAt(data time.Time) snapOpt {
	return func(s *inventory.Snapshot) { s.RestoredDataTime = tp(data) }
}

// rescueOf is the janitor's intact rescue of claim, recording data time t.
func rescueOf(name, claim string, t time.Time, opts ...snapOpt) inventory.Snapshot {
	return ownSnap(name, claim, append([]snapOpt{ready, inWorkspace("alice"), snapAt(t.Add(time.Minute)),
		func(s *inventory.Snapshot) { s.OrphanedSince = tp(t) }}, opts...)...)
}

// TestLineage is the judge's table (docs/spec.md#rule-lineage): per case, one
// question to the lineage of workspace alice (or of a claim's own).
func TestLineage(t *testing.T) {
	alice := WorkspaceKey{Namespace: "ws", Name: "alice"}
	inUse := func(name string) invOpt { return refs(name, pod("ide-"+name, "volume data")) }
	cases := []struct {
		name string
		inv  []invOpt
		ws   WorkspaceKey
		// ask is the copy asked about.
		ask string
		// wantData and wantKind, when set, are its data time and kind.
		wantData *time.Time
		wantKind CopyKind
		// newest, when set, is the workspace's newest copy and tie.
		newest string
		tie    bool
		// held: HeldBy(ask) names a copy ("" = the last copy); checked when heldSet.
		heldSet bool
		held    string
		// carry: the operator's --sessions-carry-data (the workspace's line
		// holds too); without it only descent holds.
		carry bool
	}{
		{name: "a claim in use is dated now",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"))), inUse("alice-2")}, ws: alice,
			ask: "alice-2", wantData: tp(now), wantKind: CopyClaim},
		{name: "an orphan is dated by its orphaned-since",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"), marked(lT2)))}, ws: alice,
			ask: "alice-2", wantData: tp(lT2), wantKind: CopyClaim},
		{name: "a recorded last use after the mark leaves it undated: the use may have gone on until now",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"), marked(lT1), lastUsedAt(lT2)))}, ws: alice,
			ask: "alice-2", wantData: tp(now)},
		{name: "a mark after the recorded last use dates it",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"), marked(lT2), lastUsedAt(lT1)))}, ws: alice,
			ask: "alice-2", wantData: tp(lT2)},
		{name: "a restored claim not used since is dated by its source's data time, not its creation",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(time.Hour)), marked(ago(time.Hour)), restoredFrom("r1", lT1)))}, ws: alice,
			ask: "alice-old", wantData: tp(lT1), wantKind: CopyRestored},
		{name: "a restored claim used since its restore, not marked since, is undated: dated now",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(2*time.Hour)), restoredFrom("r1", lT1), lastUsedAt(ago(time.Hour))))}, ws: alice,
			ask: "alice-old", wantData: tp(now), wantKind: CopyRestored},
		{name: "a restored claim used since its restore is dated by the end of that use",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(2*time.Hour)), restoredFrom("r1", lT1), lastUsedAt(ago(time.Hour)), marked(ago(time.Hour).Add(time.Minute))))}, ws: alice,
			ask: "alice-old", wantData: tp(ago(time.Hour).Add(time.Minute)), wantKind: CopyRestored},
		{name: "a restored claim in use is dated now",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(time.Hour)), restoredFrom("r1", lT1))), inUse("alice-old")}, ws: alice,
			ask: "alice-old", wantData: tp(now), wantKind: CopyRestored},
		{name: "the orphan with newer data is the newest, not the restored claim created later",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"), marked(lT2)),
				pvc("alice-old", workspace("alice"), created(ago(time.Hour)), marked(ago(time.Hour)), restoredFrom("r1", lT1)))}, ws: alice,
			ask: "alice-2", newest: "alice-2"},
		{name: "a rescue and an archive of equal data time: the rescue is the newest, a tie",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT2), rescueOf("a1", "alice-1", lT2, archive))}, ws: alice,
			ask: "r2", newest: "r2", tie: true},
		{name: "a restored claim in use does not hold the newer rescue of the reaped claim",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(time.Hour)), restoredFrom("r1", lT1))), inUse("alice-old"),
				snaps(rescueOf("r1", "alice-1", lT1), rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a newer claim in use holds the workspace's older rescue",
			inv: []invOpt{claims(pvc("alice-3", workspace("alice"), created(ago(time.Hour)))), inUse("alice-3"),
				snaps(rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: "alice-3", carry: true},
		{name: "an older claim kept in use by a lingering pod does not hold the newer rescue",
			inv: []invOpt{claims(pvc("alice-1", workspace("alice"))), inUse("alice-1"),
				snaps(rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a newer claim not in use holds nothing yet (its data goes into a rescue of its own first)",
			inv: []invOpt{claims(pvc("alice-3", workspace("alice"), created(ago(time.Hour)), marked(ago(time.Hour)))),
				snaps(rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "an archive is held by a rescue of equal data time",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT2), rescueOf("a1", "alice-1", lT2, archive))}, ws: alice,
			ask: "a1", heldSet: true, held: "r2", carry: true},
		{name: "a rescue is never held by an archive of equal data time",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT2), rescueOf("a1", "alice-1", lT2, archive))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a rescue is never held by an archive of newer data",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT1), rescueOf("a1", "alice-1", lT2, archive))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "an older rescue is held by a rescue of newer data of another claim",
			inv: []invOpt{snaps(rescueOf("r1", "alice-1", lT1), rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r1", heldSet: true, held: "r2", carry: true},
		{name: "two rescues of different claims with equal data time do not hold each other",
			inv: []invOpt{snaps(rescueOf("r1", "alice-1", lT2), rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r1", heldSet: true, held: ""},
		{name: "a rescue is held by its own claim, even an orphan",
			inv: []invOpt{claims(pvc("alice-2", workspace("alice"), marked(lT2))), snaps(rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: "alice-2"},
		{name: "someone else's snapshot of newer data never holds a rescue",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT2), snap("backup", "alice-3", ready, inWorkspace("alice"), snapAt(ago(time.Hour))))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a rescue of newer data that is not intact holds nothing",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT1), rescueOf("r3", "alice-3", lT2, snapDeleting(ago(time.Minute))))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a rescue of a restored claim reaches only as far as the restore's source",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(2*time.Hour)), marked(ago(time.Hour)), restoredFrom("r1", lT1))),
				snaps(rescueOf("r2", "alice-2", lT2), rescueOf("r-old", "alice-old", ago(time.Hour)))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a rescue of a restored claim that is gone reaches only as far as the data time it records",
			inv: []invOpt{snaps(rescueOf("r2", "alice-2", lT2), rescueOf("r-old", "alice-old", ago(time.Hour), restoredAt(lT1)))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "a rescue of a restored claim that is gone still holds older data than its restore's source",
			inv: []invOpt{snaps(rescueOf("r0", "alice-0", ago(6*time.Hour)), rescueOf("r-old", "alice-old", ago(time.Hour), restoredAt(lT1)))}, ws: alice,
			ask: "r0", heldSet: true, held: "r-old", carry: true},
		{name: "a restored claim whose provenance does not parse is of no known time",
			inv: []invOpt{claims(pvc("alice-old", workspace("alice"), created(ago(time.Hour)), annot(AnnotationRestoredDataTime, "yesterday"))), inUse("alice-old"),
				snaps(rescueOf("r2", "alice-2", lT2))}, ws: alice,
			ask: "r2", heldSet: true, held: ""},
		{name: "without a workspace label a claim is its own workspace",
			inv: []invOpt{claims(pvc("solo", marked(lT2))), snaps(ownSnap("solo-r", "solo", ready, snapAt(lT1), func(s *inventory.Snapshot) { s.OrphanedSince = tp(lT1) }))},
			ws:  WorkspaceKey{Namespace: "ws", Name: "solo", Own: true}, ask: "solo", newest: "solo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inv := build(tc.inv...)
			ds := Classify(inv, defaultPolicy(), now)
			l := BuildLineage(inv, ds, now)
			l.Carry = tc.carry
			find := func(name string) int {
				for _, j := range l.Of(tc.ws) {
					if l.Copies[j].Name == name {
						return j
					}
				}
				t.Fatalf("no copy %q in workspace %v", name, tc.ws)
				return -1
			}
			i := find(tc.ask)
			c := &l.Copies[i]
			if tc.wantData != nil && !c.DataTime.Equal(*tc.wantData) {
				t.Errorf("data time of %s = %s, want %s", tc.ask, c.DataTime, *tc.wantData)
			}
			if tc.wantKind != 0 && c.Kind != tc.wantKind {
				t.Errorf("kind of %s = %s, want %s", tc.ask, c.Kind, tc.wantKind)
			}
			if tc.newest != "" {
				b, tie := l.Newest(tc.ws)
				if b < 0 || l.Copies[b].Name != tc.newest || tie != tc.tie {
					got := "none"
					if b >= 0 {
						got = l.Copies[b].Name
					}
					t.Errorf("newest = %s (tie %v), want %s (tie %v)", got, tie, tc.newest, tc.tie)
				}
				if n, _ := l.IsNewest(find(tc.newest)); !n {
					t.Errorf("IsNewest(%s) = false", tc.newest)
				}
			}
			if tc.heldSet {
				got := ""
				if j := l.HeldBy(i); j >= 0 {
					got = l.Copies[j].Name
				}
				if got != tc.held {
					t.Errorf("HeldBy(%s) = %q, want %q", tc.ask, got, tc.held)
				}
				if l.LastCopy(i) != (tc.held == "") {
					t.Errorf("LastCopy(%s) = %v", tc.ask, l.LastCopy(i))
				}
			}
		})
	}
}

// TestSupersessionAsksTheLineage is finding 2 of issue 23 in the classifier
// (docs/spec.md#rule-superseded, docs/spec.md#rule-durable-evidence): a restored
// claim holds its source's data, so it supersedes a claim, and is durable
// evidence for a discard, only when that data is newer than the claim's
// orphaned-since; an older claim in use never is.
func TestSupersessionAsksTheLineage(t *testing.T) {
	alice2 := pvc("alice-2", workspace("alice"), created(ago(10*time.Hour)), marked(lT2))
	old := func(opts ...claimOpt) inventory.Claim {
		return pvc("alice-old", append([]claimOpt{workspace("alice"), created(ago(time.Hour)), marked(ago(time.Hour))}, opts...)...)
	}
	inUse := func(name string) invOpt { return refs(name, pod("ide-"+name, "volume data")) }
	cases := []struct {
		name    string
		inv     []invOpt
		state   State
		discard bool
		carry   bool // --sessions-carry-data
	}{
		{"a restored claim of older data is no newer claim",
			[]invOpt{claims(alice2, old(restoredFrom("r1", lT1)))}, Orphaned, false, false},
		{"a restored claim of older data in use is no newer data and no discard evidence",
			[]invOpt{claims(alice2, old(restoredFrom("r1", lT1))), inUse("alice-old")}, Orphaned, false, false},
		{"a rescue of a restored claim of older data is no newer data",
			[]invOpt{claims(alice2, old(restoredFrom("r1", lT1))), snaps(rescueOf("r-old", "alice-old", ago(time.Hour)))}, Orphaned, false, false},
		{"a restored claim of newer data supersedes",
			[]invOpt{claims(alice2, old(restoredFrom("r9", ago(2*time.Hour))))}, Superseded, false, true},
		{"a restored claim of newer data in use is discard evidence",
			[]invOpt{claims(alice2, old(restoredFrom("r9", ago(2*time.Hour)))), inUse("alice-old")}, Superseded, true, true},
		{"a restored claim of newer data in use that descends from another claim does not supersede",
			[]invOpt{claims(alice2, old(restoredFrom("r9", ago(2*time.Hour)))), inUse("alice-old")}, Orphaned, false, false},
		{"a restored claim of older data in use is no discard evidence beside a newer claim not in use",
			[]invOpt{claims(alice2, old(restoredFrom("r1", lT1)), pvc("alice-3", workspace("alice"), created(ago(30*time.Minute)))), inUse("alice-old")}, Superseded, false, true},
		{"a newer claim in use is discard evidence",
			[]invOpt{claims(alice2, old()), inUse("alice-old")}, Superseded, true, true},
		{"an older claim in use is no discard evidence",
			[]invOpt{claims(alice2, old(), pvc("alice-1", workspace("alice"), created(ago(20*time.Hour)))), inUse("alice-1")}, Superseded, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := defaultPolicy()
			p.SessionsCarryData = tc.carry
			ds := Classify(build(tc.inv...), p, now)
			d := ds[0]
			if d.Claim.Name != "alice-2" {
				t.Fatalf("first decision is %s", d.Claim.Name)
			}
			if d.State != tc.state || d.Discard != tc.discard {
				t.Errorf("alice-2: %s (%q), discard %v (%q); want %s, discard %v", d.State, d.Reason, d.Discard, d.DiscardReason, tc.state, tc.discard)
			}
		})
	}
}

// TestBuildLineageAllocBudget holds the judge to a handful of allocations
// whatever the inventory's size (docs/spec.md#rule-lineage: one pass over claims and
// snapshots): the copies, the name and workspace maps and the chain.
func TestBuildLineageAllocBudget(t *testing.T) {
	inv := benchInventory(20 * benchNamespaces)
	ds := Classify(inv, defaultPolicy(), now)
	allocs := testing.AllocsPerRun(3, func() { BuildLineage(inv, ds, now) })
	if perClaim := allocs / float64(len(inv.Claims)); perClaim >= 0.1 {
		t.Errorf("%.0f allocations for %d claims (%.3f per claim), budget < 0.1 per claim", allocs, len(inv.Claims), perClaim)
	} else {
		t.Logf("%.0f allocations for %d claims", allocs, len(inv.Claims))
	}
}

// BenchmarkBuildLineage100k measures the judge on the classify benchmark's
// inventory.
func BenchmarkBuildLineage100k(b *testing.B) {
	inv := benchInventory(100_000)
	ds := Classify(inv, defaultPolicy(), now)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		BuildLineage(inv, ds, now)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(b.N)*100_000), "ns/claim")
}
