package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned/scheme"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// Scope says what a run reads.
type Scope struct {
	// Namespaces to read; nil means all namespaces.
	Namespaces []string
	// Exclude lists namespaces never looked at.
	Exclude map[string]bool
	// Selector selects workspace claims (server-side).
	Selector labels.Selector
	// WorkspaceLabel is copied from snapshots' labels into the inventory.
	WorkspaceLabel string
	// PageSize is the limit of each list call; 0 reads each list as one
	// streamed response, decoded an item at a time.
	PageSize int64
	// Retry wraps each list call.
	Retry RetryPolicy
}

// ReadError names the read that failed. A failed read fails the whole run
// closed: a claim never looks orphaned because something could not be read.
type ReadError struct {
	What string
	Err  error
}

func (e *ReadError) Error() string { return "read " + e.What + ": " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Read lists everything classification needs and reduces it item by item.
// Claims, PVs, attachments, snapshots and contents are listed concurrently;
// then pods and workloads, concurrently, keeping only references to the
// claims in scope (so memory follows the number of claims, not of pods).
func Read(ctx context.Context, c *Clients, s Scope) (*inventory.Inventory, error) {
	if s.PageSize < 0 {
		s.PageSize = 0
	}
	if s.Retry.MaxElapsed == 0 {
		s.Retry = DefaultRetry
	}
	if s.Selector == nil {
		s.Selector = labels.Everything()
	}
	inv := &inventory.Inventory{
		Referrers:   map[inventory.Key][]inventory.Referrer{},
		LiveOwners:  map[types.UID]string{},
		PVs:         map[string]inventory.PV{},
		Attachments: map[string][]inventory.Attachment{},
		Snapshots:   map[string][]inventory.Snapshot{},
		Contents:    map[string]inventory.Content{},
	}
	r := &reader{c: c, s: s, intern: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := r.parallel(ctx, cancel,
		func(ctx context.Context) error { return r.claims(ctx, inv) },
		func(ctx context.Context) error { return r.pvs(ctx, inv) },
		func(ctx context.Context) error { return r.attachments(ctx, inv) },
		func(ctx context.Context) error { return r.snapshots(ctx, inv) },
		func(ctx context.Context) error { return r.contents(ctx, inv) },
	); err != nil {
		return nil, err
	}

	r.inScope = make(map[inventory.Key]bool, len(inv.Claims))
	r.wantOwners = map[types.UID]inventory.OwnerRef{}
	for i := range inv.Claims {
		cl := &inv.Claims[i]
		r.inScope[cl.Key()] = true
		for _, o := range cl.Owners {
			r.wantOwners[o.UID] = o
		}
	}
	r.refs = map[inventory.Key][]inventory.Referrer{}
	r.found = map[types.UID]string{}
	if err := r.parallel(ctx, cancel,
		func(ctx context.Context) error { return r.pods(ctx) },
		func(ctx context.Context) error { return r.workloads(ctx, inv) },
	); err != nil {
		return nil, err
	}
	// After the lists that prove no use: a mark written on this clock is
	// never earlier than the end of a use those lists could have missed.
	inv.ServerTime = c.Clock.Latest()
	for k, refs := range r.refs {
		r.refs[k] = dedup(refs)
	}
	inv.Referrers = r.refs
	if err := r.owners(ctx, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

type reader struct {
	c *Clients
	s Scope

	mu         sync.Mutex
	intern     map[string]string
	inScope    map[inventory.Key]bool
	wantOwners map[types.UID]inventory.OwnerRef
	refs       map[inventory.Key][]inventory.Referrer
	found      map[types.UID]string // owner UID -> Kind/name, for owners seen in lists
	stsTmpl    []inventory.StatefulSetTemplate
}

// parallel runs fns concurrently and returns the first error, cancelling
// the others.
func (r *reader) parallel(ctx context.Context, cancel context.CancelFunc, fns ...func(context.Context) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(fns))
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errs[i] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report the root cause, not the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// in interns namespace strings: a hundred thousand claims share a few
// hundred namespaces.
func (r *reader) in(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.intern[s]; ok {
		return v
	}
	s = strings.Clone(s)
	r.intern[s] = s
	return s
}

// namespaces returns the namespaces to list one by one, or [""] for all.
func (r *reader) namespaces() []string {
	if r.s.Namespaces == nil {
		return []string{""}
	}
	var out []string
	for _, ns := range r.s.Namespaces {
		if !r.s.Exclude[ns] {
			out = append(out, ns)
		}
	}
	return out
}

// pageFn reads one response of a list (the whole list, or one page of it)
// and returns its continue token.
type pageFn func(ctx context.Context, opts metav1.ListOptions) (string, error)

// list reads one kind in one namespace ("" = all) into an accumulator that
// holds n() items; keep(k) drops all but its first k. Unpaginated (PageSize
// 0, the default) it is one streamed response; with --page-size, pages, and
// a 410 Gone on a continuation (the list's snapshot expired) restarts it
// from the first page. A failed attempt drops what it had added before it
// is retried: a half list is never used.
func (r *reader) list(ctx context.Context, what, ns string, n func() int, keep func(int), page pageFn, opts metav1.ListOptions) error {
	opts.Limit = r.s.PageSize
	where := "in all namespaces"
	if ns != "" {
		where = fmt.Sprintf("in namespace %q", ns)
	}
	start := n()
	restarts := 0
	for {
		var cont string
		mark := n()
		err := r.s.Retry.DoStream(ctx, "list "+what, func(ctx context.Context) error {
			keep(mark)
			var err error
			cont, err = page(ctx, opts)
			return err
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) && opts.Continue != "" && restarts < 5 {
				restarts++
				keep(start)
				opts.Continue = ""
				continue
			}
			return &ReadError{What: what + " " + where, Err: hint(what, err)}
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}

// protoList streams one response of a core list as protobuf and calls item
// with each item's bytes (valid during the call only).
func (r *reader) protoList(ctx context.Context, c rest.Interface, resource, ns, kind string, opts metav1.ListOptions, item func([]byte) error) (string, error) {
	req := c.Get().Namespace(ns).Resource(resource).VersionedParams(&opts, scheme.ParameterCodec)
	return wire.Stream(ctx, req, "application/vnd.kubernetes.protobuf", r.s.Retry.AttemptTimeout(), func(body io.Reader) (string, error) {
		return wire.ReadProtoList(body, kind, item)
	})
}

// jsonList streams one response of a snapshot list (CRDs speak JSON only)
// and calls item with the decoder on each item.
func (r *reader) jsonList(ctx context.Context, resource, ns, kind string, opts metav1.ListOptions, item func(*json.Decoder) error) (string, error) {
	req := r.c.Snap.SnapshotV1().RESTClient().Get().Namespace(ns).Resource(resource).VersionedParams(&opts, snapscheme.ParameterCodec)
	return wire.Stream(ctx, req, "application/json", r.s.Retry.AttemptTimeout(), func(body io.Reader) (string, error) {
		return wire.ReadJSONList(body, kind, item)
	})
}

// slice returns n and keep for an accumulator slice.
func slice[T any](s *[]T) (func() int, func(int)) {
	return func() int { return len(*s) }, func(k int) { clear((*s)[k:]); *s = (*s)[:k] }
}

func hint(what string, err error) error {
	if apierrors.IsNotFound(err) && strings.HasPrefix(what, "volumesnapshot") {
		return fmt.Errorf("%w (is the snapshot.storage.k8s.io/v1 API installed? the VolumeSnapshot CRDs are missing)", err)
	}
	return err
}

func (r *reader) claims(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Claim
	n, keep := slice(&out)
	core := r.c.Kube.CoreV1().RESTClient()
	for _, ns := range r.namespaces() {
		item := decoded(func(pvc *corev1.PersistentVolumeClaim) {
			if !r.s.Exclude[pvc.Namespace] {
				out = append(out, r.claim(pvc))
			}
		})
		err := r.list(ctx, "persistentvolumeclaims", ns, n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			return r.protoList(ctx, core, "persistentvolumeclaims", ns, "PersistentVolumeClaimList", opts, item)
		}, metav1.ListOptions{LabelSelector: r.s.Selector.String()})
		if err != nil {
			return err
		}
	}
	inv.Claims = out
	return nil
}

func (r *reader) claim(p *corev1.PersistentVolumeClaim) inventory.Claim {
	c := Claim(p, r.s.WorkspaceLabel)
	c.Namespace = r.in(c.Namespace)
	return c
}

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
	return c
}

func (r *reader) pvs(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.PV
	n, keep := slice(&out)
	item := decoded(func(pv *corev1.PersistentVolume) {
		v := inventory.PV{Name: pv.Name}
		if pv.Spec.CSI != nil {
			v.CSIDriver, v.VolumeHandle = r.in(pv.Spec.CSI.Driver), pv.Spec.CSI.VolumeHandle
		}
		out = append(out, v)
	})
	err := r.list(ctx, "persistentvolumes", "", n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, r.c.Kube.CoreV1().RESTClient(), "persistentvolumes", "", "PersistentVolumeList", opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	inv.PVs = make(map[string]inventory.PV, len(out))
	for _, v := range out {
		inv.PVs[v.Name] = v
	}
	return nil
}

func (r *reader) attachments(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Attachment
	n, keep := slice(&out)
	item := decoded(func(va *storagev1.VolumeAttachment) {
		if va.Spec.Source.PersistentVolumeName != nil {
			out = append(out, attachment(va))
		}
	})
	err := r.list(ctx, "volumeattachments", "", n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, r.c.Kube.StorageV1().RESTClient(), "volumeattachments", "", "VolumeAttachmentList", opts, item)
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

func attachment(va *storagev1.VolumeAttachment) inventory.Attachment {
	return inventory.Attachment{Name: va.Name, PVName: *va.Spec.Source.PersistentVolumeName,
		NodeName: va.Spec.NodeName, Attached: va.Status.Attached, Created: va.CreationTimestamp.Time}
}

func (r *reader) snapshots(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Snapshot
	n, keep := slice(&out)
	item := decodedJSON(func(vs *snapv1.VolumeSnapshot) {
		if !r.s.Exclude[vs.Namespace] {
			s := Snapshot(vs, r.s.WorkspaceLabel)
			s.Namespace = r.in(s.Namespace)
			out = append(out, s)
		}
	})
	for _, ns := range r.namespaces() {
		err := r.list(ctx, "volumesnapshots", ns, n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
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
	if st := vs.Status; st != nil {
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
	return s
}

func (r *reader) contents(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Content
	n, keep := slice(&out)
	item := decodedJSON(func(vc *snapv1.VolumeSnapshotContent) {
		out = append(out, Content(vc))
	})
	err := r.list(ctx, "volumesnapshotcontents", "", n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
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
	if vc.DeletionTimestamp != nil {
		t := vc.DeletionTimestamp.Time
		c.DeletionTimestamp = &t
	}
	return c
}

// addRef records that a referrer names claim ns/name, if that claim is in
// scope. Called from concurrent listers.
func (r *reader) addRef(ns, claim string, ref inventory.Referrer) {
	k := inventory.Key{Namespace: ns, Name: claim}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.inScope[k] {
		return
	}
	k.Namespace = r.intern[ns] // interned by the claims list
	ref.Namespace = k.Namespace
	r.refs[k] = append(r.refs[k], ref)
}

func (r *reader) sawOwner(uid types.UID, kind, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.wantOwners[uid]; ok {
		r.found[uid] = kind + "/" + name
	}
}

// pods reduces every pod to the claims it references. A pod counts whatever
// its phase: scheduled or not, terminating or not, even Succeeded. Pods are
// not decoded: wire.WalkPod reads the few fields needed from their bytes.
func (r *reader) pods(ctx context.Context) error {
	// Owners are looked for among pods only when a claim has one (claims of
	// generic ephemeral volumes are owned by their pod).
	owners := len(r.wantOwners) > 0
	core := r.c.Kube.CoreV1().RESTClient()
	for _, ns := range r.namespaces() {
		// References are buffered until the whole list is read, so that a
		// failed attempt or a restarted list drops what it had seen.
		var buf []podRef
		n, keep := slice(&buf)
		var p wire.Pod
		err := r.list(ctx, "pods", ns, n, keep, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			return r.protoList(ctx, core, "pods", ns, "PodList", opts, func(b []byte) error {
				if err := wire.WalkPod(b, &p); err != nil {
					return fmt.Errorf("decode a pod: %w", err)
				}
				if r.s.Exclude[string(p.Namespace)] {
					return nil
				}
				if owners {
					r.sawOwner(types.UID(p.UID), "Pod", string(p.Name))
				}
				for _, v := range p.Volumes {
					var claim, detail string
					if v.Ephemeral {
						claim, detail = string(p.Name)+"-"+string(v.Name), "ephemeral volume "+string(v.Name)
					} else {
						claim, detail = string(v.Claim), "volume "+string(v.Name)
					}
					// inScope is read-only once the claims are listed.
					k := inventory.Key{Namespace: string(p.Namespace), Name: claim}
					if r.inScope[k] {
						buf = append(buf, podRef{ns: k.Namespace, claim: claim, pod: string(p.Name), detail: detail,
							created: p.Created, terminal: string(p.Phase) == "Succeeded" || string(p.Phase) == "Failed"})
					}
				}
				return nil
			})
		}, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, b := range buf {
			ref := inventory.Referrer{Kind: "Pod", Name: b.pod, Detail: b.detail, Terminal: b.terminal}
			if b.created != 0 {
				ref.Created = time.Unix(b.created, 0).UTC()
			}
			r.addRef(b.ns, b.claim, ref)
		}
	}
	return nil
}

type podRef struct {
	ns, claim, pod, detail string
	created                int64
	terminal               bool
}

// templateRefs adds the claims a pod template names.
func (r *reader) templateRefs(kind, ns, name string, spec *corev1.PodSpec) {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			r.addRef(ns, v.PersistentVolumeClaim.ClaimName, inventory.Referrer{Kind: kind, Name: name, Detail: "pod template volume " + v.Name})
		}
	}
}

// workloads lists the six kinds with pod templates, one after the other (the
// pods list, running beside them, dominates). Their references go straight
// to the shared set: a list retried or restarted re-adds them, and dedup
// removes the repeats; what a failed attempt had seen of an object that is
// gone since can only keep a claim InUse (the safe side) for one run.
func (r *reader) workloads(ctx context.Context, inv *inventory.Inventory) error {
	apps, batch := r.c.Kube.AppsV1().RESTClient(), r.c.Kube.BatchV1().RESTClient()
	type kind struct {
		resource, list string
		client         rest.Interface
		item           func([]byte) error
	}
	kinds := []kind{
		{"deployments", "DeploymentList", apps, decoded(func(d *appsv1.Deployment) {
			r.workload("Deployment", &d.ObjectMeta, &d.Spec.Template.Spec)
		})},
		{"replicasets", "ReplicaSetList", apps, decoded(func(d *appsv1.ReplicaSet) {
			r.workload("ReplicaSet", &d.ObjectMeta, &d.Spec.Template.Spec)
		})},
		{"daemonsets", "DaemonSetList", apps, decoded(func(d *appsv1.DaemonSet) {
			r.workload("DaemonSet", &d.ObjectMeta, &d.Spec.Template.Spec)
		})},
		{"statefulsets", "StatefulSetList", apps, decoded(func(d *appsv1.StatefulSet) {
			r.workload("StatefulSet", &d.ObjectMeta, &d.Spec.Template.Spec)
			r.statefulSet(d)
		})},
		{"jobs", "JobList", batch, decoded(func(d *batchv1.Job) {
			r.workload("Job", &d.ObjectMeta, &d.Spec.Template.Spec)
		})},
		{"cronjobs", "CronJobList", batch, decoded(func(d *batchv1.CronJob) {
			r.workload("CronJob", &d.ObjectMeta, &d.Spec.JobTemplate.Spec.Template.Spec)
		})},
	}
	none, ignore := func() int { return 0 }, func(int) {}
	for _, k := range kinds {
		for _, ns := range r.namespaces() {
			if err := r.list(ctx, k.resource, ns, none, ignore, func(ctx context.Context, o metav1.ListOptions) (string, error) {
				return r.protoList(ctx, k.client, k.resource, ns, k.list, o, k.item)
			}, metav1.ListOptions{}); err != nil {
				return err
			}
		}
	}
	// A retried list re-adds its StatefulSets' templates.
	seen := make(map[inventory.StatefulSetTemplate]bool, len(r.stsTmpl))
	for _, t := range r.stsTmpl {
		if !seen[t] {
			seen[t] = true
			inv.StatefulSetTemplates = append(inv.StatefulSetTemplates, t)
		}
	}
	return nil
}

// protoMessage is a typed API object with its generated protobuf decoder.
type protoMessage[T any] interface {
	*T
	Reset()
	Unmarshal([]byte) error
}

// decoded returns an item function that decodes each item into one reused
// object of type T and hands it to fn (valid during the call only).
func decoded[T any, P protoMessage[T]](fn func(P)) func([]byte) error {
	var obj T
	return func(b []byte) error {
		p := P(&obj)
		p.Reset()
		if err := p.Unmarshal(b); err != nil {
			return err
		}
		fn(p)
		return nil
	}
}

// decodedJSON is decoded for the JSON of the snapshot CRDs: each item is
// decoded into a fresh T (JSON leaves the fields an item lacks untouched, so
// an object is never reused).
func decodedJSON[T any](fn func(*T)) func(*json.Decoder) error {
	return func(dec *json.Decoder) error {
		var obj T
		if err := dec.Decode(&obj); err != nil {
			return err
		}
		fn(&obj)
		return nil
	}
}

// workload records a workload as a possible owner and the claims its pod
// template names.
func (r *reader) workload(kind string, m *metav1.ObjectMeta, spec *corev1.PodSpec) {
	r.sawOwner(m.UID, kind, m.Name)
	r.templateRefs(kind, m.Namespace, m.Name, spec)
}

func (r *reader) statefulSet(s *appsv1.StatefulSet) {
	if r.s.Exclude[s.Namespace] {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range s.Spec.VolumeClaimTemplates {
		r.stsTmpl = append(r.stsTmpl, inventory.StatefulSetTemplate{Namespace: s.Namespace, StatefulSet: s.Name, Template: t.Name})
	}
}

// listedKinds are the owner kinds whose every object in scope was listed:
// an owner of one of these kinds that was not seen is gone.
var listedKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Pod"}:             true,
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "batch", Kind: "Job"}:        true,
	{Group: "batch", Kind: "CronJob"}:    true,
}

// owners decides which claim owners still exist. Owners of listed kinds are
// looked up in what was listed; others are fetched one by one (by metadata)
// and an owner that cannot be read fails the run closed.
func (r *reader) owners(ctx context.Context, inv *inventory.Inventory) error {
	var mapper *lazyMapper
	for uid, o := range r.wantOwners {
		if what, ok := r.found[uid]; ok {
			inv.LiveOwners[uid] = what
			continue
		}
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			return &ReadError{What: "owner " + o.Kind + "/" + o.Name, Err: err}
		}
		if listedKinds[schema.GroupKind{Group: gv.Group, Kind: o.Kind}] {
			continue // listed and not seen: gone
		}
		if mapper == nil {
			mapper = newLazyMapper(r.c)
		}
		alive, err := r.ownerAlive(ctx, mapper, inv, gv, o)
		if err != nil {
			return err
		}
		if alive {
			inv.LiveOwners[uid] = o.Kind + "/" + o.Name
		}
	}
	return nil
}

func (r *reader) ownerAlive(ctx context.Context, m *lazyMapper, inv *inventory.Inventory, gv schema.GroupVersion, o inventory.OwnerRef) (bool, error) {
	gvr, namespaced, err := m.resource(gv.WithKind(o.Kind))
	what := fmt.Sprintf("owner %s %s", o.Kind, o.Name)
	if err != nil {
		return false, &ReadError{What: what, Err: err}
	}
	// The owner lives in its claim's namespace (or is cluster-scoped); try
	// each namespace whose claims name it.
	seen := map[string]bool{}
	for i := range inv.Claims {
		cl := &inv.Claims[i]
		for _, co := range cl.Owners {
			if co.UID != o.UID || seen[cl.Namespace] {
				continue
			}
			seen[cl.Namespace] = true
			ns := cl.Namespace
			if !namespaced {
				ns = ""
			}
			var got *metav1.PartialObjectMetadata
			err := r.s.Retry.Do(ctx, "get "+what, func(ctx context.Context) error {
				var err error
				got, err = r.c.Meta.Resource(gvr).Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
				return err
			})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return false, &ReadError{What: what, Err: err}
			case got.UID == o.UID:
				return true, nil
			}
		}
	}
	return false, nil
}

// dedup drops repeated referrers (a list restarted after 410 Gone re-adds
// what its first pass saw).
func dedup(refs []inventory.Referrer) []inventory.Referrer {
	if len(refs) < 2 {
		return refs
	}
	seen := make(map[inventory.Referrer]bool, len(refs))
	out := refs[:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
