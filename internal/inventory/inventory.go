// Package inventory holds what a run read from the cluster, already reduced to
// the facts that classification needs. Whole API objects are never kept: a
// pod, for instance, survives only as the claim names it references. The
// types here are plain values so that the classifier can be tested without a
// cluster and so that memory stays bounded by the number of claims, not by
// the size of the objects read.
package inventory

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Keys the janitor writes or acts on. Everything under Prefix belongs to the
// janitor; every other key is read as evidence only.
const (
	Prefix = "pvc-janitor.io/"
	// AnnotationOrphanedSince is the janitor's own mark (RFC 3339).
	AnnotationOrphanedSince = Prefix + "orphaned-since"
	// AnnotationRestoredDataTime on a restored claim is the data time it
	// was restored from; the claim's rescues record it too
	// (docs/spec.md#rule-restored-data-time).
	AnnotationRestoredDataTime = Prefix + "restored-data-time"
	// AnnotationLastUsed on a claim is the API server's time (RFC 3339,
	// rounded up) of the last use the janitor saw: no evidence older than
	// it may date an orphan period (docs/spec.md#rule-last-used).
	AnnotationLastUsed = Prefix + "last-used"
	// AnnotationReapAfter on a claim is when (RFC 3339, server clock) its
	// owner's notice ends: the janitor wrote it, with the ReapScheduled
	// Event, when the notice began (docs/spec.md#notice).
	AnnotationReapAfter = Prefix + "reap-after"
	// AnnotationSnoozeUntil on a claim, set by its owner, postpones the
	// reap to that time (RFC 3339), at most --max-snooze past the notice.
	AnnotationSnoozeUntil = Prefix + "snooze-until"
	// LabelPhase mirrors the claim's state, from Attached on.
	LabelPhase = Prefix + "phase"
	// KeyHold, as a label or an annotation with value "true", holds a claim.
	KeyHold = Prefix + "hold"
	// AnnotationSourceUID on a VolumeSnapshot names the UID of its claim.
	AnnotationSourceUID = Prefix + "source-uid"
	// AnnotationSourceName on a VolumeSnapshot names its claim.
	AnnotationSourceName = Prefix + "source-name"
	// AnnotationRescueAttempts on a claim counts the janitor's failed
	// snapshot attempts so far, across runs (docs/spec.md#rescue).
	AnnotationRescueAttempts = Prefix + "rescue-attempts"
	// AnnotationNextAttempt on a claim is when (RFC 3339, server clock) the
	// next snapshot attempt is due after failed ones (docs/spec.md#rescue).
	AnnotationNextAttempt = Prefix + "next-attempt"
	// LabelSuperseded marks an archive snapshot of a superseded claim.
	LabelSuperseded = Prefix + "superseded"
	// LabelStale marks a rescue of an earlier orphan period of its claim,
	// once a rescue of a later one is ready (docs/spec.md#retention): it holds data from
	// before the claim's last use and is left to prune.
	LabelStale = Prefix + "stale"
	// AnnotationPruneIntent on a VolumeSnapshot: a prune set, or was about
	// to set, its content to Delete in order to delete it; a kept rescue
	// carrying it is put back to Retain by the next run
	// (docs/spec.md#retention-intent).
	AnnotationPruneIntent = Prefix + "prune-intent"
	// AnnotationRestoring on a VolumeSnapshot: a restore is creating a claim
	// from it, "<namespace>/<claim>@<RFC 3339>"; prune keeps it
	// (docs/spec.md#restore-protects-source).
	AnnotationRestoring = Prefix + "restoring"
	// LabelManagedBy and ManagedByValue mark the janitor's own snapshots.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "pvc-janitor"
	// ConditionUnused is the claim condition of KEP-5541 (beta in 1.37).
	ConditionUnused = "Unused"
)

// Key names a namespaced object.
type Key struct {
	Namespace string
	Name      string
}

// String renders the key as namespace/name.
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Condition is the part of a claim condition the janitor reads.
type Condition struct {
	Status             string // "True", "False" or "Unknown"
	LastTransitionTime time.Time
}

// OwnerRef is a claim's ownerReference.
type OwnerRef struct {
	APIVersion string
	Kind       string
	Name       string
	UID        types.UID
}

