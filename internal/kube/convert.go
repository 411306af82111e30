package kube

import (
	"bytes"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// The reduction of API objects to the inventory's values: pure, and shared
// by the scan, the re-check and the rescue's wait.

// Claim reduces a PersistentVolumeClaim to the inventory's form; of its
// labels only the three classification reads, of its annotations only the
// janitor's own keys.
func Claim(p *corev1.PersistentVolumeClaim, workspaceLabel string) inventory.Claim {
	c := inventory.Claim{
		Namespace:         p.Namespace,
		Name:              p.Name,
		UID:               p.UID,
		ResourceVersion:   p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp.Time,
		Labels:            inventory.PickLabels(p.Labels, workspaceLabel),
		Phase:             string(p.Status.Phase),
		VolumeName:        p.Spec.VolumeName,
	}
	var ref, ds corev1.TypedLocalObjectReference
	refNS := ""
	if r := p.Spec.DataSourceRef; r != nil {
		ref.Kind, ref.Name = r.Kind, r.Name
		if r.Namespace != nil {
			refNS = *r.Namespace
		}
	}
	if r := p.Spec.DataSource; r != nil {
		ds = *r
	}
	c.DataSource = SnapshotSource(p.Namespace, ref.Kind, ref.Name, refNS, ds.Kind, ds.Name)
	if p.DeletionTimestamp != nil {
		t := p.DeletionTimestamp.Time
		c.DeletionTimestamp = &t
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, inventory.Prefix) {
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[k] = v
		}
	}
	for _, cond := range p.Status.Conditions {
		if string(cond.Type) == inventory.ConditionUnused {
			c.Unused = &inventory.Condition{Status: string(cond.Status), LastTransitionTime: cond.LastTransitionTime.Time}
		}
	}
	for _, o := range p.OwnerReferences {
		c.Owners = append(c.Owners, inventory.OwnerRef{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID})
	}
	if q, ok := p.Status.Capacity[corev1.ResourceStorage]; ok {
		c.Capacity = q.Value()
	}
	if p.Spec.StorageClassName != nil {
		c.StorageClass = *p.Spec.StorageClassName
	}
	if p.Spec.VolumeAttributesClassName != nil {
		c.VolumeAttributesClass = *p.Spec.VolumeAttributesClassName
	}
	return c
}

func attachment(va *storagev1.VolumeAttachment) inventory.Attachment {
	return inventory.Attachment{Name: va.Name, PVName: *va.Spec.Source.PersistentVolumeName,
		NodeName: va.Spec.NodeName, Attached: va.Status.Attached, Created: va.CreationTimestamp.Time}
}

// Snapshot reduces a VolumeSnapshot to the inventory's form.
func Snapshot(vs *snapv1.VolumeSnapshot, workspaceLabel string) inventory.Snapshot {
	s := inventory.Snapshot{
		Namespace:         vs.Namespace,
		Name:              vs.Name,
		UID:               vs.UID,
		CreationTimestamp: vs.CreationTimestamp.Time,
		SourceUID:         types.UID(vs.Annotations[inventory.AnnotationSourceUID]),
		ManagedByJanitor:  vs.Labels[inventory.LabelManagedBy] == inventory.ManagedByValue,
		Superseded:        vs.Labels[inventory.LabelSuperseded] == "true",
		Stale:             vs.Labels[inventory.LabelStale] == "true",
		PruneIntent:       vs.Annotations[inventory.AnnotationPruneIntent],
		Restoring:         vs.Annotations[inventory.AnnotationRestoring],
	}
	if workspaceLabel != "" {
		s.Workspace = vs.Labels[workspaceLabel]
	}
	if vs.DeletionTimestamp != nil {
		t := vs.DeletionTimestamp.Time
		s.DeletionTimestamp = &t
	}
	if vs.Spec.Source.PersistentVolumeClaimName != nil {
		s.SourceClaim = *vs.Spec.Source.PersistentVolumeClaimName
	}
	if vs.Spec.VolumeSnapshotClassName != nil {
		s.ClassName = *vs.Spec.VolumeSnapshotClassName
	}
	if v, ok := vs.Annotations[inventory.AnnotationOrphanedSince]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			s.OrphanedSince = &t
		}
	}
	if v, ok := vs.Annotations[inventory.AnnotationRestoredDataTime]; ok && s.ManagedByJanitor {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			s.RestoredDataTime = &t
		}
	}
	if vs.Status != nil {
		snapshotStatus(&s, vs.Status)
	}
	return s
}

