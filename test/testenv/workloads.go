//go:build integration

package testenv

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Workloads whose pod templates mount a claim: the owners the janitor
// counts as uses (docs/spec.md#rule-in-use).

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
