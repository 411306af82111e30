//go:build integration

package testenv

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
)

// Demo fleet settings: `make demo` and the end-to-end tests scan with these.
const (
	DemoSelector       = "app.kubernetes.io/part-of=demo-workspaces"
	DemoWorkspaceLabel = "workspace"
	// DemoMinAge and DemoGracePeriod are short so that a fleet seeded a few
	// seconds ago already has old claims.
	DemoMinAge      = 5 * time.Second
	DemoGracePeriod = 10 * time.Second
	// DemoFileClaim is the demo claim whose user left work in its volume
	// (DemoFile, DemoFileContent): make demo rescues and reaps it, then
	// restores it and reads the file back.
	DemoFileClaim   = "ws-olivia"
	DemoFile        = "notes.md"
	DemoFileContent = "olivia's last work: the chapter she wrote before her workspace was orphaned\n"
)

// SeedDemo creates a fleet of about twenty workspace claims in ns that
// covers every state of docs/spec.md#states, and returns the state each claim must be
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
		// Supersession is by descent (docs/spec.md#rule-superseded): alice
		// forked her workspace. ws-alice-tuesday was created from a snapshot
		// of ws-alice-monday cut while monday was still in use, then monday's
		// pod went: monday holds data tuesday lacks, and its ordinary rescue
		// would be newer than tuesday's start. The snapshot is no rescue of
		// monday (cut before its orphaned-since).
		func() error { return claim("ws-alice-monday", "alice", "Superseded", nil) },
		func() error { return pod("ide-alice-monday", "ws-alice-monday") },
		func() error {
			_, err := f.Snapshot(ctx, ns, "ws-alice-monday-fork", "ws-alice-monday", "", lbl("alice"), nil)
			return err
		},
		func() error {
			_, err := f.WaitSnapshot(ctx, ns, "ws-alice-monday-fork", 30*time.Second, Ready)
			return err
		},
		func() error {
			want["ws-alice-tuesday"] = "InUse"
			_, err := f.ProvisionedClaim(ctx, ClaimSpec{Namespace: ns, Name: "ws-alice-tuesday", Labels: lbl("alice"),
				FromSnapshot: "ws-alice-monday-fork"})
			return err
		},
		func() error { return pod("ide-alice", "ws-alice-tuesday") },
		func() error { return f.ForceDeletePod(ctx, ns, "ide-alice-monday") },
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
		func() error { return claim(DemoFileClaim, "olivia", "Orphaned", nil) },
		func() error { return f.WriteVolume(ctx, ns, DemoFileClaim, DemoFile, []byte(DemoFileContent)) },
		func() error { return claim("ws-peggy", "peggy", "Orphaned", nil) },
		func() error { return claim("ws-rupert", "rupert", "Orphaned", nil) },
		func() error { return claim("ws-sybil", "sybil", "Grace", nil) },
		func() error { return pod("ide-sybil", "ws-sybil") },
		// Wait for the orphaned-since of the idle claims (their Unused
		// condition, or on a stack without it the mark a first scan
		// would write), then take the snapshots after it.
		func() error {
			return f.MarkIdle(ctx, ns, "ws-alice-monday", "ws-judy", "ws-mallory", "ws-niaj", "ws-olivia", "ws-peggy", "ws-rupert")
		},
		func() error {
			_, err := f.WaitOrphanedSince(ctx, ns, "ws-alice-monday", "ws-judy", "ws-mallory", "ws-niaj", "ws-olivia", "ws-peggy", "ws-rupert")
			return err
		},
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
	if _, err := f.WaitSnapshot(ctx, ns, "ws-judy-backup", 30*time.Second, Ready); err != nil {
		return nil, err
	}
	if _, err := f.WaitSnapshot(ctx, ns, malloryRescue, 30*time.Second, Failed); err != nil {
		return nil, err
	}
	// Age the fleet past the grace period, then make the young claim and
	// release the grace one.
	if err := f.waitGraceOver(ctx, ns, "ws-judy", "ws-mallory", "ws-niaj", "ws-olivia", "ws-peggy", "ws-rupert"); err != nil {
		return nil, err
	}
	if err := claim("ws-trent", "trent", "Young", nil); err != nil {
		return nil, err
	}
	if err := f.ForceDeletePod(ctx, ns, "ide-sybil"); err != nil {
		return nil, err
	}
	// The controller manager flips ws-sybil's Unused condition to True now:
	// wait for it so the scan sees a fresh orphaned-since (on a stack
	// without the condition: mark it as a first scan would).
	if _, err := f.WaitIdle(ctx, ns, "ws-sybil"); err != nil {
		return nil, err
	}
	if err := f.MarkIdle(ctx, ns, "ws-sybil"); err != nil {
		return nil, err
	}
	return want, nil
}

