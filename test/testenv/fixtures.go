//go:build integration

package testenv

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Fixtures create realistic workspace objects. They talk to a real API
// server and wait for the real controllers, so every helper may take up to
// a few seconds.
type Fixtures struct {
	Kube kubernetes.Interface
	Snap snapclient.Interface
	// UnusedCondition is false when the control plane runs with the
	// KEP-5541 gate off: no Unused condition will ever appear (see
	// WaitIdle).
	UnusedCondition bool
	// DriverStateDir is the CSI driver's state folder, where the volumes'
	// files live (WriteVolume, ReadVolume).
	DriverStateDir string
}

// NewFixtures returns fixtures for the cluster.
func (c *Cluster) NewFixtures() (*Fixtures, error) {
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	snap, err := snapclient.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	return &Fixtures{Kube: kube, Snap: snap, UnusedCondition: c.UnusedCondition(), DriverStateDir: c.DriverStateDir}, nil
}

// ClaimSpec describes a workspace claim.
type ClaimSpec struct {
	Namespace, Name string
	Labels          map[string]string
	Annotations     map[string]string
	// VolumeHandle is the CSI handle of its PV (fault injection is keyed by
	// it); default "<namespace>-<name>".
	VolumeHandle string
	// Unbound leaves the claim Pending (no PV is created).
	Unbound bool
	// OwnerReferences are copied onto the claim.
	OwnerReferences []metav1.OwnerReference
	// FromSnapshot (ProvisionedClaim only) names a VolumeSnapshot in the
	// claim's namespace for its dataSourceRef: the volume is restored from it.
	FromSnapshot string
}

// BoundClaim creates a CSI PersistentVolume pre-bound to a new claim and
// waits until kube-controller-manager's binder reports the claim Bound. The
// PV is named "pv-<namespace>-<name>".
func (f *Fixtures) BoundClaim(ctx context.Context, s ClaimSpec) (*corev1.PersistentVolumeClaim, error) {
	handle := s.VolumeHandle
	if handle == "" {
		handle = s.Namespace + "-" + s.Name
	}
	sc := StorageClassName
	pvName := "pv-" + s.Namespace + "-" + s.Name
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels,
			Annotations: s.Annotations, OwnerReferences: s.OwnerReferences},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if s.Unbound {
		// A class nobody provisions: the claim stays Pending.
		none := "no-provisioner"
		claim.Spec.StorageClassName = &none
		return f.Kube.CoreV1().PersistentVolumeClaims(s.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	}
	claim.Spec.VolumeName = pvName
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              sc,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: s.Namespace, Name: s.Name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: DriverName, VolumeHandle: handle}},
		},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create PV %s: %w", pvName, err)
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(s.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create claim %s/%s: %w", s.Namespace, s.Name, err)
	}
	return f.WaitClaim(ctx, s.Namespace, s.Name, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Status.Phase == corev1.ClaimBound
	})
}

// WaitClaim polls a claim until cond holds (30 s at most).
func (f *Fixtures) WaitClaim(ctx context.Context, ns, name string, cond func(*corev1.PersistentVolumeClaim) bool) (*corev1.PersistentVolumeClaim, error) {
	var last *corev1.PersistentVolumeClaim
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = c
		return cond(c), nil
	})
	if err != nil {
		return last, fmt.Errorf("claim %s/%s: condition not met: %w", ns, name, err)
	}
	return last, nil
}

