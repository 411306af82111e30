package reap

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Reapable reports whether a decision allows deleting the claim at now (the
// API server's clock of the read the decision comes from): its state may be
// reaped (stateReaps: Rescued, or Superseded with discard), and its
// orphaned-since is known and at least grace old (docs/spec.md#reap). The
// grace period is checked here and not
// left to the classifier's state because Rescued takes precedence over
// Grace: a snapshot someone else took a minute after the claim was marked
// would otherwise end the grace period at once.
//
// Under a notice (docs/spec.md#notice) it also waits for the notice's end,
// or the owner's snooze: a decision whose notice begins now, or whose end
// is not known, is not reapable.
func Reapable(d *classify.Decision, discard bool, grace time.Duration, now time.Time) bool {
	if !stateReaps(d, discard) {
		return false
	}
	if !noticeOver(d, now) {
		return false
	}
	return d.OrphanedSince != nil && !now.IsZero() && classify.GraceOver(*d.OrphanedSince, grace, now)
}

// stateReaps reports whether d's state lets the reap delete the claim at
// all, by the reap column of classify.StateRules (docs/spec.md#reap-only-rescued):
// on its intact rescue, or, for a discard (discard: --superseded=discard),
// only on the decision's durable evidence of newer data.
func stateReaps(d *classify.Decision, discard bool) bool {
	switch classify.RuleFor(d.State).Reap {
	case classify.ReapOnRescue:
		return true
	case classify.ReapOnDiscard:
		return discard && d.Discard
	case classify.NotReaped:
	}
	return false
}

// noticeOver reports whether the owner's notice of d (or the owner's
// snooze) ended by t (docs/spec.md#notice). A decision under no notice has
// none to wait for; one whose notice begins in its own read (the mark is
// to be written), or whose end is not known, has not ended. The reap asks
// it at the re-read's time and at the run's start (Options.RunStart): a
// notice the run itself began ends after its start, however short.
func noticeOver(d *classify.Decision, t time.Time) bool {
	return !d.Notice || (d.NotBefore != nil && d.Marks.ReapAfter != classify.Set && !t.Before(*d.NotBefore))
}

// noticeRunReason says why a claim whose notice ended by the re-read is
// not deleted in this run: the notice ended after the run began.
func noticeRunReason(d *classify.Decision, start time.Time) string {
	why := "its owner's notice runs until " + d.NotBefore.UTC().Format(time.RFC3339)
	if start.IsZero() {
		why += ", and this run's start is not known"
	} else {
		why += ", after this run began (" + start.UTC().Format(time.RFC3339) + ")"
	}
	if d.NoticeNote != "" {
		why += " (" + d.NoticeNote + ")"
	}
	return why + ": deleted only by a run that begins after it"
}

// notReapableReason says why Reapable refused a decision, for the report.
func notReapableReason(d *classify.Decision, discard bool, grace time.Duration, now time.Time) string {
	onDiscard := discard && classify.RuleFor(d.State).Reap == classify.ReapOnDiscard
	if onDiscard && !d.Discard {
		return "superseded, but not discarded: " + d.DiscardReason
	}
	if !onDiscard && !stateReaps(d, discard) {
		return "changed since the scan: now " + string(d.State) + ": " + d.Reason
	}
	if d.OrphanedSince == nil {
		return "orphaned-since not known yet: the grace period has not started"
	}
	if !noticeOver(d, now) && d.NotBefore != nil {
		why := "its owner's notice runs until " + d.NotBefore.UTC().Format(time.RFC3339) + ": not deleted before"
		if d.NoticeNote != "" {
			why += " (" + d.NoticeNote + ")"
		}
		return why
	}
	return fmt.Sprintf("orphaned since %s, within the grace period of %s: not deleted yet",
		d.OrphanedSince.UTC().Format(time.RFC3339), grace)
}

// Limit checks the blast radius: n deletions out of total claims in scope.
// It returns the reason when over either limit.
func Limit(n, total, maxDeletions int, maxPercent float64) string {
	return LimitOf("claims", n, total, maxDeletions, maxPercent)
}

// LimitOf is Limit for deletions of things other than claims (prune's
// rescues), named by noun (a plural).
func LimitOf(noun string, n, total, maxDeletions int, maxPercent float64) string {
	if n > maxDeletions {
		return fmt.Sprintf("blast radius: %d %s would be deleted, over --max-deletions %d; nothing was deleted", n, noun, maxDeletions)
	}
	if total > 0 {
		pct := 100 * float64(n) / float64(total)
		if pct > maxPercent+1e-9 {
			return fmt.Sprintf("blast radius: %d of %d %s in scope (%.1f%%) would be deleted, over --max-deletion-percent %g; nothing was deleted",
				n, total, noun, math.Round(pct*10)/10, maxPercent)
		}
	}
	return ""
}

// Verdict settles a delete that did not plainly succeed.
type Verdict int

// Verdicts of Settle.
const (
	// Deleted: our deletion was accepted (a lost response whose retry met
	// the result of the first attempt).
	Deleted Verdict = iota + 1
	// Gone: deleted by someone else since the read.
	Gone
	// Terminating: someone else asked for its deletion since the read.
	Terminating
	// Replaced: another claim now has the name.
	Replaced
	// Changed: the same claim, still live, changed since the read; Unrelated
	// decides whether the delete may be retried.
	Changed
)

// Settle decides what a delete of the claim with uid came to, from a read
// of the claim afterwards: cur is that read (nil when it is gone, 404), and
// maybeApplied says whether an earlier attempt of the delete may have
// reached the server with its response lost (a timeout, a reset, a 5xx).
// Only then do a vanished or terminating claim count as our deletion: a
// claim that was already going before any attempt of ours was deleted by
// someone else and is reported as skipped.
func Settle(uid types.UID, maybeApplied bool, cur *corev1.PersistentVolumeClaim) Verdict {
	switch {
	case cur == nil && maybeApplied:
		return Deleted
	case cur == nil:
		return Gone
	case cur.UID != uid:
		return Replaced
	case cur.DeletionTimestamp != nil && maybeApplied:
		return Deleted
	case cur.DeletionTimestamp != nil:
		return Terminating
	}
	return Changed
}

// unrelatedConditions are claim conditions that controllers change without
// any pod being involved (resize and volume modification in the
// controller). Every other condition, the KEP-5541 Unused condition first,
// and any type this list does not know, may say something about use: its
// change stops the retry.
var unrelatedConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimVolumeModifyingVolume:   true,
	corev1.PersistentVolumeClaimVolumeModifyVolumeError: true,
}