// ClockSkew is the janitor's default --clock-skew: a snapshot counts as a
// rescue only when cut that long after its claim's orphaned-since
// (docs/spec.md#rule-clock-skew).
const ClockSkew = 2 * time.Second

// MarkIdle, on a control plane without the Unused condition, writes on each
// claim the orphaned-since mark a first scan would (docs/spec.md#rule-mark-time):
// the API server's clock, rounded up to the next second. There a claim's
// first run only marks it; the demo and the tests written for the
// condition's stack start from the mark, so that one run can rescue it. On
// a stack with the condition it does nothing: the condition dates the
// orphan.
func (f *Fixtures) MarkIdle(ctx context.Context, ns string, names ...string) error {
	if f.UnusedCondition {
		return nil
	}
	for _, name := range names {
		now, err := f.ServerNow(ctx, ns)
		if err != nil {
			return err
		}
		mark := now.Truncate(time.Second).Add(time.Second).UTC().Format(time.RFC3339)
		patch := []byte(`{"metadata":{"annotations":{"pvc-janitor.io/orphaned-since":"` + mark + `"}}}`)
		if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("mark %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

// clockPoll is how often the demo's waits look at the clock and the claims.
const clockPoll = 50 * time.Millisecond

// WaitOrphanedSince waits until the controller manager has set the Unused
// condition of every claim (when this control plane maintains it) and the
// clock is past the second of the latest one, so that a snapshot created
// from then on is cut after every orphaned-since (the API's timestamps have
// one-second resolution). It returns that latest
// orphaned-since (the claims' creation on a control plane without the
// condition, where the janitor's mark will come later still).
func (f *Fixtures) WaitOrphanedSince(ctx context.Context, ns string, names ...string) (time.Time, error) {
	var latest time.Time
	for _, name := range names {
		c, err := f.WaitIdle(ctx, ns, name)
		if err != nil {
			return time.Time{}, err
		}
		since := c.CreationTimestamp.Time
		if cond := UnusedCondition(c); cond != nil && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.After(since) {
			// The end of the condition's second, as the janitor dates it.
			since = cond.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
		}
		if m, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"]); err == nil && m.After(since) {
			since = m // MarkIdle's, or a scan's
		}
		if since.After(latest) {
			latest = since
		}
	}
	// Past the clock skew too: a snapshot taken from then on rescues.
	return latest, waitClock(ctx, latest.Add(ClockSkew+time.Second))
}

// waitGraceOver waits until the latest orphaned-since of the claims is more
// than DemoGracePeriod old, with a second to spare for the janitor's
// rounding up.
func (f *Fixtures) waitGraceOver(ctx context.Context, ns string, names ...string) error {
	latest, err := f.WaitOrphanedSince(ctx, ns, names...)
	if err != nil {
		return err
	}
	return waitClock(ctx, latest.Add(DemoGracePeriod+2*time.Second))
}

// waitClock polls the clock until it is at or past t; t more than a minute
// away is an error rather than a long hang.
func waitClock(ctx context.Context, t time.Time) error {
	if d := time.Until(t); d > time.Minute {
		return fmt.Errorf("wait until %s: %s away", t.Format(time.RFC3339), d.Round(time.Second))
	}
	return wait.PollUntilContextTimeout(ctx, clockPoll, time.Minute+time.Second, true, func(context.Context) (bool, error) {
		return !time.Now().Before(t), nil
	})
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
	if m, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"]); err == nil {
		// MarkIdle's, on a stack without the condition.
		since = m
		ann["pvc-janitor.io/orphaned-since"] = m.UTC().Format(time.RFC3339)
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
			// The janitor dates the use by the end of the second the
			// condition names (classify: the API keeps whole seconds).
			since = cond.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
			ann["pvc-janitor.io/orphaned-since"] = since.UTC().Format(time.RFC3339)
		}
	}
	name := rescue.Name(claim, c.UID, since)
	_, err = f.Snapshot(ctx, ns, name, claim, "", l, ann)
	return name, err
}
