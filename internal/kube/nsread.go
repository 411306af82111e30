package kube

import (
	"context"
	"fmt"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// The lists of one namespace that the checks right before a create or a
// delete make (the rescue's re-check, the reap's batches): read as the
// scan reads (list.go), one streamed response per list unless pageSize
// (--page-size) asks for pages, the pods walked on their bytes
// (wire.WalkPod) rather than decoded whole. At 10,000 pods a list of 500
// a page was 20 requests under --qps and 10,000 pods decoded whole, once
// per batch of deletes and per re-check (docs/benchmarks.md, issue 43).

// nsReader is a reader of the lists of one namespace.
func nsReader(c *Clients, ns string, pageSize int64) *reader {
	return &reader{c: c, s: Scope{Namespaces: []string{ns}, PageSize: pageSize}.withDefaults(), intern: map[string]string{}}
}

// PodClaims lists the pods of ns and returns, by claim name, the pods that
// reference it, whatever their phase: by a persistentVolumeClaim volume or
// a generic ephemeral volume (whose claim is <pod>-<volume>). A list that
// fails returns an error and nothing: a claim never looks unused because a
// list broke off.
func PodClaims(ctx context.Context, c *Clients, ns string, pageSize int64) (map[string][]inventory.Referrer, error) {
	r := nsReader(c, ns, pageSize)
	var buf []podRef
	var p wire.Pod
	item := func(b []byte) error {
		if err := wire.WalkPod(b, &p); err != nil {
			return fmt.Errorf("decode a pod: %w", err)
		}
		for _, v := range p.Volumes {
			claim, detail := volumeClaim(&p, v)
			buf = append(buf, podRef{ns: ns, claim: claim, pod: string(p.Name), detail: detail})
		}
		return nil
	}
	core := c.Kube.CoreV1().RESTClient()
	err := r.list(ctx, "pods", ns, slice(&buf), func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, coreList{core, "pods", "PodList"}, ns, opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	refs := map[string][]inventory.Referrer{}
	for _, b := range buf {
		refs[b.claim] = append(refs[b.claim], inventory.Referrer{Kind: "Pod", Namespace: ns, Name: b.pod, Detail: b.detail})
	}
	return refs, nil
}

// NamespaceSnapshots lists the VolumeSnapshots of ns, reduced as the scan
// reduces them (workspaceLabel names a snapshot's workspace).
func NamespaceSnapshots(ctx context.Context, c *Clients, ns string, pageSize int64, workspaceLabel string) ([]inventory.Snapshot, error) {
	r := nsReader(c, ns, pageSize)
	var out []inventory.Snapshot
	item := decodedJSON(func(vs *snapv1.VolumeSnapshot) { out = append(out, Snapshot(vs, workspaceLabel)) })
	err := r.list(ctx, "volumesnapshots", ns, slice(&out), func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.jsonList(ctx, "volumesnapshots", ns, "VolumeSnapshotList", opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// namespaceClaims lists the claims of ns that sel selects, whole (without
// managedFields): the re-check keeps them as the rescues' claim templates.
func namespaceClaims(ctx context.Context, c *Clients, ns string, pageSize int64, sel labels.Selector) ([]*corev1.PersistentVolumeClaim, error) {
	r := nsReader(c, ns, pageSize)
	var out []*corev1.PersistentVolumeClaim
	item := func(b []byte) error {
		p := &corev1.PersistentVolumeClaim{}
		if err := p.Unmarshal(b); err != nil {
			return fmt.Errorf("decode a claim: %w", err)
		}
		p.ManagedFields = nil
		out = append(out, p)
		return nil
	}
	core := c.Kube.CoreV1().RESTClient()
	err := r.list(ctx, "persistentvolumeclaims", ns, slice(&out), func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, coreList{core, "persistentvolumeclaims", "PersistentVolumeClaimList"}, ns, opts, item)
	}, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return out, nil
}