// Claim is a PersistentVolumeClaim reduced to what classification and marking
// need: of its labels only the three classification reads, of its annotations
// only the janitor's own keys.
type Claim struct {
	Namespace         string
	Name              string
	UID               types.UID
	ResourceVersion   string
	CreationTimestamp time.Time
	DeletionTimestamp *time.Time
	Labels            ClaimLabels
	// Annotations holds only keys under Prefix.
	Annotations map[string]string
	// Phase is status.phase: "Bound", "Pending" or "Lost".
	Phase      string
	VolumeName string
	// DataSource is the VolumeSnapshot the claim was created from (its
	// spec.dataSourceRef, else spec.dataSource, in its own namespace), ""
	// for a claim created empty or from anything else.
	DataSource string
	// Unused is the KEP-5541 condition, nil when the claim does not carry it.
	Unused *Condition
	Owners []OwnerRef
	// Capacity is status.capacity's storage in bytes (0 while unknown);
	// StorageClass and VolumeAttributesClass are the spec's class names.
	Capacity              int64
	StorageClass          string
	VolumeAttributesClass string
}

// ClaimLabels are the labels of a claim that classification reads. The
// others are dropped as the claim is read: at a hundred thousand claims,
// whole label maps would be most of the inventory.
type ClaimLabels struct {
	Workspace string // the value of the configured workspace label
	Phase     string // pvc-janitor.io/phase
	HasPhase  bool
	Hold      string // pvc-janitor.io/hold
	HasHold   bool
	// Notify holds the labels notifications read (the owner label, the
	// keys of the routes' selectors), nil when none is configured.
	Notify map[string]string
}

