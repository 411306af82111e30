package reap

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestStillJustified (docs/spec.md#reap-rescue-reread): one row per way the
// re-read of the rescue can differ from the one the decision used.
func TestStillJustified(t *testing.T) {
	cut := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := cut.Add(time.Minute)
	gone := cut.Add(time.Hour)
	e := Evidence{Namespace: "ns", Snapshot: "ws-a-rescue-1", UID: "uid-s", Content: "content-1", Cut: cut}
	snap := func(f func(*inventory.Snapshot)) *inventory.Snapshot {
		s := &inventory.Snapshot{Namespace: "ns", Name: "ws-a-rescue-1", UID: "uid-s", CutTime: &cut, ReadyToUse: true, ContentName: "content-1"}
		if f != nil {
			f(s)
		}
		return s
	}
	content := func(f func(*inventory.Content)) *inventory.Content {
		c := &inventory.Content{Name: "content-1", SnapshotUID: "uid-s", HasHandle: true, DeletionPolicy: "Retain"}
		if f != nil {
			f(c)
		}
		return c
	}
	for _, c := range []struct {
		name    string
		snap    *inventory.Snapshot
		content *inventory.Content
		ok      bool
		why     string
	}{
		{name: "unchanged", snap: snap(nil), content: content(nil), ok: true},
		{name: "content set to Delete: still intact", snap: snap(nil), content: content(func(c *inventory.Content) { c.DeletionPolicy = "Delete" }), ok: true},
		{name: "snapshot gone", snap: nil, content: content(nil), why: "is gone since it was read"},
		{name: "another snapshot has the name", snap: snap(func(s *inventory.Snapshot) { s.UID = "uid-other" }), content: content(nil), why: "another VolumeSnapshot has the name"},
		{name: "snapshot being deleted", snap: snap(func(s *inventory.Snapshot) { s.DeletionTimestamp = &gone }), content: content(nil), why: "being deleted"},
		{name: "snapshot not ready", snap: snap(func(s *inventory.Snapshot) { s.ReadyToUse = false }), content: content(nil), why: "not ready to use"},
		{name: "snapshot carries an error", snap: snap(func(s *inventory.Snapshot) { s.Error = &inventory.SnapshotError{Message: "lost"} }), content: content(nil), why: "status.error"},
		{name: "content gone", snap: snap(nil), content: nil, why: "does not exist"},
		{name: "content bound to another snapshot", snap: snap(nil), content: content(func(c *inventory.Content) { c.SnapshotUID = "uid-other" }), why: "bound to another snapshot"},
		{name: "content without a handle", snap: snap(nil), content: content(func(c *inventory.Content) { c.HasHandle = false }), why: "no snapshotHandle"},
		{name: "content being deleted", snap: snap(nil), content: content(func(c *inventory.Content) { c.DeletionTimestamp = &gone }), why: "is being deleted"},
		{name: "bound to another content", snap: snap(func(s *inventory.Snapshot) { s.ContentName = "content-2" }),
			content: content(func(c *inventory.Content) { c.Name = "content-2" }), why: "bound to another VolumeSnapshotContent"},
		{name: "cut at another time", snap: snap(func(s *inventory.Snapshot) { s.CutTime = &later }), content: content(nil), why: "is dated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, why := StillJustified(e, c.snap, c.content)
			if ok != c.ok || !strings.Contains(why, c.why) || (!ok && why == "") {
				t.Errorf("StillJustified = %v, %q; want %v, %q", ok, why, c.ok, c.why)
			}
		})
	}
}

// TestEvidenceOf: a Rescued claim relies on its rescue; a discard on the
// intact rescue classify named as its durable evidence (Decision.Durable),
// never on a newer snapshot that is only why it is Superseded (Snapshot); a
// discard on a claim in use, a Superseded claim kept, and other states on
// none.
func TestEvidenceOf(t *testing.T) {
	cut := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := inventory.Snapshot{Namespace: "ns", Name: "r", UID: "uid-r", ContentName: "c", CutTime: &cut}
	other := inventory.Snapshot{Namespace: "ns", Name: "r-2", UID: "uid-r2", ContentName: "c2", CutTime: &cut}
	evR := &Evidence{Namespace: "ns", Snapshot: "r", UID: "uid-r", Content: "c", Cut: cut}
	evOther := &Evidence{Namespace: "ns", Snapshot: "r-2", UID: "uid-r2", Content: "c2", Cut: cut}
	for _, c := range []struct {
		name string
		d    classify.Decision
		want *Evidence
	}{
		{"rescued: its rescue", classify.Decision{State: classify.Rescued, Snapshot: &r}, evR},
		{"discard on its Snapshot", classify.Decision{State: classify.Superseded, Snapshot: &r, Discard: true, Durable: &r}, evR},
		{"discard on another rescue than its Snapshot", classify.Decision{State: classify.Superseded, Snapshot: &r, Discard: true, Durable: &other}, evOther},
		{"kept (no discard): none", classify.Decision{State: classify.Superseded, Snapshot: &r, Durable: &other}, nil},
		{"discard on a claim in use", classify.Decision{State: classify.Superseded, Snapshot: &r, Discard: true}, nil},
		{"snapshotting: none", classify.Decision{State: classify.Snapshotting, Snapshot: &r}, nil},
	} {
		got := EvidenceOf(&c.d)
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: EvidenceOf = %+v, want %+v", c.name, got, c.want)
		}
	}
}
