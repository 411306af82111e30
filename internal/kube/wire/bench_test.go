package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// The reader's (package kube's) cost per pod is what bounds a scan's memory and CPU on a
// fleet (pods are its largest and most numerous objects, and it keeps only
// the claims they name). These benchmarks decode one page of 500 realistic
// workspace pods, as the API server sends it (protobuf, with managedFields),
// the way the reader did first (client-go's decoder into a PodList, then
// the volumes loop), and the way it does now: streamed, with a
// field-skipping protobuf walk that materializes only name, namespace, uid
// and the referenced claim names.
//
//	go test -run x -bench PodPage -benchmem ./internal/kube/wire/

const benchPageSize = 500

// benchPod is a cloud-IDE workspace pod like the scale benchmark's
// (scripts/bench): two containers, env, resources, probes, mounts, and
// managedFields, about 8.5 KB of JSON as served.
func benchPod(i int) *corev1.Pod {
	env := func(pairs ...string) []corev1.EnvVar {
		var out []corev1.EnvVar
		for j := 0; j+1 < len(pairs); j += 2 {
			out = append(out, corev1.EnvVar{Name: pairs[j], Value: pairs[j+1]})
		}
		return out
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("4Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")},
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("ide")}}, PeriodSeconds: 10}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("ide-%06d", i), UID: "0b9d1f3e-6c1a-4c51-9f0e-1d2c3b4a5f60",
			ResourceVersion: "123456", CreationTimestamp: metav1.Unix(1767225600, 0),
			Labels: map[string]string{"app": "ide", "app.kubernetes.io/component": "workspace", "app.kubernetes.io/managed-by": "ide-operator",
				"ide.example.com/tier": "standard", "workspace-id": fmt.Sprintf("w%06d", i)},
			Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "ide", "prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				"ide.example.com/image-digest": "sha256:4f2c1d0e9b8a7f6e5d4c3b2a19081726354453627180918273645546372819a0"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "ide", Image: "registry.example.com/ide/workspace:2026.01.3",
				Env: env("HOME", "/home/user", "SHELL", "/bin/bash", "WORKSPACE_DIR", "/workspace", "IDE_PORT", "3000",
					"IDE_TELEMETRY", "off", "GIT_AUTHOR_NAME", "Workspace User", "GIT_AUTHOR_EMAIL", "user@example.com",
					"HTTP_PROXY", "http://proxy.example.com:3128", "NO_PROXY", "localhost,127.0.0.1,.svc,.cluster.local",
					"LANG", "C.UTF-8", "NODE_OPTIONS", "--max-old-space-size=2048", "PIP_INDEX_URL", "https://pypi.example.com/simple",
					"GOPROXY", "https://proxy.golang.org,direct", "TZ", "UTC"),
				Ports:     []corev1.ContainerPort{{Name: "ide", ContainerPort: 3000}, {Name: "metrics", ContainerPort: 9090}},
				Resources: res, ReadinessProbe: probe, LivenessProbe: probe,
				VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}, {Name: "settings", MountPath: "/etc/ide", ReadOnly: true},
					{Name: "tmp", MountPath: "/tmp"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}, {
				Name: "auth-proxy", Image: "registry.example.com/ide/auth-proxy:1.14.2",
				Args: []string{"--upstream=http://127.0.0.1:3000", "--http-address=0.0.0.0:4180", "--cookie-secure=true"},
				Env: env("OAUTH2_PROXY_PROVIDER", "oidc", "OAUTH2_PROXY_OIDC_ISSUER_URL", "https://sso.example.com/realms/ide",
					"OAUTH2_PROXY_CLIENT_ID", "workspace", "OAUTH2_PROXY_EMAIL_DOMAINS", "*"),
				Resources: res,
			}},
			Volumes: []corev1.Volume{
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ide-settings"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}}},
			},
			NodeSelector:       map[string]string{"node.example.com/pool": "workspaces"},
			ServiceAccountName: "default",
		},
	}
	// Half the pods mount their workspace claim, as in the scale benchmark.
	if i%2 == 0 {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("ws-%06d", i)}}})
	} else {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	// managedFields as an API server records them: a field set mirroring the
	// object, about as large as the object itself.
	raw, _ := json.Marshal(p)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	fields, _ := json.Marshal(fieldSet(obj))
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "ide-operator", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fields}}}
	return p
}

// fieldSet turns an object into the shape of a FieldsV1 set.
func fieldSet(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{".": map[string]any{}}
		for k, x := range t {
			out["f:"+k] = fieldSet(x)
		}
		return out
	case []any:
		out := map[string]any{}
		for i, x := range t {
			out[fmt.Sprintf("k:{\"name\":\"%d\"}", i)] = fieldSet(x)
		}
		return out
	default:
		return map[string]any{}
	}
}

