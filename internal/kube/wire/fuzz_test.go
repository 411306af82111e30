package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// Fuzz targets for what the scan reads off the wire: the pods and volumes
// it walks (FuzzWalkPod, FuzzWalkPV; the claims' walk is FuzzWalkClaim in
// internal/kube) and the list envelopes of every kind it lists
// (FuzzReadProtoList, FuzzReadJSONList). Whatever the bytes, nothing
// panics, and what the walk or the envelope reader accepts is what
// client-go's decoder reads: a field read otherwise could hide a claim's
// user or a list's item. Seed corpora are in testdata/fuzz/<FuzzName>/ when
// a fuzzer found something; `go test` runs them as regression tests.

func marshal(t testing.TB, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzWalkPod: a pod the walk accepts and the decoder reads is the same
// pod: namespace, name, UID, phase, creation second and every claim its
// volumes name.
//
//	go test -run '^$' -fuzz '^FuzzWalkPod$' -fuzztime 30s ./internal/kube/wire/
func FuzzWalkPod(f *testing.F) {
	rng := rand.New(rand.NewSource(5))
	for i := range 8 {
		p := randomPod(rng, i)
		f.Add(marshal(f, &p))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w Pod
		werr := WalkPod(b, &w)
		var p corev1.Pod
		if werr != nil || p.Unmarshal(b) != nil {
			return
		}
		// Created is 0 when the pod has no creation time (the zero time).
		created, want := w.Created, p.CreationTimestamp.Unix()
		if time.Unix(created, 0).UTC().IsZero() {
			created = 0
		}
		if p.CreationTimestamp.IsZero() {
			want = 0
		}
		if string(w.Namespace) != p.Namespace || string(w.Name) != p.Name || string(w.UID) != string(p.UID) ||
			string(w.Phase) != string(p.Status.Phase) || created != want {
			t.Fatalf("walked %q/%q %q %q %d, decoded %q/%q %q %q %d", w.Namespace, w.Name, w.UID, w.Phase, w.Created,
				p.Namespace, p.Name, p.UID, p.Status.Phase, want)
		}
		if want, got := refs(&p), walkedRefs(&w); fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("walked %q, decoded %q", got, want)
		}
	})
}

// FuzzWalkPV: a volume the walk accepts and the decoder reads is the same
// volume: name, reclaim policy, and whether and which CSI volume it is.
//
//	go test -run '^$' -fuzz '^FuzzWalkPV$' -fuzztime 30s ./internal/kube/wire/
func FuzzWalkPV(f *testing.F) {
	rng := rand.New(rand.NewSource(6))
	for i := range 8 {
		pv := randomPV(rng, i)
		f.Add(marshal(f, &pv))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var w PV
		werr := WalkPV(b, &w)
		var pv corev1.PersistentVolume
		if werr != nil || pv.Unmarshal(b) != nil {
			return
		}
		csi := pv.Spec.CSI != nil
		if string(w.Name) != pv.Name || string(w.ReclaimPolicy) != string(pv.Spec.PersistentVolumeReclaimPolicy) || w.CSI != csi {
			t.Fatalf("walked %q %q csi %v, decoded %q %q csi %v", w.Name, w.ReclaimPolicy, w.CSI, pv.Name, pv.Spec.PersistentVolumeReclaimPolicy, csi)
		}
		if csi && (string(w.Driver) != pv.Spec.CSI.Driver || string(w.Handle) != pv.Spec.CSI.VolumeHandle) {
			t.Fatalf("walked %q %q, decoded %q %q", w.Driver, w.Handle, pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
		}
	})
}

// protoKinds are the lists the scan reads as protobuf (internal/kube:
// storage.go, referrers.go), each with a list of two items.
var protoKinds = []runtime.Object{
	&corev1.PersistentVolumeClaimList{Items: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "b", Labels: map[string]string{"workspace": "b"}}}}},
	&corev1.PersistentVolumeList{Items: []corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pv-b"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
			CSI: &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "h"}}}}}},
	&storagev1.VolumeAttachmentList{Items: []storagev1.VolumeAttachment{{ObjectMeta: metav1.ObjectMeta{Name: "va-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "va-b"}, Status: storagev1.VolumeAttachmentStatus{Attached: true}}}},
	&corev1.PodList{Items: []corev1.Pod{randomPod(rand.New(rand.NewSource(7)), 1), randomPod(rand.New(rand.NewSource(8)), 2)}},
	&appsv1.DeploymentList{Items: []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, {ObjectMeta: metav1.ObjectMeta{Name: "e"}}}},
	&appsv1.ReplicaSetList{Items: []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, {ObjectMeta: metav1.ObjectMeta{Name: "s"}}}},
	&appsv1.DaemonSetList{Items: []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "ds"}}, {ObjectMeta: metav1.ObjectMeta{Name: "dt"}}}},
	&appsv1.StatefulSetList{Items: []appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "ss"}}, {ObjectMeta: metav1.ObjectMeta{Name: "st"}}}},
	&batchv1.JobList{Items: []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: "j"}}, {ObjectMeta: metav1.ObjectMeta{Name: "k"}}}},
	&batchv1.CronJobList{Items: []batchv1.CronJob{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, {ObjectMeta: metav1.ObjectMeta{Name: "d"}}}},
}

// encodeTB returns obj as the API server sends it (encode, for a fuzzer).
func encodeTB(t testing.TB, ser runtime.Encoder, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := ser.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// kindOf is a list's kind as the scheme names it ("PodList").
func kindOf(t testing.TB, obj runtime.Object) string {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		t.Fatalf("%T: %v", obj, err)
	}
	return gvks[0].Kind
}

