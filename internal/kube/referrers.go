package kube

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// The second phase of the read: what references the claims in scope. Pods
// and workloads are listed whole, and only their references to claims in
// scope are kept, so memory follows the number of claims, not of pods.

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

// referrers returns the referrers found, each claim's without repeats.
func (r *reader) referrers() map[inventory.Key][]inventory.Referrer {
	for k, refs := range r.refs {
		r.refs[k] = dedup(refs)
	}
	return r.refs
}

// pods reduces every pod to the claims it references. A pod counts whatever
// its phase: scheduled or not, terminating or not, even Succeeded. Pods are
// not decoded: wire.WalkPod reads the few fields needed from their bytes.
func (r *reader) pods(ctx context.Context) error {
	// Owners are looked for among pods only when a claim has one (claims of
	// generic ephemeral volumes are owned by their pod).
	owners := len(r.wantOwners) > 0
	for _, ns := range r.namespaces() {
		if err := r.podsIn(ctx, ns, owners); err != nil {
			return err
		}
	}
	return nil
}

// podsIn lists the pods of one namespace ("" = all). References are
// buffered until the whole list is read, so that a failed attempt or a
// restarted list drops what it had seen.
func (r *reader) podsIn(ctx context.Context, ns string, owners bool) error {
	core := r.c.Kube.CoreV1().RESTClient()
	var buf []podRef
	acc := slice(&buf)
	var p wire.Pod
	item := func(b []byte) error {
		if err := wire.WalkPod(b, &p); err != nil {
			return fmt.Errorf("decode a pod: %w", err)
		}
		buf = r.podRefs(&p, owners, buf)
		return nil
	}
	err := r.list(ctx, "pods", ns, acc, func(ctx context.Context, opts metav1.ListOptions) (string, error) {
		return r.protoList(ctx, coreList{core, "pods", "PodList"}, ns, opts, item)
	}, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, b := range buf {
		r.addRef(b.ns, b.claim, b.referrer())
	}
	return nil
}

// podRefs appends to buf the references of one pod to claims in scope, and
// notes the pod as a possible owner.
func (r *reader) podRefs(p *wire.Pod, owners bool, buf []podRef) []podRef {
	if r.s.Exclude[string(p.Namespace)] {
		return buf
	}
	if owners {
		r.sawOwner(types.UID(p.UID), "Pod", string(p.Name))
	}
	for _, v := range p.Volumes {
		claim, detail := volumeClaim(p, v)
		// inScope is read-only once the claims are listed.
		k := inventory.Key{Namespace: string(p.Namespace), Name: claim}
		if r.inScope[k] {
			buf = append(buf, podRef{ns: k.Namespace, claim: claim, pod: string(p.Name), detail: detail,
				created: p.Created, terminal: string(p.Phase) == "Succeeded" || string(p.Phase) == "Failed"})
		}
	}
	return buf
}

// volumeClaim is the claim a volume of p names, and how: a
// persistentVolumeClaim volume by name, a generic ephemeral volume as
// <pod>-<volume> (the claim Kubernetes makes for it).
func volumeClaim(p *wire.Pod, v wire.PodVolume) (claim, detail string) {
	if v.Ephemeral {
		return string(p.Name) + "-" + string(v.Name), "ephemeral volume " + string(v.Name)
	}
	return string(v.Claim), "volume " + string(v.Name)
}

type podRef struct {
	ns, claim, pod, detail string
	created                int64
	terminal               bool
}

func (b podRef) referrer() inventory.Referrer {
	ref := inventory.Referrer{Kind: "Pod", Name: b.pod, Detail: b.detail, Terminal: b.terminal}
	if b.created != 0 {
		ref.Created = time.Unix(b.created, 0).UTC()
	}
	return ref
}

// workloadKind is one kind of object with a pod template.
type workloadKind struct {
	resource, list string
	client         rest.Interface
	item           func([]byte) error
}

// workloadKinds are the six kinds with pod templates.
func (r *reader) workloadKinds() []workloadKind {
	apps, batch := r.c.Kube.AppsV1().RESTClient(), r.c.Kube.BatchV1().RESTClient()
	return []workloadKind{
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
}

// workloads lists the six kinds with pod templates, one after the other (the
// pods list, running beside them, dominates). Their references go straight
// to the shared set: a list retried or restarted re-adds them, and dedup
// removes the repeats; what a failed attempt had seen of an object that is
// gone since can only keep a claim InUse (the safe side) for one run.
func (r *reader) workloads(ctx context.Context, inv *inventory.Inventory) error {
	none := accumulator{n: func() int { return 0 }, keep: func(int) {}}
	for _, k := range r.workloadKinds() {
		for _, ns := range r.namespaces() {
			if err := r.list(ctx, k.resource, ns, none, func(ctx context.Context, o metav1.ListOptions) (string, error) {
				return r.protoList(ctx, coreList{k.client, k.resource, k.list}, ns, o, k.item)
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

// workload records a workload as a possible owner and the claims its pod
// template names.
func (r *reader) workload(kind string, m *metav1.ObjectMeta, spec *corev1.PodSpec) {
	r.sawOwner(m.UID, kind, m.Name)
	r.templateRefs(kind, m.Namespace, m.Name, spec)
}

// templateRefs adds the claims a pod template names.
func (r *reader) templateRefs(kind, ns, name string, spec *corev1.PodSpec) {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			r.addRef(ns, v.PersistentVolumeClaim.ClaimName, inventory.Referrer{Kind: kind, Name: name, Detail: "pod template volume " + v.Name})
		}
	}
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
