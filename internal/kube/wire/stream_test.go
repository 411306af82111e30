package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// randomPod returns a pod with a random mix of volumes: claims (some with an
// empty claim name), generic ephemeral volumes and volumes of other kinds.
func randomPod(rng *rand.Rand, i int) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", rng.Intn(3)), Name: fmt.Sprintf("pod-%d", i),
		UID: types.UID(fmt.Sprintf("uid-%d", i)), Labels: map[string]string{"app": "ide"}, ResourceVersion: "7",
		CreationTimestamp: metav1.Unix(int64(1_700_000_000+rng.Intn(1_000_000)), 0)},
		Status: corev1.PodStatus{Phase: []corev1.PodPhase{"", corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[rng.Intn(5)],
			Message: strings.Repeat("m", rng.Intn(20))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: strings.Repeat("x", rng.Intn(300))}}}}}}
	for j := range rng.Intn(5) {
		v := corev1.Volume{Name: fmt.Sprintf("v%d", j)}
		switch rng.Intn(5) {
		case 0:
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("claim-%d", rng.Intn(50)), ReadOnly: rng.Intn(2) == 0}
		case 1:
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{}
		case 2:
			v.Ephemeral = &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}}
		case 3:
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		default:
			v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "claim-1"}}
		}
		p.Spec.Volumes = append(p.Spec.Volumes, v)
	}
	return p
}

// refs is how the reader interpreted a decoded pod before WalkPod.
func refs(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, "claim "+v.PersistentVolumeClaim.ClaimName+" volume "+v.Name)
		case v.Ephemeral != nil:
			out = append(out, "ephemeral "+p.Name+"-"+v.Name)
		}
	}
	return out
}

func walkedRefs(p *Pod) []string {
	var out []string
	for _, v := range p.Volumes {
		if v.Ephemeral {
			out = append(out, "ephemeral "+string(p.Name)+"-"+string(v.Name))
		} else {
			out = append(out, "claim "+string(v.Claim)+" volume "+string(v.Name))
		}
	}
	return out
}

// TestWalkPodAgreesWithTheDecoder checks the field numbers of WalkPod
// against client-go's own decoding, on random pods.
func TestWalkPodAgreesWithTheDecoder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var w Pod
	claims, ephemeral := 0, 0
	for i := range 2000 {
		p := randomPod(rng, i)
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := WalkPod(b, &w); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		if w.Created != p.CreationTimestamp.Unix() || string(w.Phase) != string(p.Status.Phase) {
			t.Fatalf("pod %d: walked created %d phase %q, want %d %q", i, w.Created, w.Phase, p.CreationTimestamp.Unix(), p.Status.Phase)
		}
		if string(w.Namespace) != p.Namespace || string(w.Name) != p.Name || string(w.UID) != string(p.UID) {
			t.Fatalf("pod %d: walked %s/%s %s, want %s/%s %s", i, w.Namespace, w.Name, w.UID, p.Namespace, p.Name, p.UID)
		}
		want, got := refs(&p), walkedRefs(&w)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("pod %d: walked %q, want %q", i, got, want)
		}
		for _, r := range want {
			if strings.HasPrefix(r, "ephemeral") {
				ephemeral++
			} else {
				claims++
			}
		}
	}
	if claims < 500 || ephemeral < 500 {
		t.Fatalf("the random pods named only %d claims and %d ephemeral volumes", claims, ephemeral)
	}
}

func TestWalkPodRejectsGarbage(t *testing.T) {
	p := randomPod(rand.New(rand.NewSource(2)), 1)
	b, _ := p.Marshal()
	var w Pod
	// A length that runs past the end of the message.
	if err := WalkPod(append([]byte{0x12, 0xff, 0x7f}, b...), &w); err == nil {
		t.Error("a field longer than the message was accepted")
	}
}

// encode returns obj as the API server sends it.
func encode(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func podList(t *testing.T, n int, cont string) ([]byte, []corev1.Pod) {
	rng := rand.New(rand.NewSource(3))
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "99", Continue: cont}}
	for i := range n {
		l.Items = append(l.Items, randomPod(rng, i))
	}
	l.APIVersion, l.Kind = "v1", "PodList"
	return encode(t, l), l.Items
}