// KeepLabels picks keys out of a claim's labels (nil when it has none of
// them).
func KeepLabels(l map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := l[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// PickLabels picks the labels classification reads out of a claim's labels.
func PickLabels(l map[string]string, workspaceLabel string) ClaimLabels {
	var c ClaimLabels
	if workspaceLabel != "" {
		c.Workspace = l[workspaceLabel]
	}
	c.Phase, c.HasPhase = l[LabelPhase]
	c.Hold, c.HasHold = l[KeyHold]
	return c
}

// HoldValue reports whether v, the value of a pvc-janitor.io/hold label or
// annotation, holds its object. It is compared case-insensitively, on a
// claim and on a snapshot alike: an operator who wrote "True" meant it, and
// erring towards a hold is the safe side.
func HoldValue(v string) bool { return strings.EqualFold(v, "true") }

// HeldBy reports whether labels or annotations hold their object
// (pvc-janitor.io/hold).
func HeldBy(labels, annotations map[string]string) bool {
	return HoldValue(labels[KeyHold]) || HoldValue(annotations[KeyHold])
}

// Key returns the claim's namespace/name.
func (c *Claim) Key() Key { return Key{Namespace: c.Namespace, Name: c.Name} }

// PV is a PersistentVolume reduced to its CSI identity.
type PV struct {
	Name         string
	CSIDriver    string // empty for non-CSI volumes
	VolumeHandle string
	// ReclaimPolicy is spec.persistentVolumeReclaimPolicy: "Delete",
	// "Retain" (deleting its claim frees nothing) or "Recycle".
	ReclaimPolicy string
}

// Attachment is a VolumeAttachment of a PV.
type Attachment struct {
	Name     string
	PVName   string
	NodeName string
	Attached bool
	// Created is the attachment's creationTimestamp: an attachment created
	// after a claim's orphaned-since is a use (docs/spec.md#rule-attached).
	Created time.Time
}

// SnapshotError is the status.error of a VolumeSnapshot.
type SnapshotError struct {
	Message string
	Time    time.Time
}

// Snapshot is a VolumeSnapshot reduced to what classification needs.
type Snapshot struct {
	Namespace         string
	Name              string
	UID               types.UID
	CreationTimestamp time.Time
	DeletionTimestamp *time.Time
	// SourceClaim is spec.source.persistentVolumeClaimName; empty for a
	// pre-provisioned snapshot.
	SourceClaim string
	// SourceUID is the pvc-janitor.io/source-uid annotation, if any.
	SourceUID types.UID
	// Workspace is the value of the workspace label, if configured and set.
	Workspace string
	// ManagedByJanitor is true when app.kubernetes.io/managed-by is pvc-janitor.
	ManagedByJanitor bool
	// Superseded is true for the janitor's archive snapshots of superseded claims.
	Superseded bool
	// Stale is true when it carries pvc-janitor.io/stale: "true".
	Stale bool
	// OrphanedSince is the pvc-janitor.io/orphaned-since annotation, if any.
	OrphanedSince *time.Time
	// RestoredDataTime is the pvc-janitor.io/restored-data-time annotation:
	// a rescue of a restored claim records the data time its claim was
	// restored from, so that the workspace's line it carries stays that
	// short once the claim is gone (docs/spec.md#rule-restored-data-time).
	RestoredDataTime *time.Time
	// CutTime is status.creationTime, the moment the storage system cut
	// the snapshot (for a pre-provisioned one, the original moment, not the
	// import); nil until the snapshot controller knows it.
	CutTime    *time.Time
	ReadyToUse bool
	Error      *SnapshotError
	// ContentName is status.boundVolumeSnapshotContentName.
	ContentName string
	ClassName   string
	// RestoreSize is status.restoreSize in bytes (0 while unknown).
	RestoreSize int64
	// PruneIntent and Restoring are the pvc-janitor.io/prune-intent and
	// pvc-janitor.io/restoring annotations, if any.
	PruneIntent string
	Restoring   string
}

// Key returns the snapshot's namespace/name.
func (s *Snapshot) Key() Key { return Key{Namespace: s.Namespace, Name: s.Name} }

// Content is a VolumeSnapshotContent reduced to what the integrity check
// (docs/spec.md#evidence) and the guard need.
type Content struct {
	Name           string
	DeletionPolicy string // "Delete" or "Retain"
	Snapshot       Key
	// SnapshotUID is spec.volumeSnapshotRef.uid: the snapshot it is bound to.
	SnapshotUID types.UID
	// HasHandle: status.snapshotHandle (or, pre-provisioned,
	// spec.source.snapshotHandle) is set: the storage system holds a snapshot.
	HasHandle bool
	// SourceVolume is spec.source.volumeHandle: the storage volume a
	// dynamically cut snapshot was cut from, "" for a pre-provisioned one.
	// Two snapshots with the same one are of the same claim (a claim's PV
	// is its own): descent the guard can see once the claim is gone.
	SourceVolume      string
	DeletionTimestamp *time.Time
}

// Referrer is something that keeps a claim in use: a pod, a workload's pod
// template, a StatefulSet's claim template or an owner.
type Referrer struct {
	Kind      string // Pod, Deployment, StatefulSet, Job, …; "Owner" is never used: owners keep their own kind
	Namespace string
	Name      string
	// Detail says how it refers, e.g. "volume data", "ephemeral volume scratch",
	// "volumeClaimTemplate data", "owner".
	Detail string
	// For pods: when the pod was created, and whether it has ended
	// (Succeeded or Failed). They serve the check that the controller
	// manager maintains the Unused condition.
	Created  time.Time
	Terminal bool
}

// StatefulSetTemplate is one volumeClaimTemplate of an existing StatefulSet.
// It produces claims named <Template>-<StatefulSet>-<ordinal>.
type StatefulSetTemplate struct {
	Namespace   string
	StatefulSet string
	Template    string
}

// Inventory is everything a run read, reduced.
type Inventory struct {
	// Claims in scope (after namespace and selector filtering).
	Claims []Claim
	// Referrers maps a claim to the pods and pod templates that name it.
	Referrers map[Key][]Referrer
	// StatefulSetTemplates lists the claim templates of existing StatefulSets.
	StatefulSetTemplates []StatefulSetTemplate
	// LiveOwners holds the UIDs of the claims' owners that still exist,
	// mapped to "Kind/name".
	LiveOwners map[types.UID]string
	// PVs by name.
	PVs map[string]PV
	// Attachments by PV name.
	Attachments map[string][]Attachment
	// Snapshots by namespace.
	Snapshots map[string][]Snapshot
	// Contents by name.
	Contents map[string]Content
	// ServerTime is the API server's clock once the lists that prove no use
	// (pods and workloads) were read; marks are written on this clock, so
	// that a pod that went while the pods were listed can never end its use
	// after the mark.
	ServerTime time.Time
	// ServerVersion is the API server's version (GET /version), e.g.
	// "v1.35.4"; "" when it could not be read.
	ServerVersion string
}
