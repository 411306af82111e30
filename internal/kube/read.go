package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
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
	// PageSize is the limit of each list call.
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

// Read lists everything classification needs and reduces it page by page.
// Claims, PVs, attachments, snapshots and contents are listed concurrently;
// then pods and workloads, concurrently, keeping only references to the
// claims in scope (so memory follows the number of claims, not of pods).
func Read(ctx context.Context, c *Clients, s Scope) (*inventory.Inventory, error) {
	if s.PageSize <= 0 {
		s.PageSize = 500
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
	inv.ServerTime = c.Clock.Now()

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

// pageFn lists one page: it returns the continue token.
type pageFn func(ctx context.Context, opts metav1.ListOptions) (string, error)

// list pages through one kind in one namespace ("" = all). A 410 Gone on a
// continuation (the snapshot of the list expired) restarts the list from
// the first page after reset(): a half list is never used.
func (r *reader) list(ctx context.Context, what, ns string, reset func(), page pageFn, opts metav1.ListOptions) error {
	opts.Limit = r.s.PageSize
	where := "in all namespaces"
	if ns != "" {
		where = fmt.Sprintf("in namespace %q", ns)
	}
	restarts := 0
	for {
		var cont string
		err := r.s.Retry.Do(ctx, "list "+what, func(ctx context.Context) error {
			var err error
			cont, err = page(ctx, opts)
			return err
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) && opts.Continue != "" && restarts < 5 {
				restarts++
				reset()
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

func hint(what string, err error) error {
	if apierrors.IsNotFound(err) && strings.HasPrefix(what, "volumesnapshot") {
		return fmt.Errorf("%w (is the snapshot.storage.k8s.io/v1 API installed? the VolumeSnapshot CRDs are missing)", err)
	}
	return err
}

func (r *reader) claims(ctx context.Context, inv *inventory.Inventory) error {
	var out []inventory.Claim
	for _, ns := range r.namespaces() {
		mark := len(out)
		err := r.list(ctx, "persistentvolumeclaims", ns, func() { out = out[:mark] },
			func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				l, err := r.c.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
				if err != nil {
					return "", err
				}
				for i := range l.Items {
					if r.s.Exclude[l.Items[i].Namespace] {
						continue
					}
					out = append(out, r.claim(&l.Items[i]))
				}
				return l.Continue, nil
			}, metav1.ListOptions{LabelSelector: r.s.Selector.String()})
		if err != nil {
			return err
		}
	}
	inv.Claims = out
	return nil
}

func (r *reader) claim(p *corev1.PersistentVolumeClaim) inventory.Claim {
	c := inventory.Claim{
		Namespace:         r.in(p.Namespace),
		Name:              p.Name,
		UID:               p.UID,
		ResourceVersion:   p.ResourceVersion,
		CreationTimestamp: p.CreationTimestamp.Time,
		Labels:            p.Labels,
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
	out := map[string]inventory.PV{}
	return r.list(ctx, "persistentvolumes", "", func() { clear(out) },
		func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			l, err := r.c.Kube.CoreV1().PersistentVolumes().List(ctx, opts)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				pv := &l.Items[i]
				v := inventory.PV{Name: pv.Name}
				if pv.Spec.CSI != nil {
					v.CSIDriver, v.VolumeHandle = r.in(pv.Spec.CSI.Driver), pv.Spec.CSI.VolumeHandle
				}
				out[pv.Name] = v
			}
			inv.PVs = out
			return l.Continue, nil
		}, metav1.ListOptions{})
}

func (r *reader) attachments(ctx context.Context, inv *inventory.Inventory) error {
	out := map[string][]inventory.Attachment{}
	return r.list(ctx, "volumeattachments", "", func() { clear(out) },
		func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			l, err := r.c.Kube.StorageV1().VolumeAttachments().List(ctx, opts)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				va := &l.Items[i]
				if va.Spec.Source.PersistentVolumeName == nil {
					continue
				}
				pv := *va.Spec.Source.PersistentVolumeName
				out[pv] = append(out[pv], attachment(va))
			}
			inv.Attachments = out
			return l.Continue, nil
		}, metav1.ListOptions{})
}

func attachment(va *storagev1.VolumeAttachment) inventory.Attachment {
	return inventory.Attachment{Name: va.Name, PVName: *va.Spec.Source.PersistentVolumeName,
		NodeName: va.Spec.NodeName, Attached: va.Status.Attached}
}

func (r *reader) snapshots(ctx context.Context, inv *inventory.Inventory) error {
	out := map[string][]inventory.Snapshot{}
	for _, ns := range r.namespaces() {
		err := r.list(ctx, "volumesnapshots", ns, func() {
			if ns == "" {
				clear(out)
			} else {
				delete(out, ns)
			}
		},
			func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				l, err := r.c.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, opts)
				if err != nil {
					return "", err
				}
				for i := range l.Items {
					vs := &l.Items[i]
					if r.s.Exclude[vs.Namespace] {
						continue
					}
					s := Snapshot(vs, r.s.WorkspaceLabel)
					s.Namespace = r.in(s.Namespace)
					out[s.Namespace] = append(out[s.Namespace], s)
				}
				return l.Continue, nil
			}, metav1.ListOptions{})
		if err != nil {
			return err
		}
	}
	inv.Snapshots = out
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
	out := map[string]inventory.Content{}
	return r.list(ctx, "volumesnapshotcontents", "", func() { clear(out) },
		func(ctx context.Context, opts metav1.ListOptions) (string, error) {
			l, err := r.c.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, opts)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				vc := &l.Items[i]
				out[vc.Name] = inventory.Content{Name: vc.Name, DeletionPolicy: string(vc.Spec.DeletionPolicy),
					Snapshot: inventory.Key{Namespace: vc.Spec.VolumeSnapshotRef.Namespace, Name: vc.Spec.VolumeSnapshotRef.Name}}
			}
			inv.Contents = out
			return l.Continue, nil
		}, metav1.ListOptions{})
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
// its phase: scheduled or not, terminating or not, even Succeeded.
func (r *reader) pods(ctx context.Context) error {
	for _, ns := range r.namespaces() {
		// References are buffered until the whole list is read, so that a
		// list restarted after 410 Gone starts from an empty buffer.
		var buf []podRef
		err := r.list(ctx, "pods", ns, func() { buf = buf[:0] },
			func(ctx context.Context, opts metav1.ListOptions) (string, error) {
				l, err := r.c.Kube.CoreV1().Pods(ns).List(ctx, opts)
				if err != nil {
					return "", err
				}
				for i := range l.Items {
					p := &l.Items[i]
					if r.s.Exclude[p.Namespace] {
						continue
					}
					r.sawOwner(p.UID, "Pod", p.Name)
					for _, v := range p.Spec.Volumes {
						var claim, detail string
						switch {
						case v.PersistentVolumeClaim != nil:
							claim, detail = v.PersistentVolumeClaim.ClaimName, "volume "+v.Name
						case v.Ephemeral != nil:
							claim, detail = p.Name+"-"+v.Name, "ephemeral volume "+v.Name
						default:
							continue
						}
						// inScope is read-only once the claims are listed.
						if r.inScope[inventory.Key{Namespace: p.Namespace, Name: claim}] {
							buf = append(buf, podRef{ns: p.Namespace, claim: claim, pod: p.Name, detail: detail})
						}
					}
				}
				return l.Continue, nil
			}, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, b := range buf {
			r.addRef(b.ns, b.claim, inventory.Referrer{Kind: "Pod", Name: b.pod, Detail: b.detail})
		}
	}
	return nil
}

type podRef struct{ ns, claim, pod, detail string }

// templateRefs adds the claims a pod template names.
func (r *reader) templateRefs(kind, ns, name string, spec *corev1.PodSpec) {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			r.addRef(ns, v.PersistentVolumeClaim.ClaimName, inventory.Referrer{Kind: kind, Name: name, Detail: "pod template volume " + v.Name})
		}
	}
}