func readPods(body []byte, kind string) ([]string, string, error) {
	var names []string
	cont, err := ReadProtoList(bytes.NewReader(body), kind, func(b []byte) error {
		var p corev1.Pod
		if err := p.Unmarshal(b); err != nil {
			return err
		}
		names = append(names, p.Name)
		return nil
	})
	return names, cont, err
}

func TestReadProtoList(t *testing.T) {
	body, pods := podList(t, 40, "next-page")
	names, cont, err := readPods(body, "PodList")
	if err != nil {
		t.Fatal(err)
	}
	if cont != "next-page" || len(names) != len(pods) {
		t.Fatalf("read %d pods and continue %q, want %d and %q", len(names), cont, len(pods), "next-page")
	}
	for i := range pods {
		if names[i] != pods[i].Name {
			t.Fatalf("item %d is %s, want %s", i, names[i], pods[i].Name)
		}
	}
	empty := encode(t, &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}})
	if names, _, err := readPods(empty, "PodList"); err != nil || len(names) != 0 {
		t.Fatalf("empty list: %v, %v", names, err)
	}
}

// TestReadProtoListFailsClosed: a response cut at any byte, the wrong kind,
// or anything after the list is an error, never a shorter list. (The
// envelope ends with two empty fields after the list, contentEncoding and
// contentType; a cut among those loses nothing and may be read whole.)
func TestReadProtoListFailsClosed(t *testing.T) {
	body, pods := podList(t, 6, "")
	for n := range len(body) {
		names, _, err := readPods(body[:n], "PodList")
		if err == nil && (len(names) != len(pods) || n < len(body)-4) {
			t.Fatalf("a response cut after %d of %d bytes was read as a list of %d pods", n, len(body), len(names))
		}
		if err == nil {
			continue
		}
		if n > len(protoMagic)+8 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut after %d bytes: %v, want a truncation (retried)", n, err)
		}
	}
	if _, _, err := readPods(body, "PersistentVolumeClaimList"); err == nil || !strings.Contains(err.Error(), `the response is a "PodList"`) {
		t.Errorf("wrong kind: %v", err)
	}
	if _, _, err := readPods(append(bytes.Clone(body), 0), "PodList"); err == nil {
		t.Error("a byte after the list was accepted")
	}
	if _, _, err := readPods([]byte(`{"kind":"PodList","items":[]}`), "PodList"); err == nil || !strings.Contains(err.Error(), "not protobuf") {
		t.Errorf("JSON body: %v", err)
	}
	if _, _, err := readPods([]byte(protoMagic), "PodList"); err == nil || !strings.Contains(err.Error(), "no list") {
		t.Errorf("envelope without a list: %v", err)
	}
}

func snapshotListJSON(t *testing.T, n int, cont string) []byte {
	l := snapv1.VolumeSnapshotList{TypeMeta: metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshotList"},
		ListMeta: metav1.ListMeta{Continue: cont, ResourceVersion: "5"}}
	for i := range n {
		claim := fmt.Sprintf("c-%d", i)
		l.Items = append(l.Items, snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("s-%d", i)},
			Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}}})
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readSnapshots(body []byte, kind string) ([]string, string, error) {
	var names []string
	cont, err := ReadJSONList(bytes.NewReader(body), kind, func(dec *json.Decoder) error {
		var vs snapv1.VolumeSnapshot
		if err := dec.Decode(&vs); err != nil {
			return err
		}
		names = append(names, vs.Name+"<-"+*vs.Spec.Source.PersistentVolumeClaimName)
		return nil
	})
	return names, cont, err
}

func TestReadJSONList(t *testing.T) {
	names, cont, err := readSnapshots(snapshotListJSON(t, 5, "more"), "VolumeSnapshotList")
	if err != nil || cont != "more" || fmt.Sprint(names) != "[s-0<-c-0 s-1<-c-1 s-2<-c-2 s-3<-c-3 s-4<-c-4]" {
		t.Fatalf("read %v, continue %q, %v", names, cont, err)
	}
	for _, body := range []string{
		`{"kind":"VolumeSnapshotList","apiVersion":"snapshot.storage.k8s.io/v1","metadata":{},"items":[]}`,
		`{"kind":"VolumeSnapshotList","items":null}`,
	} {
		if names, _, err := readSnapshots([]byte(body), "VolumeSnapshotList"); err != nil || len(names) != 0 {
			t.Errorf("%s: %v, %v", body, names, err)
		}
	}
}