// benchPodPage is one page of pods, encoded as the API server sends it.
func benchPodPage(tb testing.TB) []byte {
	tb.Helper()
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "123456", Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIzNDU2fQ"}}
	for i := range benchPageSize {
		l.Items = append(l.Items, *benchPod(i))
	}
	l.APIVersion, l.Kind = "v1", "PodList"
	var buf bytesBuffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(l, &buf); err != nil {
		tb.Fatal(err)
	}
	return buf.b
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// benchRef is what the reader keeps of a pod: one per claim it names.
type benchRef struct{ ns, pod, uid, claim string }

// decodeFull is the reader's first path: client-go's protobuf decoder into
// a PodList, then the volumes loop of kube's pods list.
func decodeFull(tb testing.TB, page []byte, inScope func(ns, claim string) bool, out []benchRef) []benchRef {
	l := &corev1.PodList{}
	obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(page, nil, l)
	if err != nil {
		tb.Fatal(err)
	}
	l = obj.(*corev1.PodList)
	for i := range l.Items {
		p := &l.Items[i]
		for _, v := range p.Spec.Volumes {
			var claim string
			switch {
			case v.PersistentVolumeClaim != nil:
				claim = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				claim = p.Name + "-" + v.Name
			default:
				continue
			}
			if inScope(p.Namespace, claim) {
				out = append(out, benchRef{ns: p.Namespace, pod: p.Name, uid: string(p.UID), claim: claim})
			}
		}
	}
	return out
}

// decodePartial is the reader's path: the page streamed by ReadProtoList,
// each pod walked by WalkPod; strings are made only for the refs kept.
func decodePartial(tb testing.TB, page []byte, inScope func(ns, claim string) bool, out []benchRef) []benchRef {
	var p Pod
	_, err := ReadProtoList(bytes.NewReader(page), "PodList", func(b []byte) error {
		if err := WalkPod(b, &p); err != nil {
			return err
		}
		for _, v := range p.Volumes {
			var c string
			if v.Ephemeral {
				c = string(p.Name) + "-" + string(v.Name)
			} else {
				c = string(v.Claim)
			}
			if inScope(string(p.Namespace), c) {
				out = append(out, benchRef{ns: string(p.Namespace), pod: string(p.Name), uid: string(p.UID), claim: c})
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func benchScope(ns, claim string) bool { return ns == "bench" && len(claim) == 9 }

// TestPodPageDecodersAgree checks the reader's walk against full decoding,
// including an ephemeral volume.
func TestPodPageDecodersAgree(t *testing.T) {
	page := benchPodPage(t)
	full := decodeFull(t, page, benchScope, nil)
	part := decodePartial(t, page, benchScope, nil)
	if len(full) != benchPageSize/2 || len(full) != len(part) {
		t.Fatalf("full decode found %d refs, partial %d, want %d", len(full), len(part), benchPageSize/2)
	}
	for i := range full {
		if full[i] != part[i] {
			t.Fatalf("ref %d: full %+v, partial %+v", i, full[i], part[i])
		}
	}
}

// BenchmarkPodPage reports the cost per pod of one page of 500 pods.
func BenchmarkPodPage(b *testing.B) {
	page := benchPodPage(b)
	b.Logf("page: %d pods, %d bytes of protobuf (%d per pod)", benchPageSize, len(page), len(page)/benchPageSize)
	for _, bc := range []struct {
		name string
		fn   func(testing.TB, []byte, func(string, string) bool, []benchRef) []benchRef
	}{{"full", decodeFull}, {"partial", decodePartial}} {
		b.Run(bc.name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			out := make([]benchRef, 0, benchPageSize)
			for b.Loop() {
				out = bc.fn(b, page, benchScope, out[:0])
			}
			runtime.ReadMemStats(&after)
			pods := float64(b.N) * benchPageSize
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/pods, "ns/pod")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/pods, "B/pod")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/pods, "allocs/pod")
		})
	}
}

// BenchmarkPodPageLive reports what one decoded page keeps alive while the
// reader walks it (the in-flight memory of each concurrent list): the
// PodList for the full decode, nothing but the page bytes for the walk.
func BenchmarkPodPageLive(b *testing.B) {
	page := benchPodPage(b)
	var ms runtime.MemStats
	live := func() uint64 { runtime.GC(); runtime.ReadMemStats(&ms); return ms.HeapAlloc }
	for b.Loop() {
		base := live()
		l := &corev1.PodList{}
		obj, _, err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Decode(page, nil, l)
		if err != nil {
			b.Fatal(err)
		}
		held := live() - base
		runtime.KeepAlive(obj)
		b.ReportMetric(float64(held)/benchPageSize, "liveB/pod")
		b.ReportMetric(float64(len(page))/benchPageSize, "pageB/pod")
	}
}
