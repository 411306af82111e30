package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