// FuzzReadProtoList: for every kind the scan lists as protobuf, a response
// ReadProtoList accepts and client-go's serializer decodes holds the same
// items, in order, and the same continue token: an envelope never loses or
// invents an item.
//
//	go test -run '^$' -fuzz '^FuzzReadProtoList$' -fuzztime 30s ./internal/kube/wire/
func FuzzReadProtoList(f *testing.F) {
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for i := range protoKinds {
		for _, n := range []int{2, 0} {
			l := protoKinds[i].DeepCopyObject()
			kind := kindOf(f, l)
			if gvks, _, err := scheme.Scheme.ObjectKinds(l); err == nil {
				l.GetObjectKind().SetGroupVersionKind(gvks[0])
			}
			if n == 0 && meta.SetList(l, nil) != nil {
				f.Fatal("empty list")
			}
			la, err := meta.ListAccessor(l)
			if err != nil {
				f.Fatal(err)
			}
			la.SetContinue(fmt.Sprintf("next-%d-%d", i, n))
			body := encodeTB(f, ser, l)
			// The seeds are read whole: a seed the reader refuses explores nothing.
			read := 0
			if _, err := ReadProtoList(bytes.NewReader(body), kind, func([]byte) error { read++; return nil }); err != nil || read != n {
				f.Fatalf("seed %s of %d items: read %d, %v", kind, n, read, err)
			}
			f.Add(uint8(i), body)
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		list := protoKinds[int(k)%len(protoKinds)]
		kind := kindOf(t, list)
		var items [][]byte
		cont, err := ReadProtoList(bytes.NewReader(body), kind, func(b []byte) error {
			items = append(items, bytes.Clone(b))
			return nil
		})
		if err != nil {
			return
		}
		obj, _, derr := ser.Decode(body, nil, nil)
		if derr != nil {
			return
		}
		if kindOf(t, obj) != kind {
			t.Fatalf("read as a %s, decoded as a %s", kind, kindOf(t, obj))
		}
		want, err := meta.ExtractList(obj)
		if err != nil {
			t.Fatal(err)
		}
		la, err := meta.ListAccessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != len(want) || cont != la.GetContinue() {
			t.Fatalf("read %d items, continue %q; decoded %d, continue %q", len(items), cont, len(want), la.GetContinue())
		}
		for i := range items {
			got := reflect.New(reflect.TypeOf(want[i]).Elem()).Interface().(interface{ Unmarshal([]byte) error })
			if err := got.Unmarshal(items[i]); err != nil {
				t.Fatalf("item %d read does not decode: %v", i, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("item %d read as %+v, decoded as %+v", i, got, want[i])
			}
		}
	})
}

// jsonKinds are the lists the scan reads as JSON (the snapshot CRDs).
var jsonKinds = []struct {
	kind string
	list func() any
	item func() any
}{
	{"VolumeSnapshotList", func() any { return &snapv1.VolumeSnapshotList{} }, func() any { return &snapv1.VolumeSnapshot{} }},
	{"VolumeSnapshotContentList", func() any { return &snapv1.VolumeSnapshotContentList{} }, func() any { return &snapv1.VolumeSnapshotContent{} }},
}

// FuzzReadJSONList: for both snapshot kinds, a response ReadJSONList
// accepts and encoding/json decodes holds the same items, in order, and
// the same continue token.
//
//	go test -run '^$' -fuzz '^FuzzReadJSONList$' -fuzztime 30s ./internal/kube/wire/
func FuzzReadJSONList(f *testing.F) {
	f.Add(uint8(0), []byte(`{"kind":"VolumeSnapshotList","apiVersion":"snapshot.storage.k8s.io/v1","metadata":{"continue":"more"},`+
		`"items":[{"metadata":{"namespace":"ns","name":"s-0"},"spec":{"source":{"persistentVolumeClaimName":"c-0"}}},{"metadata":{"name":"s-1"}}]}`))
	f.Add(uint8(0), []byte(`{"kind":"VolumeSnapshotList","items":null}`))
	f.Add(uint8(1), []byte(`{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshotContentList","metadata":{"continue":"c"},`+
		`"items":[{"metadata":{"name":"x"},"spec":{"deletionPolicy":"Retain","volumeSnapshotRef":{"uid":"u"}}},{"metadata":{"name":"y"}}]}`))
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		jk := jsonKinds[int(k)%len(jsonKinds)]
		var items []any
		cont, err := ReadJSONList(bytes.NewReader(body), jk.kind, func(dec *json.Decoder) error {
			it := jk.item()
			if err := dec.Decode(it); err != nil {
				return err
			}
			items = append(items, it)
			return nil
		})
		if err != nil {
			return
		}
		l := jk.list()
		if json.Unmarshal(body, l) != nil {
			return
		}
		var kindOK struct{ Kind string }
		_ = json.Unmarshal(body, &kindOK)
		if kindOK.Kind != jk.kind {
			t.Fatalf("read as a %s, the body says %q", jk.kind, kindOK.Kind)
		}
		v := reflect.ValueOf(l).Elem()
		want := v.FieldByName("Items")
		gotCont := v.FieldByName("ListMeta").Interface().(metav1.ListMeta).Continue
		if len(items) != want.Len() || cont != gotCont {
			t.Fatalf("read %d items, continue %q; decoded %d, continue %q", len(items), cont, want.Len(), gotCont)
		}
		for i := range items {
			if w := want.Index(i).Addr().Interface(); !reflect.DeepEqual(items[i], w) {
				t.Fatalf("item %d read as %+v, decoded as %+v", i, items[i], w)
			}
		}
	})
}
