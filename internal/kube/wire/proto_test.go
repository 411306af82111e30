package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

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
