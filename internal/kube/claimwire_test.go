package kube

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// The scan reads claims with wire.WalkClaim and reader.wireClaim; the
// re-check, the rescue and every test before it with the decoder and Claim.
// The janitor deletes claims on what either reads, so the two must agree on
// every claim the API server can send, and on malformed bytes the walk must
// refuse whatever it cannot read as the decoder does.

// claimScopes are the reader's settings the tests convert with: the
// workspace label, the labels notifications keep (including ones the
// classifier reads too), and neither.
var claimScopes = []Scope{
	{WorkspaceLabel: "workspace", NotifyLabels: []string{"owner", "team", inventory.KeyHold}},
	{WorkspaceLabel: "workspace"},
	{},
}

// randomClaim is a claim with a random subset of every field the inventory
// keeps, and of fields it skips (managedFields, finalizers, the spec's
// requests, data sources, the status's other maps).
func randomClaim(rng *rand.Rand, i int) *corev1.PersistentVolumeClaim {
	pick := func(s ...string) string { return s[rng.Intn(len(s))] }
	stamp := func() metav1.Time {
		if rng.Intn(5) == 0 {
			return metav1.Time{}
		}
		return metav1.NewTime(time.Unix(1767225600+rng.Int63n(1e8), rng.Int63n(1e9)))
	}
	p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: pick("ws", "team-a", ""), Name: fmt.Sprintf("claim-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", rng.Intn(1e6))),
		ResourceVersion: fmt.Sprint(rng.Intn(1e7)), CreationTimestamp: stamp(), Generation: rng.Int63n(3),
		Labels:      randomMap(rng, "workspace", inventory.LabelPhase, inventory.KeyHold, "owner", "team", "app"),
		Annotations: randomMap(rng, inventory.AnnotationOrphanedSince, inventory.AnnotationLastUsed, inventory.AnnotationReapAfter, inventory.AnnotationSnoozeUntil, "pvc-janitor.io", "other.example/key", "kubectl.kubernetes.io/last-applied-configuration"),
	}}
	if rng.Intn(3) == 0 {
		p.Finalizers = []string{"kubernetes.io/pvc-protection"}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}}}
	}
	if rng.Intn(3) == 0 {
		t := stamp()
		p.DeletionTimestamp = &t
	}
	for range rng.Intn(3) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: pick("v1", "apps/v1", ""), Kind: pick("Pod", "StatefulSet"),
			Name: fmt.Sprintf("o-%d", rng.Intn(9)), UID: types.UID(fmt.Sprintf("ou-%d", rng.Intn(9))), Controller: ptrTo(rng.Intn(2) == 0)})
	}
	randomClaimSpec(rng, &p.Spec, pick)
	randomClaimStatus(rng, &p.Status, pick, stamp)
	return p
}

// randomMap draws a map from keys, with empty values now and then.
func randomMap(rng *rand.Rand, keys ...string) map[string]string {
	if rng.Intn(6) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, k := range keys {
		if rng.Intn(2) == 0 {
			m[k] = []string{"", "true", "alice", "2026-12-01T10:00:00Z", "reaping"}[rng.Intn(5)]
		}
	}
	return m
}

func randomClaimSpec(rng *rand.Rand, s *corev1.PersistentVolumeClaimSpec, pick func(...string) string) {
	s.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	s.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(pick("1Gi", "10G"))}
	s.VolumeName = pick("", "pv-1", "pvc-0b9d1f3e")
	if rng.Intn(3) > 0 {
		s.StorageClassName = ptrTo(pick("", "fast", "csi-hostpath"))
	}
	if rng.Intn(3) == 0 {
		s.VolumeAttributesClassName = ptrTo(pick("", "gold"))
	}
	if rng.Intn(4) == 0 {
		s.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptrTo("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
		s.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptrTo("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	}
	if rng.Intn(4) == 0 {
		s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"workspace": "alice"}}
	}
}

