//go:build integration

package testenv

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ReplicaSet creates a ReplicaSet with no replicas (the local cluster runs
// no replicaset controller) whose pod template mounts claim.
func (f *Fixtures) ReplicaSet(ctx context.Context, ns, name, claim string) (*appsv1.ReplicaSet, error) {
	zero := int32(0)
	tmpl := podTemplate(claim)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fixture"}},
			Template: tmpl},
	}
	return f.Kube.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
}

// DaemonSet creates a DaemonSet (never reconciled: no daemonset controller,
// no nodes) whose pod template mounts claim.
func (f *Fixtures) DaemonSet(ctx context.Context, ns, name, claim string) (*appsv1.DaemonSet, error) {
	tmpl := podTemplate(claim)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "fixture"}},
			Template: tmpl},
	}
	return f.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
}

// CronJob creates a suspended CronJob whose job template's pod template
// mounts claim.
func (f *Fixtures) CronJob(ctx context.Context, ns, name, claim string) (*batchv1.CronJob, error) {
	yes := true
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: &yes,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(claim)}}},
	}
	return f.Kube.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
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

// WaitServerAfter waits until the API server's clock, as it stamps a new
// object's creationTimestamp (a server-side dry-run create in ns, which
// stores nothing), is past t: an object created from then on is newer than
// t to the API's second. A wait on the server's own clock, where a sleep
// would guess at it (30 s at most).
// ServerNow is the API server's clock, to the second (truncated): the
// creationTimestamp of a ConfigMap created in ns as a dry run, which
// stores nothing.
func (f *Fixtures) ServerNow(ctx context.Context, ns string) (time.Time, error) {
	cm, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the API server's clock: %w", err)
	}
	return cm.CreationTimestamp.Time, nil
}

func (f *Fixtures) WaitServerAfter(ctx context.Context, ns string, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last time.Time
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cm, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		last = cm.CreationTimestamp.Time
		return last.After(t), nil
	})
	if err != nil {
		return fmt.Errorf("the API server's clock (last seen %s) did not pass %s: %w", last, t, err)
	}
	return nil
}
