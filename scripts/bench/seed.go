//go:build integration

package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The fleet: everything lives in one namespace, as on a platform that keeps
// all workspaces together.
const (
	benchNS        = "bench"
	appLabel       = "app"
	appValue       = "ide"
	workspaceLabel = "workspace-id"
	// workloadsPerKind Deployments, StatefulSets and Jobs are created once.
	workloadsPerKind = 100
)

func claimName(i int) string { return fmt.Sprintf("ws-%06d", i) }
func workspace(i int) string { return fmt.Sprintf("w%06d", i) }

// seeder creates the fleet with high client rates and a worker pool: the
// API server, not the client, is what bounds it.
type seeder struct {
	kube    kubernetes.Interface
	snap    snapclient.Interface
	workers int
	// contents: one VolumeSnapshotContent per snapshot.
	contents bool
	// seeded is how many claims (and pods) exist.
	seeded int
	pod    *corev1.Pod
}

func newSeeder(cfg *rest.Config, workers int, contents bool) (*seeder, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 2000, 4000
	c.UserAgent = "pvc-janitor-bench-seeder"
	snap, err := snapclient.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	// Protobuf halves the API server's decoding work for core kinds.
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	return &seeder{kube: kube, snap: snap, workers: workers, contents: contents, pod: workspacePod()}, nil
}

// setup creates the namespace, its default ServiceAccount (there is no
// controller manager to create it, and pods are refused without it) and the
// workloads.
func (s *seeder) setup(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}}
	if _, err := s.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: benchNS}}
	if _, err := s.kube.CoreV1().ServiceAccounts(benchNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return s.pool(ctx, "workloads", 0, 3*workloadsPerKind, func(ctx context.Context, i int) error {
		kind, j := i/workloadsPerKind, i%workloadsPerKind
		// Every other workload's template names a claim (one of the
		// claims the pods already use, so the mix of states is unchanged).
		claim := ""
		if j%2 == 0 {
			claim = claimName(4 * j)
		}
		tmpl := workloadTemplate(claim)
		zero := int32(0)
		sel := &metav1.LabelSelector{MatchLabels: tmpl.Labels}
		var err error
		switch kind {
		case 0:
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", j), Namespace: benchNS},
				Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: sel, Template: tmpl}}
			_, err = s.kube.AppsV1().Deployments(benchNS).Create(ctx, d, metav1.CreateOptions{})
		case 1:
			sc := testenv.StorageClassName
			st := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%03d", j), Namespace: benchNS},
				Spec: appsv1.StatefulSetSpec{Replicas: &zero, Selector: sel, Template: tmpl, ServiceName: "db",
					VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
						Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
							StorageClassName: &sc, Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
								corev1.ResourceStorage: resource.MustParse("10Gi")}}}}}}}
			_, err = s.kube.AppsV1().StatefulSets(benchNS).Create(ctx, st, metav1.CreateOptions{})
		case 2:
			yes := true
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
			jb := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ci-%03d", j), Namespace: benchNS},
				Spec: batchv1.JobSpec{Suspend: &yes, Template: tmpl}}
			_, err = s.kube.BatchV1().Jobs(benchNS).Create(ctx, jb, metav1.CreateOptions{})
		}
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// seedTo grows the fleet to n claims and pods and n/2 snapshots. Claim i is
// used by pod i when i is even; pods of odd i use no claim (a workspace
// pod of a "stateless" session); claims of odd i have a ready snapshot.
func (s *seeder) seedTo(ctx context.Context, n int) (map[string]time.Duration, error) {
	from := s.seeded
	took := map[string]time.Duration{}
	steps := []struct {
		what string
		fn   func(ctx context.Context, i int) error
	}{
		{"claims+PVs", s.claim},
		{"pods", s.podAt},
		{"snapshots", s.snapshot},
	}
	for _, st := range steps {
		t := time.Now()
		if err := s.pool(ctx, st.what, from, n, st.fn); err != nil {
			return took, err
		}
		took[st.what] = time.Since(t)
	}
	s.seeded = n
	return took, nil
}

