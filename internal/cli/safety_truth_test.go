package cli_test

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/util/wait"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

// The safety tests judge the janitor by ground truth only: the objects the
// API server holds and what the test itself did (the claims and pods it
// created and deleted, and when). Nothing here reads the janitor's labels,
// annotations or report: a janitor that marks or labels wrongly cannot make
// its own deletions look safe.

// truthSnap is a VolumeSnapshot and its VolumeSnapshotContent as the API
// server holds them.
type truthSnap struct {
	Name string
	UID  types.UID
	// Source is spec.source.persistentVolumeClaimName ("" when the snapshot
	// was pre-provisioned from a content).
	Source string
	// Content is the bound VolumeSnapshotContent's name ("" when unbound).
	Content string
	// VolumeHandle is the bound content's spec.source.volumeHandle: the CSI
	// volume the storage system snapshotted ("" when pre-provisioned).
	VolumeHandle string
	// Labels are kept for the workspace link the test set itself
	// (foreign snapshots); never read for the janitor's own keys.
	Labels map[string]string
	// Created is metadata.creationTimestamp; Cut is status.creationTime, the
	// moment the storage system took it (Created until that is known).
	Created, Cut time.Time
	// Intact: readyToUse, no status.error, no deletionTimestamp, bound to a
	// content that exists, points back to this snapshot's UID, has a
	// snapshotHandle and no deletionTimestamp (SPEC §3, Evidence).
	Intact bool
	// Why says why it is not intact.
	Why string
	// Gone: the snapshot has a deletionTimestamp.
	Gone bool
}

// truthSnapshots reads every VolumeSnapshot of ns and the contents they are
// bound to, and judges each one from those objects alone.
func truthSnapshots(ctx context.Context, f *testenv.Fixtures, ns string) ([]truthSnap, error) {
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	contents, err := f.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list contents: %w", err)
	}
	byName := map[string]*snapv1.VolumeSnapshotContent{}
	for i := range contents.Items {
		byName[contents.Items[i].Name] = &contents.Items[i]
	}
	out := make([]truthSnap, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, judgeSnapshot(&l.Items[i], byName))
	}
	return out, nil
}

func judgeSnapshot(s *snapv1.VolumeSnapshot, contents map[string]*snapv1.VolumeSnapshotContent) truthSnap {
	ts := truthSnap{Name: s.Name, UID: s.UID, Labels: s.Labels, Created: s.CreationTimestamp.Time,
		Cut: s.CreationTimestamp.Time, Gone: s.DeletionTimestamp != nil}
	if s.Spec.Source.PersistentVolumeClaimName != nil {
		ts.Source = *s.Spec.Source.PersistentVolumeClaimName
	}
	st := s.Status
	if st != nil && st.CreationTime != nil {
		ts.Cut = st.CreationTime.Time
	}
	var c *snapv1.VolumeSnapshotContent
	if st != nil && st.BoundVolumeSnapshotContentName != nil {
		ts.Content = *st.BoundVolumeSnapshotContentName
		c = contents[ts.Content]
	}
	if c != nil && c.Spec.Source.VolumeHandle != nil {
		ts.VolumeHandle = *c.Spec.Source.VolumeHandle
	}
	if c != nil && (st == nil || st.CreationTime == nil) && c.Status != nil && c.Status.CreationTime != nil {
		ts.Cut = time.Unix(0, *c.Status.CreationTime)
	}
	switch {
	case s.DeletionTimestamp != nil:
		ts.Why = "being deleted"
	case st == nil || st.ReadyToUse == nil || !*st.ReadyToUse:
		ts.Why = "not ready"
	case st.Error != nil:
		ts.Why = "ready with status.error"
	case st.BoundVolumeSnapshotContentName == nil:
		ts.Why = "bound to no content"
	case c == nil:
		ts.Why = "its content " + *st.BoundVolumeSnapshotContentName + " does not exist"
	case c.DeletionTimestamp != nil:
		ts.Why = "its content is being deleted"
	case c.Spec.VolumeSnapshotRef.UID != s.UID || c.Spec.VolumeSnapshotRef.Name != s.Name || c.Spec.VolumeSnapshotRef.Namespace != s.Namespace:
		ts.Why = "its content points to another snapshot"
	case (c.Status == nil || c.Status.SnapshotHandle == nil || *c.Status.SnapshotHandle == "") &&
		(c.Spec.Source.SnapshotHandle == nil || *c.Spec.Source.SnapshotHandle == ""):
		ts.Why = "its content has no snapshotHandle"
	default:
		ts.Intact = true
	}
	return ts
}

