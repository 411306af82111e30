//go:build integration

package cli_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// TestRescueRecordsTheClaimTemplate (docs/spec.md#rescue): every rescue carries the
// claim it came from, so that a restore is faithful without the claim.
func TestRescueRecordsTheClaimTemplate(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"example.com/owner":"alice"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	snaps := snapshots(t, f, ns)
	if len(snaps) != 1 {
		t.Fatalf("%d snapshots, want 1", len(snaps))
	}
	tmpl, err := restore.ParseTemplate(snaps[0].Annotations[restore.AnnotationTemplate])
	if err != nil {
		t.Fatalf("rescue %s: %v", snaps[0].Name, err)
	}
	claim, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := claim.Spec.Resources.Requests.Storage().String()
	if tmpl.Name != "ws-a" || tmpl.Storage != want || tmpl.Labels["workspace"] != "a" ||
		tmpl.Annotations["example.com/owner"] != "alice" || len(tmpl.AccessModes) == 0 {
		t.Errorf("template %+v, want the claim's name, size %s, labels and annotations", tmpl, want)
	}
	for k := range tmpl.Annotations {
		if k == "pvc-janitor.io/orphaned-since" || k == "pv.kubernetes.io/bind-completed" {
			t.Errorf("the template keeps %s", k)
		}
	}
}
