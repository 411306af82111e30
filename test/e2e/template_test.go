//go:build integration

package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// TestRescueRecordsTheClaimTemplate (docs/spec.md#rescue-claim-template): every rescue carries the
// claim it came from, so that a restore is faithful without the claim; a
// template over 16 KiB drops its largest annotations and says so.
func TestRescueRecordsTheClaimTemplate(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-a", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"example.com/owner":"alice"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// ws-big's annotation alone is over the template's 16 KiB.
	orphan(t, f, ns, "ws-big", "b", "")
	blob := fmt.Sprintf(`{"metadata":{"annotations":{"example.com/blob":%q,"example.com/owner":"bob"}}}`, strings.Repeat("x", restore.MaxTemplate+1024))
	if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "ws-big", "application/merge-patch+json", []byte(blob), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, snapArgs(ns)...)
	if code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	bySource := map[string]snapv1.VolumeSnapshot{}
	for _, s := range snapshots(t, f, ns) {
		bySource[*s.Spec.Source.PersistentVolumeClaimName] = s
	}
	if len(bySource) != 2 {
		t.Fatalf("rescues of %d claims, want 2", len(bySource))
	}
	// Over 16 KiB: the largest annotation is dropped, the rescue and the
	// run's log say which, and the rest of the template is kept.
	big := bySource["ws-big"]
	if got := big.Annotations[restore.AnnotationTemplateDropped]; got != "example.com/blob" {
		t.Errorf("ws-big's rescue: %s %q, want example.com/blob", restore.AnnotationTemplateDropped, got)
	}
	if bt, err := restore.ParseTemplate(big.Annotations[restore.AnnotationTemplate]); err != nil || bt.Annotations["example.com/owner"] != "bob" ||
		len(big.Annotations[restore.AnnotationTemplate]) > restore.MaxTemplate {
		t.Errorf("ws-big's template (%d bytes): %+v, %v; want within %d bytes, keeping example.com/owner", len(big.Annotations[restore.AnnotationTemplate]), bt, err, restore.MaxTemplate)
	}
	if !strings.Contains(stderr, "claim template over 16 KiB") || !strings.Contains(stderr, "example.com/blob") {
		t.Errorf("the run did not warn of the dropped annotation: %s", stderr)
	}
	a := bySource["ws-a"]
	if _, ok := a.Annotations[restore.AnnotationTemplateDropped]; ok {
		t.Errorf("ws-a's rescue dropped annotations: %v", a.Annotations[restore.AnnotationTemplateDropped])
	}
	tmpl, err := restore.ParseTemplate(a.Annotations[restore.AnnotationTemplate])
	if err != nil {
		t.Fatalf("rescue %s: %v", a.Name, err)
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
