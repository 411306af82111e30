package kube

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// A server newer than the client (v1.38 and later) may add fields anywhere
// in the objects the janitor reads. The decoders the scan uses must skip
// them and keep every piece of evidence they carry beside them: the marks,
// the Unused condition, the phase, the capacity, a snapshot's source,
// readiness and cut time. (The pod decoder's test is
// wire.TestWalkPodSkipsFieldsOfNewerServers; a group or version the
// server does not serve is an error with a hint, see TestBadInput's
// "snapshot CRDs absent".)

func ptrTo[T any](v T) *T { return &v }

// same compares two inventory values by their JSON: times are equal when
// they are the same instant, whatever location a decoder gave them.
func same(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// newerClaim is a claim with every field the inventory keeps.
func newerClaim() *corev1.PersistentVolumeClaim {
	t0 := metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ws-a", UID: "u-1", ResourceVersion: "42",
			CreationTimestamp: t0,
			Labels:            map[string]string{"workspace": "alice", inventory.KeyHold: "true"},
			Annotations: map[string]string{inventory.AnnotationOrphanedSince: "2026-12-01T10:00:00Z",
				inventory.AnnotationLastUsed: "2026-12-01T09:30:00Z",
				"other.example/key":          "not kept"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u-p"}}},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptrTo("fast"),
			VolumeAttributesClassName: ptrTo("gold")},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			Conditions: []corev1.PersistentVolumeClaimCondition{{Type: inventory.ConditionUnused,
				Status: corev1.ConditionTrue, LastTransitionTime: t0}}},
	}
}

// unknownFields returns b with fields appended whose numbers no release of
// the message has used, of every wire type a new field could have.
func unknownFields(b []byte) []byte {
	b = protowire.AppendTag(b, 901, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("a field of a newer server"))
	b = protowire.AppendTag(b, 902, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	b = protowire.AppendTag(b, 903, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 7)
	return b
}

func TestClaimOfANewerServerKeepsItsEvidence(t *testing.T) {
	want := Claim(newerClaim(), "workspace")
	c := newerClaim()
	meta, err := c.ObjectMeta.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := c.Spec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	status, err := c.Status.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Unknown fields inside metadata, spec and status, and on the claim
	// itself (PersistentVolumeClaim: 1 metadata, 2 spec, 3 status).
	var b []byte
	for i, part := range [][]byte{meta, spec, status} {
		b = protowire.AppendTag(b, protowire.Number(i+1), protowire.BytesType)
		b = protowire.AppendBytes(b, unknownFields(part))
	}
	b = unknownFields(b)

	var got inventory.Claim
	decode := decoded(func(p *corev1.PersistentVolumeClaim) { got = Claim(p, "workspace") })
	if err := decode(b); err != nil {
		t.Fatalf("a claim with fields of a newer server: %v", err)
	}
	if !same(t, got, want) {
		t.Fatalf("a claim with fields of a newer server reads as\n%+v\nwant\n%+v", got, want)
	}
	if got.Unused == nil || got.Annotations[inventory.AnnotationOrphanedSince] == "" || got.Capacity == 0 {
		t.Fatalf("evidence lost: %+v", got)
	}
	// The scan's own read of claims (wire.WalkClaim) skips them too.
	var w wire.Claim
	walked, err := walkedClaim(b, Scope{WorkspaceLabel: "workspace"}, &w)
	if err != nil {
		t.Fatalf("a claim with fields of a newer server, walked: %v", err)
	}
	if !same(t, walked, want) {
		t.Fatalf("a claim with fields of a newer server walks as\n%+v\nwant\n%+v", walked, want)
	}
}

func TestSnapshotOfANewerServerKeepsItsEvidence(t *testing.T) {
	cut := metav1.NewTime(time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC))
	vs := snapv1.VolumeSnapshot{
		TypeMeta: metav1.TypeMeta{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ws-a-rescue", UID: "u-s",
			Labels: map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": "alice"},
			Annotations: map[string]string{inventory.AnnotationSourceUID: "u-1",
				inventory.AnnotationOrphanedSince: "2026-12-01T10:00:00Z"}},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptrTo("ws-a")},
			VolumeSnapshotClassName: ptrTo("csi")},
		Status: &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptrTo("c-1"), CreationTime: &cut,
			ReadyToUse: ptrTo(true), RestoreSize: ptrTo(resource.MustParse("5Gi"))},
	}
	want := Snapshot(&vs, "workspace")

	raw, err := json.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	// Fields a newer snapshot API could add, at the top, in spec, status
	// and metadata, with shapes the client has no type for.
	obj["newTopLevel"] = map[string]any{"a": []any{1, "two", nil}}
	obj["spec"].(map[string]any)["groupSnapshotRef"] = map[string]any{"name": "g-1"}
	obj["spec"].(map[string]any)["source"].(map[string]any)["volumeGroupSnapshotName"] = "g-1"
	st := obj["status"].(map[string]any)
	st["volumeGroupSnapshotName"] = "g-1"
	st["conditions"] = []any{map[string]any{"type": "Ready", "status": "True"}}
	obj["metadata"].(map[string]any)["newMetadataField"] = true
	item, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	list := `{"kind":"VolumeSnapshotList","apiVersion":"snapshot.storage.k8s.io/v1","metadata":{"newListField":1},"items":[` +
		string(item) + `],"newAfterItems":{"x":[1,2]}}`

	var got []inventory.Snapshot
	_, err = wire.ReadJSONList(strings.NewReader(list), "VolumeSnapshotList",
		decodedJSON(func(s *snapv1.VolumeSnapshot) { got = append(got, Snapshot(s, "workspace")) }))
	if err != nil {
		t.Fatalf("a snapshot list with fields of a newer server: %v", err)
	}
	if len(got) != 1 || !same(t, got[0], want) {
		t.Fatalf("a snapshot with fields of a newer server reads as\n%+v\nwant\n%+v", got, want)
	}
	if !got[0].ReadyToUse || got[0].CutTime == nil || got[0].SourceClaim != "ws-a" || got[0].RestoreSize == 0 {
		t.Fatalf("evidence lost: %+v", got[0])
	}
	if !bytes.Contains(item, []byte("volumeGroupSnapshotName")) {
		t.Fatal("the test's newer fields were not added")
	}
}
