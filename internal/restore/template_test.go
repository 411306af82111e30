package restore

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func claim() *corev1.PersistentVolumeClaim {
	class, vac := "fast", "gold"
	mode := corev1.PersistentVolumeBlock
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ws-abc",
			Labels: map[string]string{"workspace": "abc", "pvc-janitor.io/phase": "Rescued", "team": "a"},
			Annotations: map[string]string{
				"owner":                                            "alice",
				"pvc-janitor.io/orphaned-since":                    "2026-01-01T00:00:00Z",
				"pv.kubernetes.io/bind-completed":                  "yes",
				"volume.kubernetes.io/selected-node":               "n1",
				"volume.kubernetes.io/storage-provisioner":         "csi",
				"kubectl.kubernetes.io/last-applied-configuration": "{}",
			}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:               []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:                 corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")}},
			StorageClassName:          &class,
			VolumeMode:                &mode,
			VolumeAttributesClassName: &vac,
			VolumeName:                "pv-1",
		},
	}
}

func TestNewTemplateKeepsWhatARestoreNeeds(t *testing.T) {
	data, dropped, err := NewTemplate(claim())
	if err != nil || len(dropped) != 0 {
		t.Fatalf("NewTemplate: %v, dropped %v", err, dropped)
	}
	got, err := ParseTemplate(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "ws-abc" || got.Storage != "5Gi" || *got.StorageClassName != "fast" || got.VolumeMode != "Block" ||
		*got.VolumeAttributesClassName != "gold" || len(got.AccessModes) != 1 || got.AccessModes[0] != "ReadWriteOnce" {
		t.Errorf("spec not kept: %+v", got)
	}
	if len(got.Labels) != 2 || got.Labels["workspace"] != "abc" || got.Labels["team"] != "a" {
		t.Errorf("labels %v: want workspace and team only (no pvc-janitor.io/ keys)", got.Labels)
	}
	if len(got.Annotations) != 1 || got.Annotations["owner"] != "alice" {
		t.Errorf("annotations %v: want owner only (no janitor, binding, provisioning or kubectl keys)", got.Annotations)
	}
}

func TestNewTemplateDropsAnnotationsLargestFirstPastTheLimit(t *testing.T) {
	p := claim()
	p.Annotations["big"] = strings.Repeat("x", MaxTemplate)
	p.Annotations["bigger"] = strings.Repeat("y", MaxTemplate+10)
	data, dropped, err := NewTemplate(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > MaxTemplate {
		t.Errorf("template is %d bytes, over %d", len(data), MaxTemplate)
	}
	if strings.Join(dropped, ",") != "bigger,big" {
		t.Errorf("dropped %v, want [bigger big]", dropped)
	}
	got, _ := ParseTemplate(data)
	if got.Annotations["owner"] != "alice" {
		t.Errorf("a small annotation was dropped too: %v", got.Annotations)
	}

	p = claim()
	for i := 0; i < 400; i++ {
		p.Labels[strings.Repeat("k", 20)+string(rune('a'+i%26))+strings.Repeat("z", i/26)] = strings.Repeat("v", 60)
	}
	if _, _, err := NewTemplate(p); err == nil {
		t.Errorf("a template over the limit without annotations: no error")
	}
}

func TestParseTemplateRejectsBadInput(t *testing.T) {
	for _, s := range []string{"", "{", `{"storage":"lots"}`} {
		if _, err := ParseTemplate(s); err == nil {
			t.Errorf("ParseTemplate(%q): no error", s)
		}
	}
}
