// Package restore holds the rules of the way back (docs/spec.md#restore): the claim
// template a rescue records (docs/spec.md#rescue), the choice of the snapshot a claim is
// restored from, the refusals, and the manifest of the new claim. Everything
// here is a pure function of values read elsewhere; the command reads the
// cluster, calls Plan, and creates what it returns.
package restore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// AnnotationTemplate on a rescue is the JSON Template of its source claim.
const AnnotationTemplate = inventory.Prefix + "claim"

// AnnotationTemplateDropped on a rescue names the claim's annotations its
// template could not keep (over MaxTemplate).
const AnnotationTemplateDropped = inventory.Prefix + "claim-dropped"

// AnnotationRestoredFrom on a restored claim names its snapshot.
const AnnotationRestoredFrom = classify.AnnotationRestoredFrom

// AnnotationRestoredDataTime on a restored claim is its snapshot's data
// time (docs/spec.md#rule-restored-data-time).
const AnnotationRestoredDataTime = classify.AnnotationRestoredDataTime

// MaxTemplate bounds the template's JSON (docs/spec.md#rescue: 16 KiB).
const MaxTemplate = 16 << 10

// Template is what a restore needs to recreate a claim faithfully (docs/spec.md#rescue).
type Template struct {
	Name                      string            `json:"name"`
	Labels                    map[string]string `json:"labels,omitempty"`
	Annotations               map[string]string `json:"annotations,omitempty"`
	AccessModes               []string          `json:"accessModes,omitempty"`
	Storage                   string            `json:"storage,omitempty"` // spec.resources.requests.storage
	StorageClassName          *string           `json:"storageClassName,omitempty"`
	VolumeMode                string            `json:"volumeMode,omitempty"`
	VolumeAttributesClassName *string           `json:"volumeAttributesClassName,omitempty"`
}

// systemAnnotations are set by Kubernetes itself when a claim is bound or
// provisioned, or by kubectl: a new claim must not carry them.
var systemAnnotations = []string{
	"kubectl.kubernetes.io/last-applied-configuration",
	"pv.kubernetes.io/bind-completed",
	"pv.kubernetes.io/bound-by-controller",
	"pv.kubernetes.io/migrated-to",
	"volume.beta.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/storage-provisioner",
	"volume.kubernetes.io/selected-node",
	"volume.kubernetes.io/storage-resizer",
}

// NewTemplate records claim p as a template, as JSON of at most MaxTemplate
// bytes. When the whole template is larger, annotations are dropped, the
// largest first, until it fits; dropped names them (the report says so). An
// error means it cannot fit even without annotations.
func NewTemplate(p *corev1.PersistentVolumeClaim) (data string, dropped []string, err error) {
	t := Template{Name: p.Name, Labels: keep(p.Labels, nil), Annotations: keep(p.Annotations, systemAnnotations)}
	for _, m := range p.Spec.AccessModes {
		t.AccessModes = append(t.AccessModes, string(m))
	}
	if q, ok := p.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		t.Storage = q.String()
	}
	t.StorageClassName = p.Spec.StorageClassName
	if p.Spec.VolumeMode != nil {
		t.VolumeMode = string(*p.Spec.VolumeMode)
	}
	t.VolumeAttributesClassName = p.Spec.VolumeAttributesClassName
	for {
		b, err := json.Marshal(t)
		if err != nil {
			return "", nil, err
		}
		if len(b) <= MaxTemplate {
			return string(b), dropped, nil
		}
		k := largest(t.Annotations)
		if k == "" {
			return "", dropped, fmt.Errorf("claim template of %s/%s is %d bytes without annotations, over %d", p.Namespace, p.Name, len(b), MaxTemplate)
		}
		delete(t.Annotations, k)
		dropped = append(dropped, k)
	}
}

// ParseTemplate reads a template written by NewTemplate.
func ParseTemplate(s string) (*Template, error) {
	var t Template
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, fmt.Errorf("claim template: %w", err)
	}
	if t.Storage != "" {
		if _, err := resource.ParseQuantity(t.Storage); err != nil {
			return nil, fmt.Errorf("claim template: storage %q: %w", t.Storage, err)
		}
	}
	return &t, nil
}

// keep copies m without the janitor's keys and the keys in drop.
func keep(m map[string]string, drop []string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, inventory.Prefix) || slices.Contains(drop, k) {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// largest is the key of m's largest entry (ties: the first by name).
func largest(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	best, size := "", -1
	for _, k := range keys {
		if n := len(k) + len(m[k]); n > size {
			best, size = k, n
		}
	}
	return best
}
