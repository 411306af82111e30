package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// dryStub is an in-process stub of the API server, not a real one: it
// serves a fixed namespace "ws" holding a claim in each of the states a
// dry run would act on (to mark, to unmark, to rescue, to rescue without a
// snapshot class, to reap, held, in use), answers every read from it
// (lists as the API server streams them: protobuf for the built-in kinds,
// JSON for the snapshot CRDs; label and field selectors are ignored, every
// claim is in scope), and records every request that is not a read. It
// pins what the orchestration sends; what the API server does with a
// request is the cluster tests' business (docs/development.md).
type dryStub struct {
	now time.Time

	mu     sync.Mutex
	writes []string
	lists  map[string]runtime.Object // path -> the list served there
	snaps  []snapv1.VolumeSnapshot
	conts  []snapv1.VolumeSnapshotContent
	class  []snapv1.VolumeSnapshotClass
}

func newDryStub(now time.Time) *dryStub {
	s := &dryStub{now: now, lists: map[string]runtime.Object{}}
	labels := func(name string, extra map[string]string) map[string]string {
		l := map[string]string{"app": "ide", "workspace": strings.TrimPrefix(name, "ws-")}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	ts := func(d time.Duration) string { return now.Add(-d).UTC().Format(time.RFC3339) }
	claim := func(name, driver string, lab, ann map[string]string) (corev1.PersistentVolumeClaim, corev1.PersistentVolume) {
		pv := "pv-" + name
		c := corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "10",
				CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour)), Labels: labels(name, lab), Annotations: ann},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
				Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		}
		v := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv, UID: types.UID("uid-" + pv)},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}},
				ClaimRef:               &corev1.ObjectReference{Namespace: "ws", Name: name, UID: c.UID}},
			Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
		return c, v
	}
	marked := func(d time.Duration, phase string) (map[string]string, map[string]string) {
		return map[string]string{inventory.LabelPhase: phase}, map[string]string{inventory.AnnotationOrphanedSince: ts(d)}
	}
	var claims []corev1.PersistentVolumeClaim
	var pvs []corev1.PersistentVolume
	add := func(c corev1.PersistentVolumeClaim, v corev1.PersistentVolume) {
		claims, pvs = append(claims, c), append(pvs, v)
	}
	add(claim("ws-grace", "with-class.csi", nil, nil))
	l, a := marked(2*time.Hour, "Orphaned")
	add(claim("ws-inuse", "with-class.csi", l, a))
	l, a = marked(2*time.Hour, "Orphaned")
	add(claim("ws-orphan", "with-class.csi", l, a))
	l, a = marked(2*time.Hour, "Orphaned")
	add(claim("ws-noclass", "no-class.csi", l, a))
	l, a = marked(3*time.Hour, "Rescued")
	add(claim("ws-rescued", "with-class.csi", l, a))
	a = map[string]string{inventory.KeyHold: "true"}
	add(claim("ws-held", "with-class.csi", nil, a))

	rescued := claims[4]
	cut := metav1.NewTime(now.Add(-2 * time.Hour))
	ready, size, content := true, resource.MustParse("1Gi"), "snapcontent-ws-rescued"
	class, src := "with-class", rescued.Name
	s.snaps = []snapv1.VolumeSnapshot{{
		TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ws-rescued-rescue-0123456789", UID: "uid-rescue",
			CreationTimestamp: cut, Labels: map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": "rescued"},
			Annotations: map[string]string{inventory.AnnotationSourceUID: string(rescued.UID), inventory.AnnotationSourceName: rescued.Name,
				inventory.AnnotationOrphanedSince: ts(3 * time.Hour)}},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src}, VolumeSnapshotClassName: &class},
		Status: &snapv1.VolumeSnapshotStatus{ReadyToUse: &ready, CreationTime: &cut, RestoreSize: &size,
			BoundVolumeSnapshotContentName: &content},
	}}
	// An older rescue of the same claim, of an earlier orphan period: the
	// newer one holds its data, so prune would prune it.
	older := s.snaps[0]
	older.ObjectMeta = *older.ObjectMeta.DeepCopy()
	older.Name, older.UID = "ws-rescued-rescue-old0000000", "uid-rescue-old"
	oldCut, oldContent := metav1.NewTime(now.Add(-20*time.Hour)), "snapcontent-ws-rescued-old"
	older.CreationTimestamp = oldCut
	older.Annotations[inventory.AnnotationOrphanedSince] = ts(21 * time.Hour)
	older.Status = &snapv1.VolumeSnapshotStatus{ReadyToUse: &ready, CreationTime: &oldCut, RestoreSize: &size,
		BoundVolumeSnapshotContentName: &oldContent}
	s.snaps = append(s.snaps, older)
	for i, c := range []string{content, oldContent} {
		handle := "h-" + c
		policy := snapv1.VolumeSnapshotContentRetain // the rescue: guard needs it Retain
		if i == 1 {
			policy = snapv1.VolumeSnapshotContentDelete // prune deletes only what goes with its snapshot
		}
		s.conts = append(s.conts, snapv1.VolumeSnapshotContent{
			TypeMeta:   metav1.TypeMeta{Kind: "VolumeSnapshotContent", APIVersion: "snapshot.storage.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: c, UID: types.UID("uid-" + c)},
			Spec: snapv1.VolumeSnapshotContentSpec{DeletionPolicy: policy, Driver: "with-class.csi",
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ws", Name: s.snaps[i].Name, UID: s.snaps[i].UID},
				Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &handle}},
			Status: &snapv1.VolumeSnapshotContentStatus{ReadyToUse: &ready, SnapshotHandle: &handle},
		})
	}
	s.class = []snapv1.VolumeSnapshotClass{{
		TypeMeta:       metav1.TypeMeta{Kind: "VolumeSnapshotClass", APIVersion: "snapshot.storage.k8s.io/v1"},
		ObjectMeta:     metav1.ObjectMeta{Name: "with-class", Annotations: map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver:         "with-class.csi",
		DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
	}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ide-inuse", UID: "uid-pod", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ws-inuse"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}

	lm := metav1.ListMeta{ResourceVersion: "100"}
	s.lists["/api/v1/namespaces/ws/persistentvolumeclaims"] = &corev1.PersistentVolumeClaimList{ListMeta: lm, Items: claims}
	s.lists["/api/v1/persistentvolumes"] = &corev1.PersistentVolumeList{ListMeta: lm, Items: pvs}
	s.lists["/api/v1/namespaces/ws/pods"] = &corev1.PodList{ListMeta: lm, Items: []corev1.Pod{pod}}
	s.lists["/apis/storage.k8s.io/v1/volumeattachments"] = &storagev1.VolumeAttachmentList{ListMeta: lm}
	s.lists["/apis/apps/v1/namespaces/ws/deployments"] = &appsv1.DeploymentList{ListMeta: lm}
	s.lists["/apis/apps/v1/namespaces/ws/replicasets"] = &appsv1.ReplicaSetList{ListMeta: lm}
	s.lists["/apis/apps/v1/namespaces/ws/statefulsets"] = &appsv1.StatefulSetList{ListMeta: lm}
	s.lists["/apis/apps/v1/namespaces/ws/daemonsets"] = &appsv1.DaemonSetList{ListMeta: lm}
	s.lists["/apis/batch/v1/namespaces/ws/jobs"] = &batchv1.JobList{ListMeta: lm}
	s.lists["/apis/batch/v1/namespaces/ws/cronjobs"] = &batchv1.CronJobList{ListMeta: lm}
	return s
}

