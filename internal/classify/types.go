// Package classify decides, for every claim in scope, which state of docs/spec.md#states
// it is in. It is pure: it takes what was read (an inventory), the policy and
// the API server's clock, and returns decisions. It takes no client, no clock
// and no logger, so its table tests are the specification.
package classify

import (
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// What --superseded does with Superseded claims (docs/spec.md#rule-superseded-policy):
// keep them, archive them (a snapshot, then reap), or discard them on
// durable evidence of newer data.
const (
	SupersededKeep    = "keep"
	SupersededArchive = "archive"
	SupersededDiscard = "discard"
)

// Policy is the part of the configuration that classification depends on.
type Policy struct {
	// WorkspaceLabel names the label whose value is a claim's (and a
	// snapshot's) workspace. Empty: every claim is its own workspace.
	WorkspaceLabel string
	// MinAge: claims younger than this are Young.
	MinAge time.Duration
	// GracePeriod: orphans whose orphaned-since is more recent are in Grace.
	GracePeriod time.Duration
	// NoticePeriod (--notice-period, 0: off): an orphan past its grace
	// period is reaped no earlier than this long after its owner was told
	// (docs/spec.md#notice); MaxSnooze bounds how far past the notice's end
	// the owner's pvc-janitor.io/snooze-until may postpone it.
	NoticePeriod time.Duration
	MaxSnooze    time.Duration
	// TrustExistingSnapshots counts any ready snapshot of the claim as its
	// rescue, whenever it was taken.
	TrustExistingSnapshots bool
	// ClockSkew is the margin between the clocks a rescue is judged on
	// (docs/spec.md#rule-clock-skew): the cut time is the storage system's,
	// orphaned-since the controller manager's or the API server's. A
	// snapshot rescues only when cut at or after orphaned-since + ClockSkew.
	ClockSkew time.Duration
	// SessionsCarryData is the operator's statement --sessions-carry-data
	// (docs/spec.md#rule-sessions-carry-data): a named workspace's newer
	// sessions carry its older data. Without it only descent proves that
	// a copy holds a claim's data (docs/spec.md#rule-descent), and a
	// discard needs a copy that descends from the claim.
	SessionsCarryData bool
}

// MarkAction says what to do with one of the janitor's keys on a claim.
type MarkAction uint8

// Mark actions.
const (
	Keep   MarkAction = iota // leave the key as it is
	Set                      // set it to the decided value
	Remove                   // delete the key
)

// Marks is what the janitor should record on the claim. Applying it never
// touches keys outside inventory.Prefix. The actions come first and the
// values after them, so that a Decision stays small (one per claim).
type Marks struct {
	OrphanedSince MarkAction
	Phase         MarkAction
	// Attempts is Remove when a use was seen: the attempt record
	// (pvc-janitor.io/rescue-attempts and next-attempt) belongs to the
	// orphan period that the use ended. Never Set here: rescue writes it.
	Attempts MarkAction
	// LastUsed is Set when a use was seen that must be written down
	// (docs/spec.md#rule-last-used): pvc-janitor.io/last-used becomes
	// LastUsedValue, the API server's clock rounded up to the second. It is
	// never removed.
	LastUsed MarkAction
	// ReapAfter is Set when the owner's notice begins
	// (pvc-janitor.io/reap-after becomes ReapAfterValue) and Remove when a
	// use ends it (docs/spec.md#notice).
	ReapAfter MarkAction

	OrphanedSinceValue time.Time // when OrphanedSince == Set
	PhaseValue         State     // when Phase == Set
	LastUsedValue      time.Time
	ReapAfterValue     time.Time
}

// Changed reports whether applying m would change the claim.
func (m Marks) Changed() bool {
	return m.OrphanedSince != Keep || m.Phase != Keep || m.Attempts != Keep || m.LastUsed != Keep || m.ReapAfter != Keep
}

// RecordsUse reports whether m writes down a use the janitor saw: the
// orphaned-since mark removed, or the last use recorded. Such marks are
// written first, even while a run ends, and retried on a re-read.
func (m Marks) RecordsUse() bool {
	return m.OrphanedSince == Remove || m.LastUsed == Set
}

// UsedNow reports whether the claim was seen in use by this classification:
// InUse or Attached, or Held while a user references it (a hold does not
// stop a claim from being written: docs/spec.md#rule-restored-data-time
// dates such a claim now).
func (d *Decision) UsedNow() bool {
	return d.State == InUse || d.State == Attached || (d.State == Held && (len(d.Referrers) > 0 || d.Marks.RecordsUse()))
}

// Decision is the outcome for one claim.
type Decision struct {
	// Claim points into the inventory's Claims slice.
	Claim     *inventory.Claim
	Workspace string
	State     State
	// Reason is one human sentence, lower case, naming the evidence
	// (the referrers, the phase, the snapshot, the newer claim…).
	Reason string
	// OrphanedSince is the effective orphaned-since (the later of the mark
	// and the Unused condition's lastTransitionTime when True), nil when
	// unknown or when the claim is not orphaned.
	OrphanedSince *time.Time
	// Snapshot is the snapshot the state is about: the rescue for Rescued,
	// the janitor's own snapshot for Snapshotting/SnapshotFailed, the newer
	// snapshot of the workspace for Superseded (when that was the evidence).
	Snapshot *inventory.Snapshot
	// Referrers are what keeps an InUse claim in use.
	Referrers []inventory.Referrer
	// Marks to write.
	Marks Marks
	// DiscardReason says why Discard is set or not.
	DiscardReason string
	// Durable is the intact rescue a discard relies on, when that is its
	// durable evidence (nil for a claim in use, or no discard): reap reads
	// it again right before the delete (docs/spec.md#reap-rescue-reread).
	Durable *inventory.Snapshot
	// Discard is true for a Superseded claim when the evidence that the
	// workspace moved on is durable and its time known (docs/spec.md#rule-superseded):
	// only then may --superseded=discard delete it without a snapshot.
	// (The booleans sit together: a Decision is kept per claim.)
	Discard bool
	// CutBehind is true for a SnapshotFailed claim whose Snapshot is the
	// janitor's own intact rescue of this orphan period cut within
	// Policy.ClockSkew of its orphaned-since (docs/spec.md#rescue-behind-clock):
	// not trusted as the rescue, so the rescue replaces it.
	CutBehind bool
	// Notice is true for an orphan past its grace period while
	// Policy.NoticePeriod is set: it is reaped no earlier than NotBefore,
	// the end of its owner's notice, or the owner's snooze within
	// --max-snooze (docs/spec.md#notice). NoticeNote says what postponed it
	// ("" when only the notice did).
	Notice     bool
	NotBefore  *time.Time
	NoticeNote string
}
