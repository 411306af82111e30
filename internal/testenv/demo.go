package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/csidriver"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// Demo fleet settings: `make demo` and the end-to-end tests scan with these.
const (
	DemoSelector       = "app.kubernetes.io/part-of=demo-workspaces"
	DemoWorkspaceLabel = "workspace"
	// DemoMinAge and DemoGracePeriod are short so that a fleet seeded a few
	// seconds ago already has old claims.
	DemoMinAge      = 5 * time.Second
	DemoGracePeriod = 10 * time.Second
)

// SeedDemo creates a fleet of about twenty workspace claims in ns that
// covers every state of SPEC §3, and returns the state each claim must be
// classified in when scanned at once with DemoMinAge and DemoGracePeriod.
// It takes about DemoGracePeriod+3 s: the old claims must age past the grace
// period before the young and grace ones are made.
func SeedDemo(ctx context.Context, f *Fixtures, ns, driverStateDir string) (map[string]string, error) {
	want := map[string]string{}
	lbl := func(ws string) map[string]string {
		return map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", DemoWorkspaceLabel: ws}
	}
	claim := func(name, ws, state string, mod func(*ClaimSpec)) error {
		s := ClaimSpec{Namespace: ns, Name: name, Labels: lbl(ws)}
		if mod != nil {
			mod(&s)
		}
		want[name] = state
		if s.Unbound {
			_, err := f.BoundClaim(ctx, s)
			return err
		}
		_, err := f.BoundClaim(ctx, s)
		return err
	}
	pod := func(name string, claims ...string) error {
		_, err := f.Pod(ctx, PodSpec{Namespace: ns, Name: name, Claims: claims, Scheduled: true})
		return err
	}
	var malloryRescue string
	steps := []func() error{
		// The newer-data check needs the superseded claim to be strictly
		// older (timestamps have one-second resolution): it goes first.
		func() error { return claim("ws-alice-monday", "alice", "Superseded", nil) },
		func() error { time.Sleep(1100 * time.Millisecond); return nil },
		func() error { return claim("ws-alice-tuesday", "alice", "InUse", nil) },
		func() error { return pod("ide-alice", "ws-alice-tuesday") },
		func() error { return claim("ws-bob", "bob", "InUse", nil) },
		func() error { return pod("ide-bob", "ws-bob") },
		func() error { return claim("ws-carol", "carol", "InUse", nil) },
		func() error { _, err := f.Deployment(ctx, ns, "carol-notebook", "ws-carol"); return err },
		func() error { return claim("ws-dave", "dave", "InUse", nil) },
		func() error { _, err := f.Job(ctx, ns, "dave-ci", "ws-dave"); return err },
		func() error { _, err := f.StatefulSet(ctx, ns, "erin", "home"); return err },
		func() error { return claim("home-erin-0", "erin", "InUse", nil) },
		func() error {
			return claim("ws-frank", "frank", "Held", func(s *ClaimSpec) {
				s.Annotations = map[string]string{"pvc-janitor.io/hold": "true"}
			})
		},
		func() error {
			want["ws-grace-pending"] = "Unbound"
			_, err := f.BoundClaim(ctx, ClaimSpec{Namespace: ns, Name: "ws-grace-pending", Labels: lbl("grace"), Unbound: true})
			return err
		},
		func() error { return claim("ws-heidi", "heidi", "Attached", nil) },
		func() error {
			// Attachments are cluster-scoped: one left by an earlier seed goes first.
			name := "demo-" + ns + "-heidi"
			if err := f.Kube.StorageV1().VolumeAttachments().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			_, err := f.VolumeAttachment(ctx, name, "pv-"+ns+"-ws-heidi", "node-1", true)
			return err
		},
		func() error { return claim("ws-ivan", "ivan", "Terminating", nil) },
		func() error { return pod("ide-ivan", "ws-ivan") },
		func() error {
			return f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "ws-ivan", metav1.DeleteOptions{})
		},
		func() error { return claim("ws-judy", "judy", "Rescued", nil) },
		func() error { return claim("ws-mallory", "mallory", "SnapshotFailed", nil) },
		func() error {
			return csidriver.SetFault(driverStateDir, ns+"-ws-mallory", csidriver.Fault{PermanentError: "volume is corrupted"})
		},
		func() error { return claim("ws-niaj", "niaj", "Snapshotting", nil) },
		func() error {
			return csidriver.SetFault(driverStateDir, ns+"-ws-niaj", csidriver.Fault{ReadyAfter: time.Hour})
		},
		func() error { return claim("ws-olivia", "olivia", "Orphaned", nil) },
		func() error { return claim("ws-peggy", "peggy", "Orphaned", nil) },
		func() error { return claim("ws-rupert", "rupert", "Orphaned", nil) },
		func() error { return claim("ws-sybil", "sybil", "Grace", nil) },
		func() error { return pod("ide-sybil", "ws-sybil") },
		// Wait for the Unused condition (orphaned-since) of the idle claims,
		// then take the snapshots after it.
		func() error { time.Sleep(1100 * time.Millisecond); return nil },
		func() error {
			_, err := f.Snapshot(ctx, ns, "ws-judy-backup", "ws-judy", "", lbl("judy"), nil)
			return err
		},
		func() (err error) {
			malloryRescue, err = f.janitorSnapshot(ctx, ns, "ws-mallory", lbl("mallory"))
			return err
		},
		func() error { _, err := f.janitorSnapshot(ctx, ns, "ws-niaj", lbl("niaj")); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("seed demo step %d: %w", i, err)
		}
	}
	// Every old claim is orphaned since at most now.
	start := time.Now()
	if _, err := f.WaitSnapshot(ctx, ns, "ws-judy-backup", 30*time.Second, Ready); err != nil {
		return nil, err
	}
	if _, err := f.WaitSnapshot(ctx, ns, malloryRescue, 30*time.Second, Failed); err != nil {
		return nil, err
	}
	// Age the fleet past the grace period, then make the young claim and
	// release the grace one.
	if d := DemoGracePeriod + time.Second - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	if err := claim("ws-trent", "trent", "Young", nil); err != nil {
		return nil, err
	}
	if err := f.ForceDeletePod(ctx, ns, "ide-sybil"); err != nil {
		return nil, err
	}
	// The controller manager flips ws-sybil's Unused condition to True now:
	// wait for it so the scan sees a fresh orphaned-since.
	if _, err := f.WaitClaim(ctx, ns, "ws-sybil", func(c *corev1.PersistentVolumeClaim) bool {
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}); err != nil {
		return nil, err
	}
	return want, nil
}

// janitorSnapshot creates a snapshot shaped like the janitor's own rescue
// of claim (labels, source annotations, the name of its orphaned-since: the
// Unused condition's time), as a crashed earlier run left it, and returns
// its name.
func (f *Fixtures) janitorSnapshot(ctx context.Context, ns, claim string, labels map[string]string) (string, error) {
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	l := map[string]string{"app.kubernetes.io/managed-by": "pvc-janitor"}
	for k, v := range labels {
		l[k] = v
	}
	ann := map[string]string{
		"pvc-janitor.io/source-uid":  string(c.UID),
		"pvc-janitor.io/source-name": claim,
	}
	var since time.Time
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
			since = cond.LastTransitionTime.Time
			ann["pvc-janitor.io/orphaned-since"] = since.UTC().Format(time.RFC3339)
		}
	}
	name := rescue.Name(claim, c.UID, since)
	_, err = f.Snapshot(ctx, ns, name, claim, "", l, ann)
	return name, err
}
