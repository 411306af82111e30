package wire

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// TestWalkPodSkipsFieldsOfNewerServers: a pod from an API server newer than
// this client carries fields it does not know, at the top and inside the
// spec and a volume. They are skipped: the walk reads the same pod, so a
// newer server never hides a claim's referrer.
func TestWalkPodSkipsFieldsOfNewerServers(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	p := randomPod(rng, 0)
	for i := 1; len(refs(&p)) == 0; i++ {
		p = randomPod(rng, i)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	unknown := func(b []byte) []byte {
		b = protowire.AppendTag(b, 9999, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte("a field of a newer release"))
		b = protowire.AppendTag(b, 9998, protowire.VarintType)
		b = protowire.AppendVarint(b, 42)
		b = protowire.AppendTag(b, 9997, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, 7)
	}
	// Pod.spec is field 2, PodSpec.volumes field 1: a second occurrence of an
	// embedded message is merged into the first, as protobuf decoders do.
	volume := unknown(nil)
	spec := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), volume)
	spec = unknown(spec)
	newer := unknown(append([]byte{}, b...))
	newer = protowire.AppendBytes(protowire.AppendTag(newer, 2, protowire.BytesType), spec)

	var want, got Pod
	if err := WalkPod(b, &want); err != nil {
		t.Fatal(err)
	}
	if err := WalkPod(newer, &got); err != nil {
		t.Fatalf("a pod with a newer server's fields: %v", err)
	}
	wantRefs, gotRefs := walkedRefs(&want), walkedRefs(&got)
	// The merged empty volume adds no claim.
	if fmt.Sprint(wantRefs) != fmt.Sprint(gotRefs) || string(got.Name) != p.Name || got.Created != want.Created {
		t.Fatalf("walked %s %q, want %s %q", got.Name, gotRefs, p.Name, wantRefs)
	}
}
