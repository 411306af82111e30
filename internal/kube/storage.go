package kube

import (
	"context"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// The first phase of the read: the claims and the storage objects behind
// them, each list reduced into the inventory as it streams in.

func (r *reader) claims(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Claim
	acc := slice(&out)
	core := r.c.Kube.CoreV1().RESTClient()
	// The fields the inventory keeps, read from the bytes (wire.WalkClaim):
	// decoding whole claims, managedFields and all, was the largest
	// allocation left in a scan.
	var w wire.Claim
	item := func(b []byte) error {
		if err := wire.WalkClaim(b, &w); err != nil {
			return fmt.Errorf("decode a claim: %w", err)
		}
		if r.s.Exclude[string(w.Namespace)] {
			return nil
		}
		c, err := r.wireClaim(&w)
		if err != nil {
			return fmt.Errorf("decode claim %s/%s: %w", w.Namespace, w.Name, err)
		}
		out = append(out, c)
		return nil
	}
	for _, ns := range r.namespaces() {
		err := r.list(ctx, "persistentvolumeclaims", ns, acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			return r.protoList(ctx, coreList{core, "persistentvolumeclaims", "PersistentVolumeClaimList"}, ns, opts, item)
		}, metav1.ListOptions{LabelSelector: r.s.Selector.String()})
		if err != nil {
			return err
		}
	}
	inv.Claims = out
	return nil
}

// wireClaim is Claim for a claim read by wire.WalkClaim, with the labels
// notifications read, and the strings many claims share interned. It must
// give what Claim gives on the decoded claim (TestWalkClaimAgreesWithTheDecoder).
func (r *reader) wireClaim(w *wire.Claim) (inventory.Claim, error) {
	c := inventory.Claim{
		Namespace:         r.inBytes(w.Namespace),
		Name:              string(w.Name),
		UID:               types.UID(w.UID),
		ResourceVersion:   string(w.ResourceVersion),
		CreationTimestamp: w.Created,
		Labels:            wireLabels(w.Labels, r.s.WorkspaceLabel),
		Annotations:       wireAnnotations(w.Annotations),
		Phase:             r.inBytes(w.Phase),
		VolumeName:        string(w.VolumeName),
		DataSource: SnapshotSource(string(w.Namespace), string(w.DataSourceRef.Kind), string(w.DataSourceRef.Name), string(w.DataSourceRef.Namespace),
			string(w.DataSource.Kind), string(w.DataSource.Name)),
		Unused:                wireUnused(w.Conditions),
		StorageClass:          r.inBytes(w.StorageClass),
		VolumeAttributesClass: r.inBytes(w.AttrClass),
	}
	if len(r.s.NotifyLabels) > 0 {
		c.Labels.Notify = wireKeepLabels(w.Labels, r.s.NotifyLabels)
	}
	if w.Deleting {
		t := w.Deletion
		c.DeletionTimestamp = &t
	}
	for _, o := range w.Owners {
		c.Owners = append(c.Owners, inventory.OwnerRef{APIVersion: r.inBytes(o.APIVersion), Kind: r.inBytes(o.Kind),
			Name: string(o.Name), UID: types.UID(o.UID)})
	}
	// Every quantity is parsed, as the decoder parses them: one it
	// refuses fails the list, it is never a capacity of 0.
	for _, e := range w.Capacity {
		var q resource.Quantity
		if err := q.Unmarshal(e.Value); err != nil {
			return inventory.Claim{}, fmt.Errorf("status.capacity[%s]: %w", e.Key, err)
		}
		if string(e.Key) == string(corev1.ResourceStorage) {
			c.Capacity = q.Value()
		}
	}
	return c, nil
}

func (r *reader) pvs(ctx context.Context, inv *inventory.Inventory) error {
	pvs := map[string]inventory.PV{}
	var names []string
	acc := keyed(pvs, &names)
	// The few fields the scan needs, read from the bytes (wire.WalkPV):
	// decoding whole volumes, managedFields and all, was a tenth of a
	// scan's garbage.
	var w wire.PV
	item := func(b []byte) error {
		if err := wire.WalkPV(b, &w); err != nil {
			return err
		}
		v := inventory.PV{Name: string(w.Name), ReclaimPolicy: r.inBytes(w.ReclaimPolicy)}
		if w.CSI {
			v.CSIDriver, v.VolumeHandle = r.inBytes(w.Driver), string(w.Handle)
		}
		pvs[v.Name] = v
		names = append(names, v.Name)
		return nil
	}
	err := r.list(ctx, "persistentvolumes", "", acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, coreList{r.c.Kube.CoreV1().RESTClient(), "persistentvolumes", "PersistentVolumeList"}, "", opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inv.PVs = pvs
	return nil
}

func (r *reader) attachments(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Attachment
	acc := slice(&out)
	item := decoded(func(va *storagev1.VolumeAttachment) {
		if va.Spec.Source.PersistentVolumeName != nil {
			out = append(out, attachment(va))
		}
	})
	err := r.list(ctx, "volumeattachments", "", acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, coreList{r.c.Kube.StorageV1().RESTClient(), "volumeattachments", "VolumeAttachmentList"}, "", opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inv.Attachments = map[string][]inventory.Attachment{}
	for _, a := range out {
		inv.Attachments[a.PVName] = append(inv.Attachments[a.PVName], a)
	}
	return nil
}

func (r *reader) snapshots(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Snapshot
	acc := slice(&out)
	item := decodedJSON(func(vs *snapv1.VolumeSnapshot) {
		if !r.s.Exclude[vs.Namespace] {
			s := Snapshot(vs, r.s.WorkspaceLabel)
			s.Namespace = r.in(s.Namespace)
			out = append(out, s)
		}
	})
	for _, ns := range r.namespaces() {
		err := r.list(ctx, "volumesnapshots", ns, acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			return r.jsonList(ctx, "volumesnapshots", ns, "VolumeSnapshotList", opts, item)
		}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	inv.Snapshots = map[string][]inventory.Snapshot{}
	for _, s := range out {
		inv.Snapshots[s.Namespace] = append(inv.Snapshots[s.Namespace], s)
	}
	return nil
}

func (r *reader) contents(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Content
	acc := slice(&out)
	item := decodedJSON(func(vc *snapv1.VolumeSnapshotContent) {
		out = append(out, Content(vc))
	})
	err := r.list(ctx, "volumesnapshotcontents", "", acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.jsonList(ctx, "volumesnapshotcontents", "", "VolumeSnapshotContentList", opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inv.Contents = make(map[string]inventory.Content, len(out))
	for _, c := range out {
		inv.Contents[c.Name] = c
	}
	return nil
}
