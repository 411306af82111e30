package wire

import (
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func randomPV(rng *rand.Rand, i int) corev1.PersistentVolume {
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", i), UID: "u", ResourceVersion: "9",
		Labels:        map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:    &corev1.ObjectReference{Namespace: "ws", Name: fmt.Sprintf("claim-%d", i)}, StorageClassName: "csi",
			PersistentVolumeReclaimPolicy: []corev1.PersistentVolumeReclaimPolicy{"", corev1.PersistentVolumeReclaimDelete,
				corev1.PersistentVolumeReclaimRetain, corev1.PersistentVolumeReclaimRecycle}[rng.Intn(4)]},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	switch rng.Intn(4) {
	case 0:
		pv.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/tmp/x"}
	case 1:
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{}
	default:
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: fmt.Sprintf("driver-%d", rng.Intn(3)), VolumeHandle: fmt.Sprintf("handle-%d", i),
			FSType: "ext4", VolumeAttributes: map[string]string{"k": "v"}}
	}
	return pv
}

// TestWalkPVAgreesWithTheDecoder: on random volumes (CSI or not, every
// reclaim policy, an empty CSI source), WalkPV reads what client-go's
// generated decoder does.
func TestWalkPVAgreesWithTheDecoder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var w PV
	csi := 0
	for i := range 2000 {
		pv := randomPV(rng, i)
		b, err := pv.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var dec corev1.PersistentVolume
		if err := dec.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if err := WalkPV(b, &w); err != nil {
			t.Fatalf("pv %d: %v", i, err)
		}
		if string(w.Name) != dec.Name || string(w.ReclaimPolicy) != string(dec.Spec.PersistentVolumeReclaimPolicy) || w.CSI != (dec.Spec.CSI != nil) {
			t.Fatalf("pv %d: walked %q %q csi %v, want %q %q csi %v", i, w.Name, w.ReclaimPolicy, w.CSI,
				dec.Name, dec.Spec.PersistentVolumeReclaimPolicy, dec.Spec.CSI != nil)
		}
		if dec.Spec.CSI != nil {
			csi++
			if string(w.Driver) != dec.Spec.CSI.Driver || string(w.Handle) != dec.Spec.CSI.VolumeHandle {
				t.Fatalf("pv %d: walked %q %q, want %q %q", i, w.Driver, w.Handle, dec.Spec.CSI.Driver, dec.Spec.CSI.VolumeHandle)
			}
		}
	}
	if csi < 1000 {
		t.Fatalf("only %d of the random volumes were CSI", csi)
	}
}

// TestWalkPVRejectsGarbage: a malformed volume is an error, never a volume
// without a CSI source (a claim on it would look unrescuable).
func TestWalkPVRejectsGarbage(t *testing.T) {
	pv := randomPV(rand.New(rand.NewSource(2)), 1)
	b, _ := pv.Marshal()
	var w PV
	if err := WalkPV(append([]byte{0x12, 0xff, 0x7f}, b...), &w); err == nil {
		t.Error("a field longer than the message was accepted")
	}
	for cut := 1; cut < len(b); cut++ {
		var dec corev1.PersistentVolume
		if dec.Unmarshal(b[:cut]) == nil {
			continue // a prefix that is itself a valid message
		}
		if err := WalkPV(b[:cut], &w); err == nil {
			t.Errorf("cut at %d of %d: the decoder refuses it, WalkPV accepted it", cut, len(b))
		}
	}
}
