//go:build integration

package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ServerNow is the API server's clock, to the second (truncated): the
// creationTimestamp of a ConfigMap created in ns as a dry run, which
// stores nothing.
func (f *Fixtures) ServerNow(ctx context.Context, ns string) (time.Time, error) {
	cm, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-"}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the API server's clock: %w", err)
	}
	return cm.CreationTimestamp.Time, nil
}

// WaitServerAfter waits until the API server's clock, as it stamps a new
// object's creationTimestamp (a server-side dry-run create in ns, which
// stores nothing), is past t: an object created from then on is newer than
// t to the API's second. A wait on the server's own clock, where a sleep
// would guess at it (30 s at most).
func (f *Fixtures) WaitServerAfter(ctx context.Context, ns string, t time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last time.Time
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		cm, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "clock-"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		last = cm.CreationTimestamp.Time
		return last.After(t), nil
	})
	if err != nil {
		return fmt.Errorf("the API server's clock (last seen %s) did not pass %s: %w", last, t, err)
	}
	return nil
}