// truthClaim is what the test knows of a claim it created: its identity
// (name, volume handle, creation time from the server's answer).
type truthClaim struct {
	Name, Handle string
	Created      time.Time
}

func truthOf(c *corev1.PersistentVolumeClaim, handle string) truthClaim {
	return truthClaim{Name: c.Name, Handle: handle, Created: c.CreationTimestamp.Time}
}

// of reports whether s is a snapshot of this claim: its spec.source names
// the claim, its content snapshotted the claim's volume, and it was created
// after the claim (a snapshot older than the claim is of an earlier claim of
// that name). Both timestamps have one-second resolution.
func (c truthClaim) of(s truthSnap) bool {
	return s.Source == c.Name && s.VolumeHandle == c.Handle && !s.Created.Before(c.Created)
}

// rescueAfter returns an intact snapshot of the claim that was cut after
// usedUntil, the moment the claim's last use is known to have ended (when
// the test started the delete of its last pod; the claim's creation when no
// pod ever used it). Cut times have one-second resolution: a snapshot is
// judged too early only when it was surely cut before usedUntil, that is
// when its cut second precedes usedUntil's.
func (c truthClaim) rescueAfter(snaps []truthSnap, usedUntil time.Time) (truthSnap, bool) {
	var best truthSnap
	found := false
	for _, s := range snaps {
		if !s.Intact || !c.of(s) || s.Cut.Before(usedUntil.Truncate(time.Second)) {
			continue
		}
		if !found || s.Cut.After(best.Cut) {
			best, found = s, true
		}
	}
	return best, found
}

// describeSnaps lists the snapshots of a claim, for failure messages.
func (c truthClaim) describeSnaps(snaps []truthSnap) string {
	out := ""
	for _, s := range snaps {
		if s.Source != c.Name {
			continue
		}
		why := "intact"
		if !s.Intact {
			why = s.Why
		}
		out += fmt.Sprintf("\n  snapshot %s (volume %q) created %s cut %s: %s", s.Name, s.VolumeHandle,
			s.Created.UTC().Format(time.RFC3339), s.Cut.UTC().Format(time.RFC3339), why)
	}
	if out == "" {
		out = "\n  no snapshot names it as its source"
	}
	return out
}

// claimDeleted reports whether the claim of this UID has been deleted: it
// has a deletionTimestamp or is gone (a claim deleted right after its rescue
// can stay Terminating for a long while, until the snapshot controller drops
// its pvc-as-source-protection finalizer). A claim of that name with
// another UID is a recreation: the original is gone.
func claimDeleted(ctx context.Context, f *testenv.Fixtures, ns, name string, uid types.UID) (bool, error) {
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return c.UID != uid || c.DeletionTimestamp != nil, nil
}

// syncDeletions waits (2 s at most) until a deletion watch has recorded
// every deletion a fresh list of ns shows; one it has not seen by then is
// recorded now, as late (later than it happened: invariant 2 is then weaker
// for it, invariant 1 is not). names lists the claims the test follows;
// deleted and late are guarded by mu.
func syncDeletions(f *testenv.Fixtures, ns string, mu *sync.Mutex, names func() []string, deleted map[string]time.Time, late map[string]bool) {
	ctx := context.Background()
	var missed []string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		live := map[string]bool{}
		for _, c := range l.Items {
			live[c.Name] = c.DeletionTimestamp == nil
		}
		mu.Lock()
		defer mu.Unlock()
		missed = missed[:0]
		for _, name := range names() {
			if _, seen := deleted[name]; !seen && !live[name] {
				missed = append(missed, name)
			}
		}
		return len(missed) == 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, name := range missed {
		if _, seen := deleted[name]; !seen {
			deleted[name], late[name] = time.Now(), true
		}
	}
}
