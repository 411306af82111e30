package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// AnnotationImportedFrom on an imported snapshot and its content names the
// copy: <source cluster>/<namespace>/<snapshot> of the bundle.
const AnnotationImportedFrom = inventory.Prefix + "imported-from"

// ContentName is the name of the VolumeSnapshotContent an import creates
// for a storage snapshot: one per driver and handle in a cluster, so that a
// storage snapshot is never bound twice (deleting one binding, with
// deletionPolicy Delete, would delete the other's data).
func ContentName(driver, handle string) string {
	sum := sha256.Sum256([]byte(driver + "/" + handle))
	return "pvc-janitor-import-" + hex.EncodeToString(sum[:])[:20]
}

// Cluster is what an import plan needs to know of the target cluster.
type Cluster struct {
	// Drivers are the names of its CSIDriver objects.
	Drivers map[string]bool
	// Contents are its VolumeSnapshotContents.
	Contents []Content
	// Snapshots are the VolumeSnapshots of the target namespaces.
	Snapshots map[inventory.Key]Snapshot
}

// Content is a VolumeSnapshotContent as the plan weighs it.
type Content struct {
	Name, Driver, Handle string
	// Ref is the snapshot it is (to be) bound to; RefUID empty until the
	// snapshot controller binds it.
	Ref    inventory.Key
	RefUID types.UID
}

// Snapshot is a VolumeSnapshot as the plan weighs it.
type Snapshot struct {
	UID types.UID
	// Content is spec.source.volumeSnapshotContentName, else the content
	// it is bound to.
	Content string
}

// ClusterOf reduces what was read to a Cluster.
func ClusterOf(drivers []string, contents []snapv1.VolumeSnapshotContent, snaps []snapv1.VolumeSnapshot) Cluster {
	c := Cluster{Drivers: map[string]bool{}, Snapshots: map[inventory.Key]Snapshot{}}
	for _, d := range drivers {
		c.Drivers[d] = true
	}
	for i := range contents {
		vc := &contents[i]
		h := ""
		switch {
		case vc.Status != nil && vc.Status.SnapshotHandle != nil && *vc.Status.SnapshotHandle != "":
			h = *vc.Status.SnapshotHandle
		case vc.Spec.Source.SnapshotHandle != nil:
			h = *vc.Spec.Source.SnapshotHandle
		}
		c.Contents = append(c.Contents, Content{Name: vc.Name, Driver: vc.Spec.Driver, Handle: h,
			Ref:    inventory.Key{Namespace: vc.Spec.VolumeSnapshotRef.Namespace, Name: vc.Spec.VolumeSnapshotRef.Name},
			RefUID: vc.Spec.VolumeSnapshotRef.UID})
	}
	for i := range snaps {
		vs := &snaps[i]
		s := Snapshot{UID: vs.UID}
		switch {
		case vs.Spec.Source.VolumeSnapshotContentName != nil:
			s.Content = *vs.Spec.Source.VolumeSnapshotContentName
		case vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil:
			s.Content = *vs.Status.BoundVolumeSnapshotContentName
		}
		c.Snapshots[inventory.Key{Namespace: vs.Namespace, Name: vs.Name}] = s
	}
	return c
}

// Step is what an import does for one copy: create the content, the
// snapshot, both or neither, or refuse the copy (Refused says why).
type Step struct {
	Copy *Copy
	// Target is the snapshot to be: the copy's name in its namespace (or
	// the one the import was given).
	Target inventory.Key
	// ContentName is the content that binds it (ContentName, or the one
	// already in the cluster).
	ContentName string
	NewContent  *snapv1.VolumeSnapshotContent
	NewSnapshot *snapv1.VolumeSnapshot
	Refused     string
}

// Unchanged says that the copy is in the cluster already: nothing to do.
func (s *Step) Unchanged() bool {
	return s.Refused == "" && s.NewContent == nil && s.NewSnapshot == nil
}

// Options say how a bundle is imported.
type Options struct {
	// Namespace, when set, is where every copy goes; else its own.
	Namespace string
	// WorkspaceLabel is the label set to a copy's workspace; empty: the
	// bundle's Source.WorkspaceLabel.
	WorkspaceLabel string
}

// Plan decides, per copy of b in order, what an import creates in cluster
// (docs/spec.md#import): a pre-provisioned VolumeSnapshotContent of the
// storage snapshot (deletionPolicy Retain) and the VolumeSnapshot bound to
// it, labelled as the janitor's rescue. A copy already imported, or whose
// storage snapshot is there as that very snapshot, is unchanged: a second
// import creates nothing. A copy is refused when the cluster has no
// CSIDriver of its driver, its storage snapshot is bound to another
// snapshot, or its name is taken by another snapshot.
func Plan(b *Bundle, cluster Cluster, o Options) []Step {
	label := o.WorkspaceLabel
	if label == "" {
		label = b.Source.WorkspaceLabel
	}
	targets := map[inventory.Key]bool{}
	steps := make([]Step, 0, len(b.Copies))
	for i := range b.Copies {
		c := &b.Copies[i]
		st := Step{Copy: c, Target: inventory.Key{Namespace: c.Namespace, Name: c.Snapshot},
			ContentName: ContentName(c.Driver, c.SnapshotHandle)}
		if o.Namespace != "" {
			st.Target.Namespace = o.Namespace
		}
		st.Refused = plan(&st, c, cluster, targets, label, b.Source.Cluster)
		if st.Refused != "" {
			st.NewContent, st.NewSnapshot = nil, nil
		}
		targets[st.Target] = true
		steps = append(steps, st)
	}
	return steps
}