// snapshotStatus copies what the snapshot controller reports into s.
func snapshotStatus(s *inventory.Snapshot, st *snapv1.VolumeSnapshotStatus) {
	if st.RestoreSize != nil {
		s.RestoreSize = st.RestoreSize.Value()
	}
	if st.CreationTime != nil {
		t := st.CreationTime.Time
		s.CutTime = &t
	}
	s.ReadyToUse = st.ReadyToUse != nil && *st.ReadyToUse
	if st.BoundVolumeSnapshotContentName != nil {
		s.ContentName = *st.BoundVolumeSnapshotContentName
	}
	if st.Error != nil {
		e := &inventory.SnapshotError{}
		if st.Error.Message != nil {
			e.Message = *st.Error.Message
		}
		if st.Error.Time != nil {
			e.Time = st.Error.Time.Time
		}
		s.Error = e
	}
}

// Content reduces a VolumeSnapshotContent to the inventory's form.
func Content(vc *snapv1.VolumeSnapshotContent) inventory.Content {
	c := inventory.Content{Name: vc.Name, DeletionPolicy: string(vc.Spec.DeletionPolicy),
		Snapshot:    inventory.Key{Namespace: vc.Spec.VolumeSnapshotRef.Namespace, Name: vc.Spec.VolumeSnapshotRef.Name},
		SnapshotUID: vc.Spec.VolumeSnapshotRef.UID}
	if vc.Status != nil && vc.Status.SnapshotHandle != nil && *vc.Status.SnapshotHandle != "" {
		c.HasHandle = true
	}
	if h := vc.Spec.Source.SnapshotHandle; h != nil && *h != "" {
		c.HasHandle = true
	}
	if h := vc.Spec.Source.VolumeHandle; h != nil {
		c.SourceVolume = *h
	}
	if vc.DeletionTimestamp != nil {
		t := vc.DeletionTimestamp.Time
		c.DeletionTimestamp = &t
	}
	return c
}

// The reduction of a claim read by wire.WalkClaim: what Claim does on the
// decoded claim, on the entries of its maps in the order of its bytes (a
// key that comes twice is the last one's, as in the decoder's map).

// lookup returns the value of the last entry of kvs with key k.
func lookup(kvs []wire.KV, k string) (string, bool) {
	for i := len(kvs) - 1; i >= 0; i-- {
		if string(kvs[i].Key) == k {
			return string(kvs[i].Value), true
		}
	}
	return "", false
}

// wireLabels is inventory.PickLabels on a claim's label entries.
func wireLabels(kvs []wire.KV, workspaceLabel string) inventory.ClaimLabels {
	var c inventory.ClaimLabels
	if workspaceLabel != "" {
		c.Workspace, _ = lookup(kvs, workspaceLabel)
	}
	c.Phase, c.HasPhase = lookup(kvs, inventory.LabelPhase)
	c.Hold, c.HasHold = lookup(kvs, inventory.KeyHold)
	return c
}

// wireKeepLabels is inventory.KeepLabels on a claim's label entries.
func wireKeepLabels(kvs []wire.KV, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := lookup(kvs, k); ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// wireAnnotations keeps the janitor's own annotations.
func wireAnnotations(kvs []wire.KV) map[string]string {
	var out map[string]string
	for _, kv := range kvs {
		if bytes.HasPrefix(kv.Key, []byte(inventory.Prefix)) {
			if out == nil {
				out = map[string]string{}
			}
			out[string(kv.Key)] = string(kv.Value)
		}
	}
	return out
}

// wireUnused returns the last Unused condition, nil when there is none.
func wireUnused(conds []wire.Condition) *inventory.Condition {
	for i := len(conds) - 1; i >= 0; i-- {
		if string(conds[i].Type) == inventory.ConditionUnused {
			return &inventory.Condition{Status: string(conds[i].Status), LastTransitionTime: conds[i].LastTransition}
		}
	}
	return nil
}

// SnapshotSource is the VolumeSnapshot of namespace ns a claim was created
// from: its spec.dataSourceRef when that names one (in the claim's own
// namespace), else its spec.dataSource; "" when it names none
// (docs/spec.md#rule-descent).
func SnapshotSource(ns, refKind, refName, refNS, dsKind, dsName string) string {
	if refKind == "VolumeSnapshot" && (refNS == "" || refNS == ns) {
		return refName
	}
	if refKind == "" && dsKind == "VolumeSnapshot" {
		return dsName
	}
	return ""
}