func randomClaimStatus(rng *rand.Rand, s *corev1.PersistentVolumeClaimStatus, pick func(...string) string, stamp func() metav1.Time) {
	s.Phase = corev1.PersistentVolumeClaimPhase(pick("", "Bound", "Pending", "Lost"))
	if rng.Intn(4) > 0 {
		s.Capacity = corev1.ResourceList{}
		if rng.Intn(5) > 0 {
			s.Capacity[corev1.ResourceStorage] = resource.MustParse(pick("1Gi", "5Gi", "1.5Gi", "500M", "100m", "0", "1E"))
		}
		if rng.Intn(3) == 0 {
			s.Capacity["example.com/other"] = resource.MustParse("3")
		}
		s.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	}
	for range rng.Intn(4) {
		s.Conditions = append(s.Conditions, corev1.PersistentVolumeClaimCondition{
			Type:   corev1.PersistentVolumeClaimConditionType(pick(inventory.ConditionUnused, "Resizing", "FileSystemResizePending", "unused")),
			Status: corev1.ConditionStatus(pick("True", "False", "Unknown", "")), LastProbeTime: stamp(), LastTransitionTime: stamp(),
			Reason: "r", Message: "m"})
	}
	if rng.Intn(4) == 0 {
		s.CurrentVolumeAttributesClassName = ptrTo("silver")
		s.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{TargetVolumeAttributesClassName: "gold", Status: corev1.PersistentVolumeClaimModifyVolumeInProgress}
	}
}

// decodedClaim reads a claim as the scan did before wire.WalkClaim: the
// decoder, then Claim and the notification labels.
func decodedClaim(b []byte, s Scope) (inventory.Claim, error) {
	var got inventory.Claim
	err := decoded(func(p *corev1.PersistentVolumeClaim) {
		got = Claim(p, s.WorkspaceLabel)
		if len(s.NotifyLabels) > 0 {
			got.Labels.Notify = inventory.KeepLabels(p.Labels, s.NotifyLabels)
		}
	})(b)
	return got, err
}

// walkedClaim reads a claim as the scan does now.
func walkedClaim(b []byte, s Scope, w *wire.Claim) (inventory.Claim, error) {
	r := &reader{s: s.withDefaults(), intern: map[string]string{}}
	if err := wire.WalkClaim(b, w); err != nil {
		return inventory.Claim{}, err
	}
	return r.wireClaim(w)
}