// plan fills st's creations and returns why the copy is refused, if it is.
func plan(st *Step, c *Copy, cluster Cluster, targets map[inventory.Key]bool, label, srcCluster string) string {
	if targets[st.Target] {
		return fmt.Sprintf("another copy of the bundle is imported as %s", st.Target)
	}
	if !cluster.Drivers[c.Driver] {
		return fmt.Sprintf("this cluster has no CSIDriver %s: its storage cannot hold snapshot %s", c.Driver, c.SnapshotHandle)
	}
	existing, snapOK := cluster.Snapshots[st.Target]
	var mine *Content // the content of this storage snapshot, if any
	for i := range cluster.Contents {
		vc := &cluster.Contents[i]
		switch {
		case vc.Driver == c.Driver && vc.Handle == c.SnapshotHandle:
			if vc.Ref != st.Target {
				return fmt.Sprintf("storage snapshot %s is already in this cluster as VolumeSnapshotContent %s of snapshot %s", c.SnapshotHandle, vc.Name, vc.Ref)
			}
			mine = vc
		case vc.Name == st.ContentName:
			return fmt.Sprintf("VolumeSnapshotContent %s exists and holds another storage snapshot (%s %s)", vc.Name, vc.Driver, vc.Handle)
		}
	}
	if mine != nil {
		st.ContentName = mine.Name
		if mine.RefUID != "" && (!snapOK || existing.UID != mine.RefUID) {
			return fmt.Sprintf("VolumeSnapshotContent %s of this storage snapshot is bound to an earlier snapshot %s (UID %s): delete that content (it is Retain) and import again",
				mine.Name, st.Target, mine.RefUID)
		}
	}
	if snapOK && existing.Content != st.ContentName {
		return fmt.Sprintf("VolumeSnapshot %s exists and is not this copy's (its content is %q)", st.Target, existing.Content)
	}
	if mine == nil {
		st.NewContent = newContent(st, c, srcCluster)
	}
	if !snapOK {
		st.NewSnapshot = newSnapshot(st, c, label, srcCluster)
	}
	return ""
}

// newContent is the pre-provisioned content of the copy's storage snapshot.
func newContent(st *Step, c *Copy, srcCluster string) *snapv1.VolumeSnapshotContent {
	handle := c.SnapshotHandle
	vc := &snapv1.VolumeSnapshotContent{
		TypeMeta: metav1.TypeMeta{APIVersion: snapv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshotContent"},
		ObjectMeta: metav1.ObjectMeta{Name: st.ContentName,
			Labels:      map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue},
			Annotations: map[string]string{AnnotationImportedFrom: srcCluster + "/" + c.Key()}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef: corev1.ObjectReference{APIVersion: snapv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot",
				Namespace: st.Target.Namespace, Name: st.Target.Name},
			DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
			Driver:         c.Driver,
			Source:         snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
		},
	}
	if c.SourceVolumeMode != "" {
		m := corev1.PersistentVolumeMode(c.SourceVolumeMode)
		vc.Spec.SourceVolumeMode = &m
	}
	return vc
}

// newSnapshot is the VolumeSnapshot bound to the content: for the janitor's
// copies, its rescue (or archive) as the rescue labels one
// (docs/spec.md#rescue-labels), dated by the copy's data time.
func newSnapshot(st *Step, c *Copy, label, srcCluster string) *snapv1.VolumeSnapshot {
	content := st.ContentName
	labels := map[string]string{}
	ann := map[string]string{AnnotationImportedFrom: srcCluster + "/" + c.Key(), inventory.AnnotationSourceName: c.SourceClaim}
	if c.SourceUID != "" {
		ann[inventory.AnnotationSourceUID] = c.SourceUID
	}
	if label != "" && c.Workspace != "" {
		labels[label] = c.Workspace
	}
	if c.Origin != OriginForeign {
		labels[inventory.LabelManagedBy] = inventory.ManagedByValue
		ann[inventory.AnnotationOrphanedSince] = c.DataTime.UTC().Format(time.RFC3339)
		if c.RestoredDataTime != nil {
			ann[inventory.AnnotationRestoredDataTime] = c.RestoredDataTime.UTC().Format(time.RFC3339)
		}
	}
	if c.Origin == OriginArchive {
		labels[inventory.LabelSuperseded] = "true"
	}
	if c.Claim != nil {
		if raw, err := json.Marshal(c.Claim); err == nil {
			ann[restore.AnnotationTemplate] = string(raw)
		}
		if c.ClaimDropped != "" {
			ann[restore.AnnotationTemplateDropped] = c.ClaimDropped
		}
	}
	return &snapv1.VolumeSnapshot{
		TypeMeta:   metav1.TypeMeta{APIVersion: snapv1.SchemeGroupVersion.String(), Kind: "VolumeSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Namespace: st.Target.Namespace, Name: st.Target.Name, Labels: labels, Annotations: ann},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}},
	}
}