// claim creates PV i, claim i bound to it, and the claim's Bound status
// (no binder runs in the minimal stack).
func (s *seeder) claim(ctx context.Context, i int) error {
	name := claimName(i)
	pvName := "pv-" + benchNS + "-" + name
	sc := testenv.StorageClassName
	q := resource.MustParse("10Gi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{
			"pv.kubernetes.io/provisioned-by": testenv.DriverName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              sc,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: benchNS, Name: name},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: testenv.DriverName, VolumeHandle: "vol-" + name, FSType: "ext4",
				VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-" + testenv.DriverName}}},
		},
	}
	if _, err := s.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: benchNS,
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i), "app.kubernetes.io/managed-by": "ide-operator"},
			Annotations: map[string]string{
				"pv.kubernetes.io/bind-completed":               "yes",
				"pv.kubernetes.io/bound-by-controller":          "yes",
				"volume.beta.kubernetes.io/storage-provisioner": testenv.DriverName,
				"volume.kubernetes.io/storage-provisioner":      testenv.DriverName,
			}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	created, err := s.kube.CoreV1().PersistentVolumeClaims(benchNS).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	created.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
		AccessModes: pvc.Spec.AccessModes, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}}
	_, err = s.kube.CoreV1().PersistentVolumeClaims(benchNS).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

func (s *seeder) podAt(ctx context.Context, i int) error {
	p := s.pod.DeepCopy()
	p.Name = fmt.Sprintf("ide-%06d", i)
	p.Labels[workspaceLabel] = workspace(i)
	p.Annotations["ide.example.com/session"] = strconv.Itoa(1_000_000 + i)
	if i%2 == 0 {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(i)}}})
	} else {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	_, err := s.kube.CoreV1().Pods(benchNS).Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// snapshot creates, for odd i, a ready VolumeSnapshot of claim i (status set
// through the status subresource, as snapshot-controller would) and its
// content.
func (s *seeder) snapshot(ctx context.Context, i int) error {
	if i%2 == 0 {
		return nil
	}
	name := claimName(i)
	vsName := name + "-daily"
	contentName := "snapcontent-" + benchNS + "-" + vsName
	class := testenv.SnapshotClassRetain
	claim := name
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: vsName, Namespace: benchNS,
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i)}},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim},
			VolumeSnapshotClassName: &class},
	}
	created, err := s.snap.SnapshotV1().VolumeSnapshots(benchNS).Create(ctx, vs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return err
	}
	yes := true
	now := metav1.Now()
	size := resource.MustParse("10Gi")
	created.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &contentName,
		CreationTime: &now, ReadyToUse: &yes, RestoreSize: &size}
	if _, err := s.snap.SnapshotV1().VolumeSnapshots(benchNS).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if !s.contents {
		return nil
	}
	handle := "vol-" + name
	vc := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: contentName},
		Spec: snapv1.VolumeSnapshotContentSpec{
			VolumeSnapshotRef:       corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1", Namespace: benchNS, Name: vsName, UID: created.UID},
			DeletionPolicy:          snapv1.VolumeSnapshotContentRetain,
			Driver:                  testenv.DriverName,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
		},
	}
	if _, err := s.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, vc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// pool runs fn for every i in [from, to) on s.workers goroutines, stops at