func marshalClaim(t testing.TB, p *corev1.PersistentVolumeClaim) []byte {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWalkClaimAgreesWithTheDecoder: on random claims, and on two claims'
// bytes one after the other (which the decoder merges: maps and lists
// joined, a field of the second replacing the first's), the walk reads
// exactly what the decoder and Claim read.
func TestWalkClaimAgreesWithTheDecoder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var w wire.Claim
	var unused, deleting, owned int
	prev := marshalClaim(t, randomClaim(rng, 0))
	for i := range 3000 {
		b := marshalClaim(t, randomClaim(rng, i))
		for _, in := range [][]byte{b, append(bytes.Clone(prev), b...)} {
			for _, s := range claimScopes {
				want, err := decodedClaim(in, s)
				if err != nil {
					t.Fatalf("claim %d: the decoder: %v", i, err)
				}
				got, err := walkedClaim(in, s, &w)
				if err != nil {
					t.Fatalf("claim %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("claim %d (%d bytes) walks as\n%+v\nthe decoder reads\n%+v", i, len(in), got, want)
				}
				if want.Unused != nil {
					unused++
				}
				if want.DeletionTimestamp != nil {
					deleting++
				}
				if len(want.Owners) > 0 {
					owned++
				}
			}
		}
		prev = b
	}
	if unused < 1000 || deleting < 1000 || owned < 1000 {
		t.Fatalf("the random claims cover too little: %d Unused, %d deleting, %d owned", unused, deleting, owned)
	}
}

// TestWalkClaimReadsTheEvidence pins the fields a hand-written claim
// carries, so that the walk and the decoder cannot agree on losing them.
func TestWalkClaimReadsTheEvidence(t *testing.T) {
	p := newerClaim()
	del := metav1.NewTime(time.Unix(1767225600, 0))
	p.DeletionTimestamp = &del
	var w wire.Claim
	got, err := walkedClaim(marshalClaim(t, p), claimScopes[0], &w)
	if err != nil {
		t.Fatal(err)
	}
	want := inventory.Claim{Namespace: "ns", Name: "ws-a", UID: "u-1", ResourceVersion: "42",
		CreationTimestamp: p.CreationTimestamp.Local(), DeletionTimestamp: ptrTo(del.Local()),
		Labels:      inventory.ClaimLabels{Workspace: "alice", Hold: "true", HasHold: true, Notify: map[string]string{inventory.KeyHold: "true"}},
		Annotations: map[string]string{inventory.AnnotationOrphanedSince: "2026-12-01T10:00:00Z", inventory.AnnotationLastUsed: "2026-12-01T09:30:00Z"},
		Phase:       "Bound", VolumeName: "pv-1",
		Unused:   &inventory.Condition{Status: "True", LastTransitionTime: p.CreationTimestamp.Local()},
		Owners:   []inventory.OwnerRef{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u-p"}},
		Capacity: 5 << 30, StorageClass: "fast", VolumeAttributesClass: "gold"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("walked\n%+v\nwant\n%+v", got, want)
	}
}

// TestWalkClaimRejectsGarbage: a claim cut anywhere the decoder refuses is
// refused; with random bytes changed, the walk never panics and never
// reads a claim other than the decoder's. Each may refuse what the other
// reads: the walk a map entry's key overrunning its entry (the decoder
// reads on past it), the decoder an error inside a field the walk skips
// unread (managedFields, a quantity of spec.resources, lastProbeTime).
func TestWalkClaimRejectsGarbage(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var w wire.Claim
	b := marshalClaim(t, randomClaim(rng, 1))
	for cut := 1; cut < len(b); cut++ {
		if _, err := decodedClaim(b[:cut], claimScopes[0]); err == nil {
			continue // a prefix that is itself a valid message
		}
		if err := wire.WalkClaim(b[:cut], &w); err == nil {
			t.Errorf("cut at %d of %d: the decoder refuses it, WalkClaim accepted it", cut, len(b))
		}
	}
	var n [3]int
	for i := range 20000 {
		in := mutate(rng, marshalClaim(t, randomClaim(rng, i)))
		if k := compareReads(t, in, claimScopes[0]); k >= 0 {
			n[k]++
		}
	}
	t.Logf("mutated claims read by both: %d; by the walk only: %d; by the decoder only: %d", n[0], n[1], n[2])
	if n[0] < 1000 || n[1] == 0 {
		t.Fatalf("only %d mutated claims were read by both, %d by the walk only: the test proves little", n[0], n[1])
	}
}

// compareReads reads b both ways and fails t if the walk reads a claim
// other than the decoder's. When the decoder refuses b and the walk reads
// it, the decoder refused a field the walk skips: without the skipped
// fields, it must read b as the walk does. It returns 0 when both read b,
// 1 the walk only, 2 the decoder only, -1 neither.
func compareReads(t *testing.T, b []byte, s Scope) int {
	t.Helper()
	var w wire.Claim
	got, werr := walkedClaim(b, s, &w)
	want, derr := decodedClaim(b, s)
	switch {
	case werr != nil && derr != nil:
		return -1
	case werr != nil:
		return 2
	case derr == nil:
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%x walks as\n%+v\nthe decoder reads\n%+v", b, got, want)
		}
		return 0
	}
	kept, err := projectClaim(b, claimFields)
	if err != nil {
		t.Fatalf("%x: the walk reads it, the projection fails: %v", b, err)
	}
	if want, err = decodedClaim(kept, s); err != nil {
		t.Fatalf("%x: the decoder refuses a field the walk reads: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%x walks as\n%+v\nthe decoder reads its walked fields as\n%+v", b, got, want)
	}
	return 1
}

// walked is the tree of the fields the walk reads: a nil subtree is a
// field kept whole (a string, a time, a quantity).
type walked map[protowire.Number]walked

var (
	claimEntry  = walked{1: nil, 2: nil}
	claimFields = walked{
		1: {1: nil, 3: nil, 5: nil, 6: nil, 8: nil, 9: nil, 11: claimEntry, 12: claimEntry,
			13: {1: nil, 3: nil, 4: nil, 5: nil}},
		2: {3: nil, 5: nil, 9: nil, 7: {2: nil, 3: nil}, 8: {2: nil, 3: nil, 4: nil}},
		3: {1: nil, 3: claimEntry, 4: {1: nil, 2: nil, 4: nil}},
	}
)

// projectClaim returns b with only the fields of tree, in their order.
func projectClaim(b []byte, tree walked) ([]byte, error) {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		sub, ok := tree[num]
		if ok && sub != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			p, err := projectClaim(v, sub)
			if err != nil {
				return nil, err
			}
			out = protowire.AppendBytes(protowire.AppendTag(out, num, typ), p)
		} else if ok {
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	return out, nil
}

// mutate changes one to three bytes of b, or inserts a field of the wrong
// wire type.
func mutate(rng *rand.Rand, b []byte) []byte {
	if rng.Intn(4) == 0 {
		i := rng.Intn(len(b))
		f := protowire.AppendTag(nil, protowire.Number(1+rng.Intn(14)), protowire.Type(rng.Intn(6)))
		f = protowire.AppendVarint(f, uint64(rng.Intn(200)))
		return append(append(append([]byte{}, b[:i]...), f...), b[i:]...)
	}
	for range 1 + rng.Intn(3) {
		b[rng.Intn(len(b))] = byte(rng.Intn(256))
	}
	return b
}

// FuzzWalkClaim: arbitrary bytes never panic the walk, and it never reads
// a claim other than the decoder's (compareReads).
//
//	go test -run '^$' -fuzz '^FuzzWalkClaim$' -fuzztime 30s ./internal/kube/
func FuzzWalkClaim(f *testing.F) {
	rng := rand.New(rand.NewSource(3))
	for i := range 8 {
		f.Add(marshalClaim(f, randomClaim(rng, i)))
	}
	f.Add(marshalClaim(f, newerClaim()))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, s := range claimScopes[:2] {
			compareReads(t, b, s)
		}
	})
}

