//go:build integration

package rescue_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

// TestTemplateRefusesAReplacedClaim is safety row R8 on the real API
// server: between the re-check and the create, the claim is deleted and
// another takes its name. The re-read that records the template must
// refuse it (errReplaced: no snapshot is created, the outcome is Skipped),
// since a snapshot by name would hold the other claim's data; so must a
// claim that is gone.
func TestTemplateRefusesAReplacedClaim(t *testing.T) {
	ctx := context.Background()
	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200,
		Retry: kube.RetryPolicy{Initial: 50 * time.Millisecond, Max: time.Second, MaxElapsed: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	create := func() *corev1.PersistentVolumeClaim {
		t.Helper()
		p, err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "ws-a", Labels: map[string]string{"workspace": "a"}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	remove := func() {
		t.Helper()
		if err := c.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "ws-a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.WaitClaimGone(ctx, ns, "ws-a"); err != nil {
			t.Fatal(err)
		}
	}
	template := func(uid string) (*snapv1.VolumeSnapshot, error) {
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		cl := &inventory.Claim{Namespace: ns, Name: "ws-a", UID: types.UID(uid)}
		return vs, rescue.RecordTemplate(ctx, c, cl, vs)
	}

	first := create()
	vs, err := template(string(first.UID))
	if err != nil || vs.Annotations[restore.AnnotationTemplate] == "" {
		t.Fatalf("the claim the re-check saw: %v, annotations %v; want its template recorded", err, vs.Annotations)
	}

	remove()
	second := create()
	if second.UID == first.UID {
		t.Fatal("the new claim has the old UID")
	}
	vs, err = template(string(first.UID))
	if !errors.Is(err, rescue.ErrReplaced) || vs.Annotations[restore.AnnotationTemplate] != "" {
		t.Fatalf("another claim took the name: %v, annotations %v; want errReplaced and no template", err, vs.Annotations)
	}

	remove()
	if _, err = template(string(second.UID)); !errors.Is(err, rescue.ErrReplaced) {
		t.Fatalf("the claim is gone: %v; want errReplaced", err)
	}
}
