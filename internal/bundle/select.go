package bundle

import (
	"fmt"
	"sort"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// Candidate is a snapshot that holds a workspace's newest data, and why.
type Candidate struct {
	Snapshot *inventory.Snapshot
	// Claim is the claim it is the copy of (its source claim's name).
	Claim string
	// Gone: the claim is gone and this is its only copy; otherwise it is
	// the rescue of a claim that is Rescued.
	Gone bool
}

// Why says what the candidate is to its claim, as a report's reason.
func (c *Candidate) Why() string {
	if c.Gone {
		return "the only copy of claim " + c.Claim + " (gone)"
	}
	return "the rescue of Rescued claim " + c.Claim
}

// Select lists the copies an export carries (docs/spec.md#export-what): per
// claim that is gone, its newest copy as guard judges it (only, from
// janitor.OnlyCopies), and per Rescued claim of the decisions, its rescue.
// A snapshot is listed once, sorted by namespace and name. Whether each is
// intact is the caller's to check: one that is not cannot be exported.
func Select(ds []classify.Decision, only []*inventory.Snapshot) []Candidate {
	seen := map[inventory.Key]bool{}
	var out []Candidate
	add := func(c Candidate) {
		if k := c.Snapshot.Key(); !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	for i := range ds {
		if d := &ds[i]; d.Rescue() != nil && d.Claim != nil {
			add(Candidate{Snapshot: d.Rescue(), Claim: d.Claim.Name})
		}
	}
	for _, s := range only {
		add(Candidate{Snapshot: s, Claim: s.SourceClaim, Gone: true})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Snapshot, out[j].Snapshot
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// OriginOf is what kind of copy s is.
func OriginOf(s *inventory.Snapshot) string {
	switch {
	case !s.ManagedByJanitor:
		return OriginForeign
	case s.Superseded:
		return OriginArchive
	}
	return OriginRescue
}

// NewCopy is the bundle's copy of the snapshot s (as the inventory reads
// it), from its VolumeSnapshot vs and its VolumeSnapshotContent vc read
// after the content was set to Retain. It fails when vc is not the one
// bound to vs, or names no driver or handle: such a copy cannot be
// imported anywhere.
func NewCopy(s *inventory.Snapshot, vs *snapv1.VolumeSnapshot, vc *snapv1.VolumeSnapshotContent) (Copy, error) {
	c := Copy{Workspace: s.Workspace, Namespace: vs.Namespace, Snapshot: vs.Name, Origin: OriginOf(s),
		SourceClaim: s.SourceClaim, SourceUID: string(s.SourceUID), Driver: vc.Spec.Driver,
		DataTime: second(classify.DataTime(s, nil))}
	if vs.UID != s.UID {
		return Copy{}, fmt.Errorf("snapshot %s/%s was replaced since it was read", vs.Namespace, vs.Name)
	}
	if vc.Spec.VolumeSnapshotRef.UID != vs.UID {
		return Copy{}, fmt.Errorf("content %s is not bound to snapshot %s/%s", vc.Name, vs.Namespace, vs.Name)
	}
	if c.SourceClaim == "" {
		c.SourceClaim = vs.Annotations[inventory.AnnotationSourceName]
	}
	switch {
	case vc.Status != nil && vc.Status.SnapshotHandle != nil && *vc.Status.SnapshotHandle != "":
		c.SnapshotHandle = *vc.Status.SnapshotHandle
	case vc.Spec.Source.SnapshotHandle != nil:
		c.SnapshotHandle = *vc.Spec.Source.SnapshotHandle
	}
	if c.Driver == "" || c.SnapshotHandle == "" {
		return Copy{}, fmt.Errorf("content %s names no driver or snapshot handle", vc.Name)
	}
	if vc.Spec.SourceVolumeMode != nil {
		c.SourceVolumeMode = string(*vc.Spec.SourceVolumeMode)
	}
	switch {
	case vs.Status != nil && vs.Status.RestoreSize != nil:
		c.RestoreSize = vs.Status.RestoreSize.Value()
	case vc.Status != nil && vc.Status.RestoreSize != nil:
		c.RestoreSize = *vc.Status.RestoreSize
	}
	if s.CutTime != nil {
		t := second(*s.CutTime)
		c.CutTime = &t
	}
	if s.RestoredDataTime != nil {
		t := second(*s.RestoredDataTime)
		c.RestoredDataTime = &t
	}
	if raw := vs.Annotations[restore.AnnotationTemplate]; raw != "" {
		t, err := restore.ParseTemplate(raw)
		if err != nil {
			return Copy{}, fmt.Errorf("snapshot %s/%s: %w", vs.Namespace, vs.Name, err)
		}
		c.Claim = t
		c.ClaimDropped = vs.Annotations[restore.AnnotationTemplateDropped]
	}
	return c, nil
}

// second is t in UTC to the second, as every time of the janitor's marks.
func second(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }
