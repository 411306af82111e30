package classify

import (
	"strconv"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Intact reports whether s may count as a rescue or as durable evidence of
// data (docs/spec.md#evidence), and when not, why. Ready alone is not enough: a
// ready snapshot being deleted, carrying an error, or whose content is gone,
// foreign, being deleted or without a storage-side handle holds nothing a
// restore could use.
func Intact(s *inventory.Snapshot, contents map[string]inventory.Content) (bool, string) {
	switch {
	case !s.ReadyToUse:
		return false, "not ready to use"
	case s.Error != nil:
		msg := s.Error.Message
		if msg == "" {
			msg = "status.error without a message"
		}
		return false, "ready but carries status.error: " + msg
	case s.DeletionTimestamp != nil:
		return false, "being deleted"
	case s.ContentName == "":
		return false, "not bound to a VolumeSnapshotContent"
	}
	c, ok := contents[s.ContentName]
	switch {
	case !ok:
		return false, "its VolumeSnapshotContent " + s.ContentName + " does not exist"
	case c.SnapshotUID != s.UID:
		return false, "its VolumeSnapshotContent " + s.ContentName + " is bound to another snapshot (volumeSnapshotRef UID " + string(c.SnapshotUID) + ")"
	case !c.HasHandle:
		return false, "its VolumeSnapshotContent " + s.ContentName + " has no snapshotHandle"
	case c.DeletionTimestamp != nil:
		return false, "its VolumeSnapshotContent " + s.ContentName + " is being deleted"
	}
	return true, ""
}

// CutTime is when the storage system took s: status.creationTime, else (not
// known yet) the object's creationTimestamp.
func CutTime(s *inventory.Snapshot) time.Time {
	if s.CutTime != nil && !s.CutTime.IsZero() {
		return *s.CutTime
	}
	return s.CreationTimestamp
}

// DataTime is the newest moment whose writes s can hold (docs/spec.md#evidence):
// the orphaned-since its source claim had when it was cut, when that is
// known and earlier than the cut, otherwise the cut time. recorded is the
// janitor's own record on the snapshot (pvc-janitor.io/orphaned-since);
// source is the source claim's current orphaned-since, when the claim is
// known, was orphaned when the snapshot was cut, and is the snapshot's
// source (not an earlier claim of the same name). Both may be nil.
//
// Supersession compares data times, never creation times: a rescue of an old
// claim taken late holds the old claim's data, not newer data.
func DataTime(s *inventory.Snapshot, source *time.Time) time.Time {
	cut := CutTime(s)
	if s.ManagedByJanitor && s.OrphanedSince != nil && s.OrphanedSince.Before(cut) {
		return *s.OrphanedSince
	}
	if source != nil && source.Before(cut) {
		return *source
	}
	return cut
}

// DataTimeKnown reports whether s's data time is recorded, not estimated:
// the janitor's own rescues record the orphaned-since they rescue; anyone
// else's snapshot's data time is only an upper bound (the claim may have been
// idle long before the cut, or written right up to it).
func DataTimeKnown(s *inventory.Snapshot) bool {
	return s.ManagedByJanitor && s.OrphanedSince != nil && !s.Superseded
}

// Unused-condition trust, reported as the report's "unusedCondition".
const (
	ConditionTrusted = "trusted"
	ConditionIgnored = "ignored"
	ConditionAbsent  = "absent"
)

// What a server's version says of the Unused condition (KEP-5541, feature
// gate PersistentVolumeClaimUnusedSinceTime).
const (
	// SupportNone: the condition does not exist (before v1.36).
	SupportNone = "none"
	// SupportAlpha: it exists behind an alpha gate, off unless enabled
	// (v1.36); the claims show whether it is on.
	SupportAlpha = "alpha"
	// SupportBeta: beta, on unless disabled (v1.37 and later).
	SupportBeta = "beta"
	// SupportUnknown: the version is unknown or does not parse.
	SupportUnknown = "unknown"
)

// ConditionSupport says what a Kubernetes version such as "v1.35.4" (a
// server's gitVersion, build suffixes allowed) offers of the Unused
// condition. Only SupportNone changes a decision (UnusedCondition): the
// others leave it to what the claims show.
func ConditionSupport(version string) string {
	v := strings.TrimPrefix(version, "v")
	major, rest, ok := strings.Cut(v, ".")
	if !ok || major != "1" {
		return SupportUnknown
	}
	minorText, _, _ := strings.Cut(rest, ".")
	minor, err := strconv.Atoi(strings.TrimRight(minorText, "+"))
	if err != nil {
		return SupportUnknown
	}
	switch {
	case minor < 36:
		return SupportNone
	case minor == 36:
		return SupportAlpha
	}
	return SupportBeta
}

// frozenAfter is how long a non-terminal pod must have existed before its
// claim's Unused condition is expected to say False: the controller manager
// is given two minutes to notice a new pod.
const frozenAfter = 2 * time.Minute

// UnusedCondition decides whether this run trusts the Unused condition of
// KEP-5541 (docs/spec.md#marks). It is "absent" when no claim in scope carries
// it, "ignored" when the controller manager evidently does not maintain it (a
// claim that a non-terminal pod older than two minutes references shows
// Unused: True with a lastTransitionTime before that pod was created: a gate
// skew or a frozen value), and "trusted" otherwise. The second value names
// the evidence for "ignored".
func UnusedCondition(inv *inventory.Inventory, now time.Time) (string, string) {
	if ConditionSupport(inv.ServerVersion) == SupportNone {
		// No controller of this version maintains the condition: one a
		// claim carries was left by another version (a downgrade, a
		// restored backup of etcd) or another writer, and is frozen.
		for i := range inv.Claims {
			if cl := &inv.Claims[i]; cl.Unused != nil {
				return ConditionIgnored, "Kubernetes " + inv.ServerVersion + " has no Unused condition (it came in v1.36), yet claim " +
					cl.Namespace + "/" + cl.Name + " carries one: nothing maintains it"
			}
		}
		return ConditionAbsent, ""
	}
	seen := false
	for i := range inv.Claims {
		cl := &inv.Claims[i]
		u := cl.Unused
		if u == nil {
			continue
		}
		seen = true
		if u.Status != "True" {
			continue
		}
		for _, r := range inv.Referrers[cl.Key()] {
			if r.Kind != "Pod" || r.Terminal || r.Created.IsZero() || now.Sub(r.Created) < frozenAfter {
				continue
			}
			if u.LastTransitionTime.Before(r.Created) {
				return ConditionIgnored, "claim " + cl.Namespace + "/" + cl.Name + " shows Unused: True since " +
					u.LastTransitionTime.UTC().Format(time.RFC3339) + " while pod " + r.Name + ", created " +
					r.Created.UTC().Format(time.RFC3339) + ", references it"
			}
		}
	}
	if !seen {
		return ConditionAbsent, ""
	}
	return ConditionTrusted, ""
}

// endOfSecond is the end of the second t falls in: the upper bound of a
// moment the API server recorded to the second (lastTransitionTime is
// truncated, so the use it dates ended before the next second begins).
func endOfSecond(t time.Time) time.Time {
	return t.Truncate(time.Second).Add(time.Second).UTC()
}

// CeilSecond rounds t up to a whole second, in UTC: a mark is written
// without fractions, and rounding down could place it before the end of a
// use (docs/spec.md#rule-last-used) or end a notice early. The one rounding
// of the classifier's marks and of mark.UseTime; the zero time stays zero.
func CeilSecond(t time.Time) time.Time {
	tr := t.Truncate(time.Second)
	if tr.Before(t) {
		tr = tr.Add(time.Second)
	}
	return tr.UTC()
}