// the first error, and logs progress every 10 s.
func (s *seeder) pool(ctx context.Context, what string, from, to int, fn func(ctx context.Context, i int) error) error {
	if to <= from {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	next.Store(int64(from))
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := retryCreate(ctx, func() error { return fn(ctx, i) }); err != nil {
					once.Do(func() { first = fmt.Errorf("seed %s #%d: %w", what, i, err); cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for {
		select {
		case <-finished:
			if first != nil {
				return first
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			logf("seeded %s %d..%d in %s (%.0f/s)", what, from, to, time.Since(start).Round(time.Millisecond),
				float64(to-from)/time.Since(start).Seconds())
			return nil
		case <-tick.C:
			d := done.Load()
			logf("seeding %s: %d/%d (%.0f/s)", what, d, to-from, float64(d)/time.Since(start).Seconds())
		}
	}
}

// retryCreate retries what an overloaded API server answers (429, 5xx,
// timeouts) a few times.
func retryCreate(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 8 {
		err = fn()
		if err == nil || !(apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
			apierrors.IsTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
	return err
}

// workspacePod is a realistic cloud-IDE workspace pod: an IDE container and
// an auth proxy sidecar with the environment, resources, probes and mounts
// such pods carry. As served (with managedFields and the admission
// defaults), it is about 5 KB of JSON.
func workspacePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS,
			Labels: map[string]string{appLabel: appValue, "app.kubernetes.io/component": "workspace",
				"app.kubernetes.io/managed-by": "ide-operator", "ide.example.com/tier": "standard"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/default-container": "ide",
				"ide.example.com/image-digest":            "sha256:4f2c1d0e9b8a7f6e5d4c3b2a19081726354453627180918273645546372819a0",
				"prometheus.io/scrape":                    "true",
				"prometheus.io/port":                      "9090",
			}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{ideContainer(), authProxyContainer()},
			Volumes: []corev1.Volume{
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "ide-settings"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			NodeSelector:       map[string]string{"node.example.com/pool": "workspaces"},
			Tolerations:        []corev1.Toleration{{Key: "workspaces", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			PriorityClassName:  "",
			ServiceAccountName: "default",
		},
	}
}

// envVars turns name, value pairs into a container's environment.
func envVars(pairs ...string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, corev1.EnvVar{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// resources requests cpu and mem and limits mem.
func resources(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
	}
}

// nonRoot is the workspace containers' security context.
func nonRoot() *corev1.SecurityContext {
	no, yes := false, true
	uid := int64(1000)
	return &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, AllowPrivilegeEscalation: &no}
}

// ideContainer is the workspace pod's IDE.
func ideContainer() corev1.Container {
	return corev1.Container{
		Name: "ide", Image: "registry.example.com/ide/workspace:2026.01.3",
		Env: envVars("HOME", "/home/user", "SHELL", "/bin/bash", "WORKSPACE_DIR", "/workspace",
			"IDE_PORT", "3000", "IDE_TELEMETRY", "off", "GIT_AUTHOR_NAME", "Workspace User",
			"GIT_AUTHOR_EMAIL", "user@example.com", "HTTP_PROXY", "http://proxy.example.com:3128",
			"NO_PROXY", "localhost,127.0.0.1,.svc,.cluster.local", "LANG", "C.UTF-8",
			"NODE_OPTIONS", "--max-old-space-size=2048", "PIP_INDEX_URL", "https://pypi.example.com/simple",
			"GOPROXY", "https://proxy.golang.org,direct", "TZ", "UTC"),
		Ports:     []corev1.ContainerPort{{Name: "ide", ContainerPort: 3000}, {Name: "metrics", ContainerPort: 9090}},
		Resources: resources("500m", "4Gi"),
		VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"},
			{Name: "settings", MountPath: "/etc/ide", ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("ide")}}, PeriodSeconds: 10, FailureThreshold: 3},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("ide")}}, InitialDelaySeconds: 30, PeriodSeconds: 20},
		SecurityContext: nonRoot(),
	}
}

// authProxyContainer is the workspace pod's auth proxy sidecar.
func authProxyContainer() corev1.Container {
	return corev1.Container{
		Name: "auth-proxy", Image: "registry.example.com/ide/auth-proxy:1.14.2",
		Args: []string{"--upstream=http://127.0.0.1:3000", "--http-address=0.0.0.0:4180", "--cookie-secure=true"},
		Env: envVars("OAUTH2_PROXY_PROVIDER", "oidc", "OAUTH2_PROXY_OIDC_ISSUER_URL", "https://sso.example.com/realms/ide",
			"OAUTH2_PROXY_CLIENT_ID", "workspace", "OAUTH2_PROXY_EMAIL_DOMAINS", "*"),
		Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 4180}},
		Resources:       resources("50m", "128Mi"),
		SecurityContext: nonRoot(),
	}
}

// workloadTemplate is the pod template of the seeded workloads; claim, when
// set, is mounted.
func workloadTemplate(claim string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "svc"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/svc:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
	if claim != "" {
		t.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	}
	return t
}