// Unrelated reports whether the claim changed from before (as classified)
// to after (as read once its delete's precondition failed) only in ways
// that say nothing about its use or its data: finalizers (the snapshot
// controller drops pvc-as-source-protection once a rescue is ready),
// managed fields, resourceVersion, generation, and the conditions of
// unrelatedConditions. Anything else (UID, deletionTimestamp, labels,
// annotations, owners, spec, status outside those conditions, the Unused
// condition) is a change the decision did not see: it returns false and
// what changed. A true result still needs a fresh check for use before the
// retry.
func Unrelated(before, after *corev1.PersistentVolumeClaim) (bool, string) {
	switch {
	case before.UID != after.UID:
		return false, "another claim now has this name"
	case after.DeletionTimestamp != nil:
		return false, "being deleted by someone else"
	case !apiequality.Semantic.DeepEqual(before.DeletionGracePeriodSeconds, after.DeletionGracePeriodSeconds):
		return false, "deletion grace period changed"
	case !apiequality.Semantic.DeepEqual(before.Labels, after.Labels):
		return false, "labels changed"
	case !apiequality.Semantic.DeepEqual(before.Annotations, after.Annotations):
		return false, "annotations changed"
	case !apiequality.Semantic.DeepEqual(before.OwnerReferences, after.OwnerReferences):
		return false, "owner references changed"
	case !apiequality.Semantic.DeepEqual(before.Spec, after.Spec):
		return false, "spec changed"
	}
	bs, as := before.Status, after.Status
	bs.Conditions, as.Conditions = relatedConditions(bs.Conditions), relatedConditions(as.Conditions)
	if !apiequality.Semantic.DeepEqual(bs, as) {
		for _, c := range as.Conditions {
			if string(c.Type) == inventory.ConditionUnused {
				if old := condition(before.Status.Conditions, c.Type); old == nil || old.Status != c.Status ||
					!old.LastTransitionTime.Equal(&c.LastTransitionTime) {
					return false, "its Unused condition changed (a pod used it)"
				}
			}
		}
		return false, "status changed"
	}
	return true, ""
}

func relatedConditions(cs []corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range cs {
		if !unrelatedConditions[c.Type] {
			out = append(out, c)
		}
	}
	return out
}

func condition(cs []corev1.PersistentVolumeClaimCondition, t corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaimCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// WorkspaceWaits says why the claim of d, reaped on its rescue, waits for
// its workspace (docs/spec.md#reap-workspace-first): another claim of its
// workspace is an orphan not yet rescued. "" when it need not wait (a
// discard does not: its evidence is newer data); ds are the decisions of
// the same read.
func WorkspaceWaits(ds []classify.Decision, d *classify.Decision) string {
	if classify.RuleFor(d.State).Reap != classify.ReapOnRescue {
		return ""
	}
	return classify.WorkspaceUnrescuedReason(ds, d)
}