func TestReadJSONListFailsClosed(t *testing.T) {
	body := snapshotListJSON(t, 4, "")
	for n := range len(body) {
		if names, _, err := readSnapshots(body[:n], "VolumeSnapshotList"); err == nil {
			t.Fatalf("a response cut after %d of %d bytes was read as a list of %d", n, len(body), len(names))
		}
	}
	for name, bad := range map[string]string{
		"no items":      `{"kind":"VolumeSnapshotList","metadata":{}}`,
		"wrong kind":    `{"kind":"VolumeSnapshotContentList","items":[]}`,
		"items twice":   `{"kind":"VolumeSnapshotList","items":[],"items":[]}`,
		"data after":    `{"kind":"VolumeSnapshotList","items":[]}{}`,
		"items object":  `{"kind":"VolumeSnapshotList","items":{}}`,
		"not an object": `[]`,
		"a Status":      `{"kind":"Status","status":"Failure","code":500}`,
	} {
		if _, _, err := readSnapshots([]byte(bad), "VolumeSnapshotList"); err == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
}

// TestStreamIdleTimesOut: a server that stops sending in the middle of a
// list fails the attempt after the idle time, as a transient error (retried),
// while one that keeps sending slowly is not cut.
func TestStreamIdleTimesOut(t *testing.T) {
	body, pods := podList(t, 50, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		f := w.(http.Flusher)
		switch r.URL.Path {
		case "/stall":
			_, _ = w.Write(body[:len(body)/2])
			f.Flush()
			<-r.Context().Done()
		case "/slow":
			for i := 0; i < len(body); i += len(body) / 10 {
				_, _ = w.Write(body[i:min(i+len(body)/10, len(body))])
				f.Flush()
				time.Sleep(100 * time.Millisecond)
			}
		}
	}))
	defer srv.Close()
	c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) (int, error) {
		n := 0
		_, err := Stream(context.Background(), c.Get().AbsPath(path), "application/vnd.kubernetes.protobuf", 300*time.Millisecond,
			func(body io.Reader) (string, error) {
				return ReadProtoList(body, "PodList", func([]byte) error { n++; return nil })
			})
		return n, err
	}
	start := time.Now()
	_, err = read("/stall")
	if err == nil || !errors.Is(err, ErrIdle) {
		t.Fatalf("stalled stream: %v", err)
	}
	// The retry policy retries a request that timed out (kube.Transient;
	// its tests hold an idle stream's error).
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an idle stream is not a timeout, so it would not be retried: %v", err)
	}
	t.Logf("stalled stream failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	// The slow stream takes about a second, with gaps shorter than the idle time.
	n, err := read("/slow")
	if err != nil || n != len(pods) {
		t.Fatalf("slow stream: %d pods, %v", n, err)
	}
}

// TestCorruptInnerMessagesFail: lengths that are right on the outside but
// wrong inside a message are errors, never a field read as absent (a pod's
// claim read as "" would drop its reference; a continue token read as ""
// would end a paginated list early).
func TestCorruptInnerMessagesFail(t *testing.T) {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ide"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// claimName is field 1 of length 4 ("data"): make it 5, one past the end
	// of its enclosing message, whose own length stays right.
	i := bytes.Index(b, []byte("\x0a\x04data"))
	if i < 0 {
		t.Fatal("no claimName in the encoded pod")
	}
	bad := bytes.Clone(b)
	bad[i+1] = 5
	var w Pod
	if err := WalkPod(bad, &w); err == nil {
		t.Fatalf("a corrupt claim source was walked as %q", walkedRefs(&w))
	}
	if err := (&corev1.Pod{}).Unmarshal(bad); err == nil {
		t.Fatal("client-go accepts the corrupt pod too: the test proves nothing")
	}

	body, _ := podList(t, 2, "next")
	i = bytes.Index(body, []byte("\x1a\x04next"))
	if i < 0 {
		t.Fatal("no continue token in the encoded list")
	}
	body[i+1] = 5
	if _, cont, err := readPods(body, "PodList"); err == nil {
		t.Fatalf("a corrupt list metadata was read, continue %q", cont)
	}
}