func (s *dryStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Query().Get("watch") == "true" {
		s.mu.Lock()
		s.writes = append(s.writes, r.Method+" "+r.URL.RequestURI())
		s.mu.Unlock()
		if r.Method == http.MethodGet {
			http.Error(w, "the stub serves no watch", http.StatusMethodNotAllowed)
			return
		}
		// Accepted, so that a write before the fix shows as one rather than
		// as an error that stops the run.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
		return
	}
	p := r.URL.Path
	if p == "/version" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"35","gitVersion":"v1.35.4"}`))
		return
	}
	if l, ok := s.lists[p]; ok {
		s.serveList(w, r, l)
		return
	}
	switch p {
	case "/apis/snapshot.storage.k8s.io/v1/namespaces/ws/volumesnapshots":
		s.serveJSON(w, map[string]any{"kind": "VolumeSnapshotList", "apiVersion": "snapshot.storage.k8s.io/v1",
			"metadata": map[string]any{"resourceVersion": "100"}, "items": s.snaps})
		return
	case "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents":
		s.serveJSON(w, map[string]any{"kind": "VolumeSnapshotContentList", "apiVersion": "snapshot.storage.k8s.io/v1",
			"metadata": map[string]any{"resourceVersion": "100"}, "items": s.conts})
		return
	case "/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses":
		s.serveJSON(w, map[string]any{"kind": "VolumeSnapshotClassList", "apiVersion": "snapshot.storage.k8s.io/v1",
			"metadata": map[string]any{"resourceVersion": "100"}, "items": s.class})
		return
	}
	// One object: an item of a list served here.
	dir, name := p[:strings.LastIndex(p, "/")], p[strings.LastIndex(p, "/")+1:]
	if l, ok := s.lists[dir]; ok {
		items, _ := metaItems(l)
		for _, it := range items {
			if it.GetName() == name {
				s.serveObject(w, r, it)
				return
			}
		}
	}
	for _, vs := range s.snaps {
		if p == "/apis/snapshot.storage.k8s.io/v1/namespaces/ws/volumesnapshots/"+vs.Name {
			s.serveJSON(w, vs)
			return
		}
	}
	for _, vc := range s.conts {
		if p == "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/"+vc.Name {
			s.serveJSON(w, vc)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","reason":"NotFound","code":404,"message":%q}`, p+" not found")
}