// BenchmarkClaimRead reads a claim of the scale benchmark's fleet
// (scripts/bench), bound, with managedFields as the API server keeps
// them, the way the scan did (decoder, then Claim) and does (the walk).
//
//	go test -run x -bench ClaimRead -benchmem ./internal/kube/
func BenchmarkClaimRead(b *testing.B) {
	sc := "csi-hostpath"
	mf := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: ptrTo(metav1.Unix(1767225600, 0)), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	p := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "ws-000042", Namespace: "bench", UID: "0b9d1f3e-6c1a-4c51-9f0e-1d2c3b4a5f60",
			ResourceVersion: "123456", CreationTimestamp: metav1.Unix(1767225600, 0), Finalizers: []string{"kubernetes.io/pvc-protection"},
			Labels: map[string]string{"app": "ide", "workspace-id": "w000042", "app.kubernetes.io/managed-by": "ide-operator"},
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
				"volume.beta.kubernetes.io/storage-provisioner": "hostpath.csi.k8s.io", "volume.kubernetes.io/storage-provisioner": "hostpath.csi.k8s.io"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				mf("bench", `{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:app.kubernetes.io/managed-by":{},"f:workspace-id":{}}},"f:spec":{"f:accessModes":{},"f:resources":{"f:requests":{".":{},"f:storage":{}}},"f:storageClassName":{},"f:volumeMode":{},"f:volumeName":{}}}`),
				mf("kube-controller-manager", `{"f:metadata":{"f:annotations":{".":{},"f:pv.kubernetes.io/bind-completed":{},"f:pv.kubernetes.io/bound-by-controller":{}}},"f:status":{"f:accessModes":{},"f:capacity":{".":{},"f:storage":{}},"f:phase":{}}}`)}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &sc,
			VolumeName: "pv-000042", Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
	}
	raw := marshalClaim(b, p)
	s := Scope{WorkspaceLabel: "workspace-id"}
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodedClaim(raw, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		r := &reader{s: s.withDefaults(), intern: map[string]string{}}
		var w wire.Claim
		b.ReportAllocs()
		for b.Loop() {
			if err := wire.WalkClaim(raw, &w); err != nil {
				b.Fatal(err)
			}
			if _, err := r.wireClaim(&w); err != nil {
				b.Fatal(err)
			}
		}
	})
}
