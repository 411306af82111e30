package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// EventSource names the janitor in the Events it writes.
const EventSource = "pvc-janitor"

// Event records an action on a claim as a core/v1 Event, so that
// `kubectl describe pvc` shows what the janitor did. eventType is
// corev1.EventTypeNormal or corev1.EventTypeWarning.
func (c *Clients) Event(ctx context.Context, cl *inventory.Claim, eventType, reason, message string) error {
	return c.EventOn(ctx, corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: cl.Namespace, Name: cl.Name, UID: cl.UID}, eventType, reason, message)
}

// EventOn records an action on any namespaced object (a VolumeSnapshot the
// janitor pruned, say) as a core/v1 Event in the object's namespace.
func (c *Clients) EventOn(ctx context.Context, obj corev1.ObjectReference, eventType, reason, message string) error {
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	now := metav1.NewTime(c.Clock.Now())
	if now.IsZero() {
		now = metav1.NewTime(time.Now())
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name + "." + hex.EncodeToString(suffix[:])},
		InvolvedObject:      obj,
		Reason:              reason,
		Message:             message,
		Type:                eventType,
		Source:              corev1.EventSource{Component: EventSource},
		ReportingController: "pvc-janitor.io/janitor",
		ReportingInstance:   EventSource,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	return c.Retry.Do(ctx, "create event "+reason+" for "+obj.Namespace+"/"+obj.Name, func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().Events(obj.Namespace).Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
}
