package rescue

import (
	"fmt"
	"sort"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The rescue's rules, as pure functions with the clock passed in: the I/O in
// the other files only gathers their inputs and carries out their answers.

// MaxRetryBackoff caps the wait between two failed runs' attempts: a
// permanently broken volume costs one attempt a day.
const MaxRetryBackoff = 24 * time.Hour

// attemptRecord is the claim's record of failed attempts
// (docs/spec.md#rescue), read by classify's one parser for the rescue and
// for the state SnapshotFailed alike (classify.AttemptRecord says what
// each asks of it).
type attemptRecord = classify.AttemptRecord

// readAttempts reads the attempt record from a claim's annotations. A value
// that does not parse is reported, and counts as no record: an unreadable
// record must not stop the claim from ever being rescued.
func readAttempts(ann map[string]string) attemptRecord { return classify.ReadAttempts(ann) }

// due reports whether a run may attempt a rescue now (server clock): the
// record's rule (classify.AttemptRecord.Due), which the classifier's
// SnapshotFailed applies too.
func due(attempts int, next *time.Time, now time.Time) bool {
	return classify.AttemptRecord{Attempts: attempts, Next: next}.Due(now)
}

// attemptsThisRun is how many attempts a run makes, given the failed ones so
// far: --snapshot-attempts in the first run, then one per due run, so that a
// permanently broken volume is not snapshotted perRun times in every run.
func attemptsThisRun(failedSoFar, perRun int) int {
	perRun = max(perRun, 1)
	return max(perRun-failedSoFar, 1)
}

// failedRuns is how many runs' attempts have failed once failed attempts
// have: the first run makes perRun of them, every later one a single one
// (attemptsThisRun).
func failedRuns(failed, perRun int) int {
	perRun = max(perRun, 1)
	if failed <= 0 {
		return 0
	}
	if failed <= perRun {
		return 1
	}
	return 1 + failed - perRun
}

// retryBackoff is the wait after the n-th failed run: base doubled per
// failed run after the first, at most MaxRetryBackoff.
func retryBackoff(runs int, base time.Duration) time.Duration {
	if base <= 0 || runs <= 0 {
		return 0
	}
	d := base
	for i := 1; i < runs; i++ {
		if d >= MaxRetryBackoff/2 {
			return MaxRetryBackoff
		}
		d *= 2
	}
	return min(d, MaxRetryBackoff)
}

// nextAttempt is when the next run may try again after this one's attempts
// failed, on the server's clock, rounded up to the second (the record is
// RFC 3339) by classify.CeilSecond, the rounding of every mark.
func nextAttempt(now time.Time, failed, perRun int, base time.Duration) time.Time {
	return classify.CeilSecond(now.Add(retryBackoff(failedRuns(failed, perRun), base)))
}

// clockWait says how long to wait until the API server's clock has passed
// the orphaned-since a rescue is for plus twice the clock skew
// (docs/spec.md#rescue-after-orphaned-since), so that the snapshot's cut
// time, on a storage clock up to skew behind the server's, is still at
// least skew after it and counts as the rescue (docs/spec.md#rule-clock-skew).
// This matters with --grace-period 0s, where the mark is the present second
// rounded up. ok is false when the wait is more than limit plus twice the
// skew: the run does not wait on a clock that far behind.
func clockWait(now, orphanedSince time.Time, skew, limit time.Duration) (wait time.Duration, ok bool) {
	target := orphanedSince.Add(2 * skew)
	if now.After(target) {
		return 0, true
	}
	// now is whole seconds: the first moment it is after target is the
	// next whole second after it.
	wait = target.Truncate(time.Second).Add(time.Second).Sub(now)
	return wait, wait <= limit+2*skew
}

// cutBehind says, for a rescue that became intact, whether its cut is too
// close to the orphaned-since it is for to count (docs/spec.md#rescue-behind-clock):
// the storage clock is more than the skew behind the server's. It returns
// the reason, which names the cut, the orphaned-since and the skew.
func cutBehind(cut, orphanedSince time.Time, skew time.Duration) (string, bool) {
	if !cut.Before(orphanedSince.Add(skew)) {
		return "", false
	}
	return fmt.Sprintf("cut %s is within --clock-skew %s of orphaned-since %s: not trusted as the rescue; the next attempt takes a new one",
		cut.UTC().Format(time.RFC3339), skew, orphanedSince.UTC().Format(time.RFC3339)), true
}

// stillTarget decides the pre-create re-check from the claim's re-classified
// decisions: the decision of the claim (same UID), and whether it may still
// be rescued. Otherwise the reason says why not, for the report.
func stillTarget(ds []classify.Decision, uid types.UID, superseded string) (*classify.Decision, bool, string) {
	for i := range ds {
		d := &ds[i]
		if d.Claim.UID != uid {
			continue
		}
		switch r := classify.RuleFor(d.State); {
		case r.Targeted(superseded):
			return d, true, ""
		case r.Snapshot == classify.SnapRescue:
			// By its own snapshot, which became ready since the scan: the
			// wait for it (no create) verifies that it is intact.
			if s := d.Snapshot; s != nil && s.ManagedByJanitor && s.SourceUID == uid {
				return d, true, ""
			}
		}
		return d, false, "re-checked just before the snapshot: " + string(d.State) + ": " + d.Reason
	}
	return nil, false, "re-checked just before the snapshot: the claim is gone or was replaced under its name since the scan"
}

// ownFor reports whether s, one of the janitor's own snapshots of the claim,
// is the rescue of orphanedSince: its orphaned-since annotation says so, or,
// on a snapshot of an older version that carried none, it was created at or
// after orphanedSince. Any other own snapshot is stale: it lacks the data
// written before the claim's current orphaned-since.
func ownFor(s *inventory.Snapshot, orphanedSince time.Time) bool {
	if s.OrphanedSince != nil {
		return s.OrphanedSince.Equal(orphanedSince)
	}
	return !s.CreationTimestamp.Before(orphanedSince)
}

// intact reports whether a snapshot is a rescue (docs/spec.md#evidence): ready,
// no error, not being deleted, bound to a content that exists (c non-nil),
// points back to it by UID, has a handle and is not being deleted. When it
// is not, why says what is missing.
func intact(s *inventory.Snapshot, c *inventory.Content) (ok bool, why string) {
	switch {
	case s.DeletionTimestamp != nil:
		return false, "the snapshot is being deleted"
	case s.Error != nil:
		return false, "the snapshot has status.error: " + s.Error.Message
	case !s.ReadyToUse:
		return false, "the snapshot is not ready to use"
	case s.ContentName == "":
		return false, "the snapshot is bound to no VolumeSnapshotContent"
	case c == nil:
		return false, "its VolumeSnapshotContent " + s.ContentName + " does not exist"
	case c.SnapshotUID != s.UID:
		return false, fmt.Sprintf("its VolumeSnapshotContent %s is bound to snapshot UID %q, not this one", c.Name, c.SnapshotUID)
	case !c.HasHandle:
		return false, "its VolumeSnapshotContent " + c.Name + " has no snapshotHandle"
	case c.DeletionTimestamp != nil:
		return false, "its VolumeSnapshotContent " + c.Name + " is being deleted"
	}
	return true, ""
}

// chooseClass picks the snapshot class for a claim's PV (docs/spec.md#rescue): the
// configured one, else the one default class of its CSI driver. None, or
// several, is an error naming why: never a guess.
func chooseClass(configured string, pv *inventory.PV, volumeName string, classes []snapv1.VolumeSnapshotClass) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if pv == nil {
		return "", fmt.Errorf("PersistentVolume %q of the claim was not found", volumeName)
	}
	if pv.CSIDriver == "" {
		return "", fmt.Errorf("PersistentVolume %q is not a CSI volume: it cannot be snapshotted", pv.Name)
	}
	var defaults []string
	for _, c := range classes {
		if c.Driver == pv.CSIDriver && c.Annotations[DefaultClassAnnotation] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	switch len(defaults) {
	case 0:
		return "", fmt.Errorf("no default VolumeSnapshotClass for CSI driver %s (set --snapshot-class)", pv.CSIDriver)
	case 1:
		return defaults[0], nil
	default:
		sort.Strings(defaults)
		return "", fmt.Errorf("several default VolumeSnapshotClasses for CSI driver %s (%v): set --snapshot-class", pv.CSIDriver, defaults)
	}
}
