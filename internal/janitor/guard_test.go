package janitor

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func rescueOf(name, source string, uid types.UID, data time.Time, policy string, intact bool) (inventory.Snapshot, inventory.Content) {
	d := data
	s := inventory.Snapshot{Namespace: "ws", Name: name, UID: types.UID("u-" + name), SourceClaim: source, SourceUID: uid,
		ManagedByJanitor: true, OrphanedSince: &d, ReadyToUse: true, ContentName: "c-" + name,
		CreationTimestamp: data.Add(time.Minute)}
	c := inventory.Content{Name: "c-" + name, DeletionPolicy: policy, SnapshotUID: s.UID, HasHandle: intact}
	return s, c
}

// TestAtRisk is the list of docs/spec.md#guard-at-risk, one row per state and per rescue condition.
func TestAtRisk(t *testing.T) {
	retain, retainC := rescueOf("r", "a", "ua", t0, "Retain", true)
	del, delC := rescueOf("d", "a", "ua", t0, "Delete", true)
	broken, brokenC := rescueOf("b", "a", "ua", t0, "Retain", false)
	inv := &inventory.Inventory{Contents: map[string]inventory.Content{retainC.Name: retainC, delC.Name: delC, brokenC.Name: brokenC}}
	for _, tc := range []struct {
		state classify.State
		snap  *inventory.Snapshot
		allow bool
		want  string // "" when not at risk
	}{
		{classify.Terminating, nil, false, ""},
		{classify.Unbound, nil, false, ""},
		{classify.InUse, nil, false, "in use"},
		{classify.Young, nil, false, "young"},
		{classify.Held, nil, false, "held"},
		{classify.Attached, nil, false, "no durable snapshot"},
		{classify.Grace, nil, false, "no durable snapshot"},
		{classify.Orphaned, nil, false, "no durable snapshot"},
		{classify.Snapshotting, nil, false, "no durable snapshot"},
		{classify.SnapshotFailed, nil, false, "no durable snapshot"},
		{classify.Superseded, nil, false, "no durable snapshot"},
		{classify.Rescued, nil, false, "without a known snapshot"},
		{classify.Rescued, &retain, false, ""},
		{classify.Rescued, &del, false, "deletionPolicy Delete"},
		{classify.Rescued, &del, true, ""},
		{classify.Rescued, &broken, true, "not intact"},
	} {
		risky, why := AtRisk(&classify.Decision{State: tc.state, Snapshot: tc.snap}, inv, tc.allow)
		if risky != (tc.want != "") || !strings.Contains(why, tc.want) {
			t.Errorf("%s (snapshot %v, allow %v): at risk %v %q, want %q", tc.state, tc.snap != nil, tc.allow, risky, why, tc.want)
		}
	}
}

// TestOnlyCopies (docs/spec.md#guard-only-copies): the newest snapshot (by data
// time) of each claim that is gone is its only copy: the janitor's per
// source UID, someone else's per source name (issue 23 finding 4: a claim
// may have been reaped on it) unless a rescue of the janitor's of that name
// holds data at least as new. Snapshots of live claims, and pre-provisioned
// ones, are not.
func TestOnlyCopies(t *testing.T) {
	foreignOf := func(name, source string, data time.Time) inventory.Snapshot {
		s, _ := rescueOf(name, source, "", data, "Delete", true)
		s.ManagedByJanitor, s.OrphanedSince = false, nil
		s.CutTime = &data
		return s
	}
	old, _ := rescueOf("gone-old", "gone", "u-gone", t0.Add(-2*time.Hour), "Retain", true)
	newer, _ := rescueOf("gone-new", "gone", "u-gone", t0.Add(-time.Hour), "Retain", true)
	live, _ := rescueOf("live", "live", "u-live", t0, "Retain", true)
	// The live claim "live" was created at t0-30m.
	earlier := foreignOf("backup-earlier", "live", t0.Add(-time.Hour))
	earlier.CreationTimestamp = t0.Add(-time.Hour)
	// vol: every snapshot's content was cut from volume "vol-gone" but
	// those the row names otherwise ("" unknown).
	for _, tc := range []struct {
		name  string
		snaps []inventory.Snapshot
		vol   map[string]string
		want  string
	}{
		{"the janitor's newest rescue of a gone claim", []inventory.Snapshot{old, newer, live}, nil, "gone-new"},
		{"a backup tool's snapshot of a claim reaped on it", []inventory.Snapshot{live, foreignOf("backup", "reaped", t0)}, nil, "backup"},
		{"a backup tool's newer snapshot than the janitor's rescue of that claim", []inventory.Snapshot{newer, foreignOf("backup", "gone", t0)}, nil, "backup,gone-new"},
		{"a backup tool's older snapshot beside the janitor's rescue of the same volume", []inventory.Snapshot{newer, foreignOf("backup", "gone", t0.Add(-3*time.Hour))}, nil, "gone-new"},
		{"a backup tool's older snapshot of an earlier claim of the name (another volume) is its own only copy",
			[]inventory.Snapshot{newer, foreignOf("backup", "gone", t0.Add(-3*time.Hour))}, map[string]string{"backup": "vol-gone-1"}, "backup,gone-new"},
		{"a backup tool's snapshot whose volume is unknown counts alone",
			[]inventory.Snapshot{newer, foreignOf("backup", "gone", t0.Add(-3*time.Hour))}, map[string]string{"backup": ""}, "backup,gone-new"},
		{"two backups of two claims of one name: each is an only copy",
			[]inventory.Snapshot{foreignOf("b1", "gone", t0.Add(-3*time.Hour)), foreignOf("b2", "gone", t0)}, map[string]string{"b1": "vol-1", "b2": "vol-2"}, "b1,b2"},
		{"a backup tool's snapshot of a live claim", []inventory.Snapshot{foreignOf("backup", "live", t0)}, nil, ""},
		{"a backup tool's snapshot taken before the live claim of its name was created: of an earlier claim, gone (finding B)",
			[]inventory.Snapshot{earlier}, map[string]string{"backup-earlier": "vol-live-0"}, "backup-earlier"},
		{"a pre-provisioned snapshot", []inventory.Snapshot{foreignOf("imported", "", t0)}, nil, ""},
	} {
		inv := &inventory.Inventory{Snapshots: map[string][]inventory.Snapshot{"ws": tc.snaps}, Contents: map[string]inventory.Content{}}
		for _, s := range tc.snaps {
			v, ok := tc.vol[s.Name]
			if !ok {
				v = "vol-" + s.SourceClaim
			}
			inv.Contents[s.ContentName] = inventory.Content{Name: s.ContentName, SourceVolume: v}
		}
		lv := Live{UIDs: map[types.UID]bool{"u-live": true}, Names: map[inventory.Key]bool{{Namespace: "ws", Name: "live"}: true},
			Created: map[inventory.Key]time.Time{{Namespace: "ws", Name: "live"}: t0.Add(-30 * time.Minute)}}
		var names []string
		for _, s := range OnlyCopies(inv, lv) {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("%s: only copies = [%s], want [%s]", tc.name, got, tc.want)
		}
	}
}