// workloads lists the six kinds with pod templates, one after the other (the
// pods list, running beside them, dominates).
func (r *reader) workloads(ctx context.Context, inv *inventory.Inventory) error {
	type kind struct {
		name string
		page func(ctx context.Context, ns string, opts metav1.ListOptions) (string, error)
	}
	apps, batch := r.c.Kube.AppsV1(), r.c.Kube.BatchV1()
	kinds := []kind{
		{"deployments", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := apps.Deployments(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "Deployment", d.Name)
				r.templateRefs("Deployment", d.Namespace, d.Name, &d.Spec.Template.Spec)
			}
			return l.Continue, nil
		}},
		{"replicasets", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := apps.ReplicaSets(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "ReplicaSet", d.Name)
				r.templateRefs("ReplicaSet", d.Namespace, d.Name, &d.Spec.Template.Spec)
			}
			return l.Continue, nil
		}},
		{"daemonsets", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := apps.DaemonSets(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "DaemonSet", d.Name)
				r.templateRefs("DaemonSet", d.Namespace, d.Name, &d.Spec.Template.Spec)
			}
			return l.Continue, nil
		}},
		{"statefulsets", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := apps.StatefulSets(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "StatefulSet", d.Name)
				r.templateRefs("StatefulSet", d.Namespace, d.Name, &d.Spec.Template.Spec)
				r.statefulSet(d)
			}
			return l.Continue, nil
		}},
		{"jobs", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := batch.Jobs(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "Job", d.Name)
				r.templateRefs("Job", d.Namespace, d.Name, &d.Spec.Template.Spec)
			}
			return l.Continue, nil
		}},
		{"cronjobs", func(ctx context.Context, ns string, o metav1.ListOptions) (string, error) {
			l, err := batch.CronJobs(ns).List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				d := &l.Items[i]
				r.sawOwner(d.UID, "CronJob", d.Name)
				r.templateRefs("CronJob", d.Namespace, d.Name, &d.Spec.JobTemplate.Spec.Template.Spec)
			}
			return l.Continue, nil
		}},
	}
	for _, k := range kinds {
		for _, ns := range r.namespaces() {
			// Template references are set-like per (claim, workload), and a
			// restarted list re-adds them: duplicates are harmless for
			// classification but are removed from the reason by dedup.
			if err := r.list(ctx, k.name, ns, func() {}, func(ctx context.Context, o metav1.ListOptions) (string, error) {
				return k.page(ctx, ns, o)
			}, metav1.ListOptions{}); err != nil {
				return err
			}
		}
	}
	inv.StatefulSetTemplates = r.stsTmpl
	return nil
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