// metaItems returns the items of a typed list as objects.
func metaItems(l runtime.Object) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := l.(type) {
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PersistentVolumeList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out, nil
}

func (s *dryStub) serveList(w http.ResponseWriter, r *http.Request, l runtime.Object) {
	s.serveObject(w, r, l)
}

// serveObject answers in protobuf when the client accepts it (the janitor's
// core reads do), else in JSON.
func (s *dryStub) serveObject(w http.ResponseWriter, r *http.Request, obj any) {
	o := obj.(runtime.Object)
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	o = o.DeepCopyObject()
	o.GetObjectKind().SetGroupVersionKind(gvks[0])
	if strings.Contains(r.Header.Get("Accept"), "protobuf") {
		var buf bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(o, &buf); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(buf.Bytes())
		return
	}
	s.serveJSON(w, o)
}

func (s *dryStub) serveJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *dryStub) recorded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// TestDryRunSendsNoWrite (docs/spec.md#dry-run): every command that takes
// --dry-run, run with it against a namespace holding a claim in each state
// it would act on, sends no write request at all (no create, update, patch,
// delete, Lease or Event) and no watch: checked against a stub of the API
// server that records requests (dryStub), so that every path of the
// orchestration is covered in milliseconds. Each command must also have had
// something to do, or the check would prove nothing.
func TestDryRunSendsNoWrite(t *testing.T) {
	stub := newDryStub(time.Now())
	srv := httptest.NewServer(stub)
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: stub, cluster: {server: "`+srv.URL+`"}}]
contexts: [{name: stub, context: {cluster: stub, user: u, namespace: ws}}]
current-context: stub
users: [{name: u, user: {token: t}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"-n", "ws", "-l", "app=ide", "--workspace-label", "workspace", "--kubeconfig", kc,
		"--api-timeout", "10s", "--log-level", "debug"}
	cases := []struct {
		args []string
		want []string // in the report or the log: what it would do
	}{
		{[]string{"scan", "-o", "name"}, []string{"persistentvolumeclaim/ws-grace", "persistentvolumeclaim/ws-inuse"}},
		{[]string{"snapshot"}, []string{"would-snapshot", "no default VolumeSnapshotClass for CSI driver no-class.csi"}},
		{[]string{"reap", "--max-deletion-percent", "100", "-o", "name"}, []string{"persistentvolumeclaim/ws-rescued"}},
		{[]string{"run", "--max-deletion-percent", "100", "--keep-last", "1"}, []string{"would-snapshot", "would-delete"}},
		{[]string{"guard", "--rescue"}, []string{"would create snapshot", "at-risk"}},
		{[]string{"prune", "--keep-last", "1", "--max-deletion-percent", "100", "-o", "name"},
			[]string{"volumesnapshot.snapshot.storage.k8s.io/ws-rescued-rescue-old0000000"}},
	}
	for _, tc := range cases {
		t.Run(tc.args[0], func(t *testing.T) {
			before := len(stub.recorded())
			var out, errOut bytes.Buffer
			args := append(append(append([]string{}, tc.args...), "--dry-run"), common...)
			code := cli.Run(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
				LookupEnv: func(string) (string, bool) { return "", false }})
			if w := stub.recorded()[before:]; len(w) != 0 {
				t.Errorf("%s --dry-run (exit %d) sent %d writes or watches, want none:\n%s", tc.args[0], code, len(w), strings.Join(w, "\n"))
			}
			for _, want := range tc.want {
				if !strings.Contains(out.String(), want) && !strings.Contains(errOut.String(), want) {
					t.Errorf("%s --dry-run (exit %d): the report lacks %q, so the dry run had not all to do:\n%s\n%s",
						tc.args[0], code, want, out.String(), lastLines(errOut.String(), 15))
				}
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