// WaitClaimGone polls until the claim no longer exists (30 s at most).
func (f *Fixtures) WaitClaimGone(ctx context.Context, ns, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// PodSpec describes a pod using claims.
type PodSpec struct {
	Namespace, Name string
	Claims          []string
	// Scheduled sets spec.nodeName, so pvc-protection counts the pod.
	Scheduled bool
	// EphemeralVolume adds a generic ephemeral volume of this name; its
	// claim, "<pod>-<volume>", is created by the ephemeral-volume controller.
	EphemeralVolume string
	// Phase, when set, is written to the pod's status (e.g. Succeeded).
	Phase corev1.PodPhase
}

// Pod creates a pod that mounts the claims. It never runs: its node
// (node-1) does not exist, and an unscheduled one names a scheduler that
// never runs, so that even a cluster with the opt-in node (node.go) leaves
// it as the test made it; its image is never pulled. Scheduled pods still
// keep their claims protected.
func (f *Fixtures) Pod(ctx context.Context, s PodSpec) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name},
		Spec: corev1.PodSpec{
			SchedulerName: FixtureScheduler,
			Containers:    []corev1.Container{{Name: "ide", Image: "registry.invalid/ide:1", ImagePullPolicy: corev1.PullNever}},
		},
	}
	if s.Scheduled {
		pod.Spec.NodeName = "node-1"
	}
	for _, c := range s.Claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "v-" + c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	if s.EphemeralVolume != "" {
		sc := StorageClassName
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: s.EphemeralVolume,
			VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &sc,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}}}})
	}
	created, err := f.Kube.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", s.Namespace, s.Name, err)
	}
	if s.Phase != "" {
		created.Status.Phase = s.Phase
		if created, err = f.Kube.CoreV1().Pods(s.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("set pod %s/%s phase: %w", s.Namespace, s.Name, err)
		}
	}
	return created, nil
}

// ForceDeletePod deletes a pod with grace period 0: without a kubelet a
// graceful delete would leave it terminating forever.
func (f *Fixtures) ForceDeletePod(ctx context.Context, ns, name string) error {
	zero := int64(0)
	return f.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// VolumeAttachment records that pvName is attached (or not) to node.
func (f *Fixtures) VolumeAttachment(ctx context.Context, name, pvName, node string, attached bool) (*storagev1.VolumeAttachment, error) {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: DriverName, NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
	}
	created, err := f.Kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create VolumeAttachment %s: %w", name, err)
	}
	created.Status.Attached = attached
	return f.Kube.StorageV1().VolumeAttachments().UpdateStatus(ctx, created, metav1.UpdateOptions{})
}

// FixtureScheduler is the scheduler fixture pods name: none runs by that
// name, so the opt-in node's kube-scheduler never places them.
const FixtureScheduler = "pvc-janitor-fixtures"

func podTemplate(claim string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "fixture"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			SchedulerName: FixtureScheduler,
			Containers:    []corev1.Container{{Name: "c", Image: "registry.invalid/c:1", ImagePullPolicy: corev1.PullNever}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}
}

// Deployment creates a Deployment (never reconciled: the local cluster runs
// no deployment controller) whose pod template mounts claim.
func (f *Fixtures) Deployment(ctx context.Context, ns, name, claim string) (*appsv1.Deployment, error) {
	zero := int32(0)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fixture"}},
			Template: podTemplate(claim)},
	}
	d.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	return f.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
}

// StatefulSet creates a StatefulSet with one volumeClaimTemplate named
// template; its claims are named <template>-<name>-<ordinal>.
func (f *Fixtures) StatefulSet(ctx context.Context, ns, name, template string) (*appsv1.StatefulSet, error) {
	zero := int32(0)
	sc := StorageClassName
	tmpl := podTemplate("unused")
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	tmpl.Spec.Volumes = nil
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{Replicas: &zero, ServiceName: name,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fixture"}},
			Template: tmpl,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: template},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: &sc,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("1Gi")}},
				}}},
		},
	}
	return f.Kube.AppsV1().StatefulSets(ns).Create(ctx, s, metav1.CreateOptions{})
}

// Job creates a suspended Job whose pod template mounts claim.
func (f *Fixtures) Job(ctx context.Context, ns, name, claim string) (*batchv1.Job, error) {
	yes := true
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       batchv1.JobSpec{Suspend: &yes, Template: podTemplate(claim)},
	}
	return f.Kube.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{})
}

// Snapshot creates a VolumeSnapshot of claim with the given class ("" for
// the default class).
func (f *Fixtures) Snapshot(ctx context.Context, ns, name, claim, class string, labels, annotations map[string]string) (*snapv1.VolumeSnapshot, error) {
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}
	if class != "" {
		vs.Spec.VolumeSnapshotClassName = &class
	}
	return f.Snap.SnapshotV1().VolumeSnapshots(ns).Create(ctx, vs, metav1.CreateOptions{})
}

