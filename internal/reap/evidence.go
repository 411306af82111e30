package reap

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// Evidence is the snapshot a reap decision relies on: the rescue of a
// Rescued claim, or the newer snapshot of the workspace that makes a
// Superseded claim's discard durable. It is read again before every
// attempt of the claim's delete (docs/spec.md#reap-rescue-reread).
type Evidence struct {
	Namespace string
	Snapshot  string
	UID       types.UID
	Content   string
	// Cut is the snapshot's cut time as the decision read it.
	Cut time.Time
}

// EvidenceOf is the snapshot d relies on, nil when it relies on none (a
// discard whose durable evidence is a claim in use). snaps are the
// snapshots of the claim's namespace in the read d comes from.
//
// What a state relies on is its reap column (classify.StateRules): a
// claim reaped on its rescue relies on d.Snapshot; a discard on
// d.Durable, the intact rescue its DiscardReason names, which need not be
// d.Snapshot (the newer snapshot that made it Superseded).
func EvidenceOf(d *classify.Decision) *Evidence {
	var s *inventory.Snapshot
	switch classify.RuleFor(d.State).Reap {
	case classify.ReapOnRescue:
		s = d.Snapshot
	case classify.ReapOnDiscard:
		if d.Discard {
			s = d.Durable
		}
	case classify.NotReaped:
	}
	if s == nil {
		return nil
	}
	return &Evidence{Namespace: s.Namespace, Snapshot: s.Name, UID: s.UID, Content: s.ContentName, Cut: classify.CutTime(s)}
}

// StillJustified decides, from a re-read of the evidence's snapshot
// (nil: gone) and of its content (nil: gone or not bound), whether the
// decision still stands: the same snapshot (UID), still intact
// (classify.Intact: ready, no error, not being deleted, its content exists,
// bound to its UID, with a handle, not being deleted), bound to the same
// content and cut at the time the decision used. A snapshot replaced,
// re-bound or re-dated is evidence the decision did not see.
func StillJustified(e Evidence, s *inventory.Snapshot, c *inventory.Content) (bool, string) {
	if s == nil {
		return false, "its VolumeSnapshot " + e.Snapshot + " is gone since it was read"
	}
	if s.UID != e.UID {
		return false, "another VolumeSnapshot has the name " + e.Snapshot + " now (UID " + string(s.UID) + ")"
	}
	contents := map[string]inventory.Content{}
	if c != nil {
		contents[c.Name] = *c
	}
	if ok, why := classify.Intact(s, contents); !ok {
		return false, "its VolumeSnapshot " + e.Snapshot + " is no longer intact: " + why
	}
	if s.ContentName != e.Content {
		return false, "its VolumeSnapshot " + e.Snapshot + " is bound to another VolumeSnapshotContent (" + s.ContentName + ") since it was read"
	}
	if cut := classify.CutTime(s); !cut.Equal(e.Cut) {
		return false, "its VolumeSnapshot " + e.Snapshot + " is dated " + cut.UTC().Format(time.RFC3339) +
			" now, not " + e.Cut.UTC().Format(time.RFC3339) + " as when it was read"
	}
	return true, ""
}

// RereadRefusal is the one error of a re-read that refuses the delete it
// was made for (docs/architecture.md#words): the reap's re-read of a
// claim's rescue (StillJustified), prune's of the rescue it deletes
// (prune.StillPrunable). Why says why, for the report. Gone says that the
// object read again is gone or being deleted; prune re-reads the very
// object it deletes, so there Gone may be its own delete whose response
// was lost (docs/spec.md#retention-lost-response). The reap re-reads the
// rescue a claim's delete relies on, not the claim, and leaves it false.
// A failed read is not a refusal: it is returned as it is.
type RereadRefusal struct {
	Why  string
	Gone bool
}

func (e *RereadRefusal) Error() string { return e.Why }

// AsRereadRefusal reports whether err is a re-read's refusal.
func AsRereadRefusal(err error) (*RereadRefusal, bool) {
	var r *RereadRefusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}

// stillJustified reads the evidence again (one get of the snapshot, one
// get of its content) and fails with a RereadRefusal unless
// StillJustified. A failed read is returned as it is, so that a claim is
// never deleted on a check that did not happen. The batch reads the
// snapshots in one list instead (batch.go); this serves the attempts the
// batch does not vouch for.
func stillJustified(ctx context.Context, c *kube.Clients, e *Evidence, workspaceLabel string) error {
	vs, err := c.Snap.SnapshotV1().VolumeSnapshots(e.Namespace).Get(ctx, e.Snapshot, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		vs, err = nil, nil
	}
	if err != nil {
		return err
	}
	var snap *inventory.Snapshot
	if vs != nil {
		s := kube.Snapshot(vs, workspaceLabel)
		snap = &s
	}
	return justified(ctx, c, e, snap)
}

// justified reads the content of snap (the evidence's snapshot as just
// read; nil: gone) by name and fails with a RereadRefusal unless
// StillJustified.
func justified(ctx context.Context, c *kube.Clients, e *Evidence, snap *inventory.Snapshot) error {
	var content *inventory.Content
	if snap != nil && snap.ContentName != "" {
		var err error
		if content, err = readContent(ctx, c, snap.ContentName); err != nil {
			return err
		}
	}
	if ok, why := StillJustified(*e, snap, content); !ok {
		return &RereadRefusal{Why: why}
	}
	return nil
}

// readContent is one get of the content by name, without the retry
// policy (the caller's attempt has it); nil when it does not exist.
func readContent(ctx context.Context, c *kube.Clients, name string) (*inventory.Content, error) {
	vc, err := c.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ct := kube.Content(vc)
	return &ct, nil
}