// WaitSnapshot polls a VolumeSnapshot until cond holds or timeout passes.
func (f *Fixtures) WaitSnapshot(ctx context.Context, ns, name string, timeout time.Duration, cond func(*snapv1.VolumeSnapshot) bool) (*snapv1.VolumeSnapshot, error) {
	var last *snapv1.VolumeSnapshot
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		s, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		return last, fmt.Errorf("snapshot %s/%s: condition not met: %w", ns, name, err)
	}
	return last, nil
}

// Ready reports whether a snapshot is readyToUse.
func Ready(s *snapv1.VolumeSnapshot) bool {
	return s.Status != nil && s.Status.ReadyToUse != nil && *s.Status.ReadyToUse
}

// Failed reports whether a snapshot carries status.error.
func Failed(s *snapv1.VolumeSnapshot) bool {
	return s.Status != nil && s.Status.Error != nil && s.Status.Error.Message != nil
}

// DeleteNamespace deletes ns, force-deleting its pods and removing the
// claims' finalizers first (no kubelet will ever release them), and waits
// until it is gone. A missing namespace is not an error.
func (f *Fixtures) DeleteNamespace(ctx context.Context, ns string) error {
	if _, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	}
	zero := int64(0)
	if err := f.Kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := f.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := f.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not deleted: %w", ns, err)
	}
	// The fixtures' PVs are Retain and cluster-scoped: they outlive the
	// namespace and would collide with a new fleet of the same names.
	pvs, err := f.Kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
			if err := f.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// WaitUnused waits until the controller manager has set the claim's Unused
// condition (KEP-5541) to True: from then on its orphaned-since is known.
func (f *Fixtures) WaitUnused(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return f.WaitClaim(ctx, ns, name, func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}

// WaitIdle is WaitUnused on a control plane that maintains the Unused
// condition. On one that does not (Fixtures.UnusedCondition false) nothing
// can be waited for: it returns the claim as it is, and the janitor's own
// mark is the only record of the claim's idleness. Tests meant to run on
// both stacks use it instead of WaitUnused.
func (f *Fixtures) WaitIdle(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if f.UnusedCondition {
		return f.WaitUnused(ctx, ns, name)
	}
	return f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

// UnusedCondition returns the claim's Unused condition, nil when it has
// none.
func UnusedCondition(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaimCondition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == corev1.PersistentVolumeClaimUnused {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// ProtectionBarrier creates a bound claim in ns that no pod uses, deletes
// it and waits until kube-controller-manager's pvc-protection controller
// has released it. That controller runs one worker on a FIFO queue, and it
// is also the one that maintains the Unused condition: once the barrier is
// through, every claim it had queued before (a claim bound, a pod of it
// deleted, a claim deleted) has been processed. A wait on the controller's
// real work, where a sleep would only guess.
func (f *Fixtures) ProtectionBarrier(ctx context.Context, ns string) error {
	name := fmt.Sprintf("barrier-%d", time.Now().UnixNano())
	if _, err := f.BoundClaim(ctx, ClaimSpec{Namespace: ns, Name: name}); err != nil {
		return err
	}
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := f.WaitClaimGone(ctx, ns, name); err != nil {
		return fmt.Errorf("the pvc-protection controller did not release the unused claim %s/%s: %w", ns, name, err)
	}
	if err := f.Kube.CoreV1().PersistentVolumes().Delete(ctx, "pv-"+ns+"-"+name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// BoundClaimFrom is BoundClaim with the PV's volume source given: a
// hostPath volume (not CSI), or a CSI volume of another driver. The PV is
// named "pv-<namespace>-<name>"; s.VolumeHandle and s.Unbound are ignored.
func (f *Fixtures) BoundClaimFrom(ctx context.Context, s ClaimSpec, src corev1.PersistentVolumeSource) (*corev1.PersistentVolumeClaim, error) {
	sc := StorageClassName
	pvName := "pv-" + s.Namespace + "-" + s.Name
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              sc,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: s.Namespace, Name: s.Name},
			PersistentVolumeSource:        src,
		},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create PV %s: %w", pvName, err)
	}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Labels: s.Labels,
			Annotations: s.Annotations, OwnerReferences: s.OwnerReferences},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       pvName,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(s.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create claim %s/%s: %w", s.Namespace, s.Name, err)
	}
	return f.WaitClaim(ctx, s.Namespace, s.Name, func(c *corev1.PersistentVolumeClaim) bool {
		return c.Status.Phase == corev1.ClaimBound
	})
}
