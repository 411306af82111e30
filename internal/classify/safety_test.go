package classify

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// allCases is the whole specification table: the state rules of docs/spec.md#states, row by row, then the
// safety paths of docs/safety.md.
func allCases() []classifyCase { return append(append([]classifyCase{}, cases...), safetyCases...) }

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// cutAt sets the snapshot's status.creationTime.
func cutAt(t time.Time) snapOpt { return func(s *inventory.Snapshot) { s.CutTime = &t } }

// dataOf records the orphaned-since a janitor rescue was taken for.
func dataOf(t time.Time) snapOpt { return func(s *inventory.Snapshot) { s.OrphanedSince = &t } }

// janitorSnap is an intact rescue of the janitor's of claim source
// (uid-<source>), taken for the orphaned-since data.
func janitorSnap(name, source string, data time.Time, opts ...snapOpt) inventory.Snapshot {
	return ownSnap(name, source, append([]snapOpt{ready, dataOf(data)}, opts...)...)
}

func attachedAt(pv, name string, attached bool, created time.Time) invOpt {
	return func(inv *inventory.Inventory) {
		inv.Attachments[pv] = append(inv.Attachments[pv],
			inventory.Attachment{Name: name, PVName: pv, NodeName: "node-1", Attached: attached, Created: created})
	}
}

// lastUsedAt records a use the janitor saw at t (pvc-janitor.io/last-used).
func lastUsedAt(t time.Time) claimOpt {
	return annot(inventory.AnnotationLastUsed, t.Format(time.RFC3339))
}

func attempts(n string, next time.Time) claimOpt {
	return func(c *inventory.Claim) {
		c.Annotations[inventory.AnnotationRescueAttempts] = n
		c.Annotations[inventory.AnnotationNextAttempt] = next.Format(time.RFC3339)
	}
}

// safetyCases: one row per way data could be lost that the classifier
// closes (docs/safety.md names them by these numbers).
var safetyCases = []classifyCase{
	// Path 1: supersession compares data times, never creation times.
	{
		name: "path 1: a late rescue of an older claim does not supersede a newer claim",
		inv: []invOpt{claims(pvc("b", workspace("w"), created(ago(10*time.Hour)), marked(ago(2*time.Hour))),
			pvc("a", workspace("w"), created(ago(30*time.Hour)), phase("Lost"))),
			// a's rescue, taken an hour ago, holds a's data as of 20 h ago.
			snaps(janitorSnap("a-rescue", "a", ago(20*time.Hour), inWorkspace("w"), snapAt(ago(time.Hour)), cutAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:00Z", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 1: another tool's late snapshot of an older orphaned claim holds that claim's data, not newer",
		inv: []invOpt{claims(pvc("b", workspace("w"), created(ago(10*time.Hour)), marked(ago(2*time.Hour))),
			pvc("a", workspace("w"), created(ago(30*time.Hour)), marked(ago(20*time.Hour)))),
			snaps(snap("a-backup", "a", ready, inWorkspace("w"), snapAt(ago(time.Hour)), cutAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 1: a rescue whose data is newer than this claim's orphaned-since supersedes it",
		inv: []invOpt{claims(pvc("b", workspace("w"), created(ago(10*time.Hour)), marked(ago(2*time.Hour)))),
			snaps(janitorSnap("c-rescue", "c", ago(90*time.Minute), inWorkspace("w"), snapAt(ago(time.Hour))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer snapshot ws/c-rescue of workspace w (of claim c), data time 2026-01-02T01:30:00Z",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded), snapshot: "c-rescue", discard: yes(), discardWhy: "intact rescue c-rescue"},
	},
	{
		name: "path 1 (descent): a rescue of another claim, however new, does not supersede: this claim is rescued on its own",
		inv: []invOpt{claims(pvc("b", workspace("w"), created(ago(10*time.Hour)), marked(ago(2*time.Hour)))),
			snaps(janitorSnap("c-rescue", "c", ago(90*time.Minute), inWorkspace("w"), snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	// Path 2: a use the janitor sees restarts the clock, whatever the state.
	{
		name: "path 2: a pod referencing a held claim clears its mark and attempt record",
		inv: []invOpt{claims(pvc("a", label(inventory.KeyHold, "true"), marked(ago(2*time.Hour)), attempts("1", ago(time.Minute)))),
			refs("a", pod("p", "volume d"))},
		want: want{state: Held, reason: "in use, so its orphaned-since mark is cleared", marks: usedNow(Marks{OrphanedSince: Remove, Attempts: Remove}), referrers: 1},
	},
	{
		name: "path 2: Unused False on a held claim clears its mark",
		inv:  []invOpt{claims(pvc("a", annot(inventory.KeyHold, "true"), marked(ago(2*time.Hour)), unused("False", ago(time.Hour))))},
		want: want{state: Held, reason: "held by annotation", marks: usedNow(Marks{OrphanedSince: Remove})},
	},
	{
		name: "path 2: a VolumeAttachment created after the mark is a use: the clock restarts",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), attachedAt("pv-a", "va-1", false, ago(time.Hour)),
			snaps(snap("a-backup", "a", ready, snapAt(ago(90*time.Minute))))},
		want: want{state: Grace, reason: "VolumeAttachment va-1 was created after its orphaned-since mark", marks: setBoth(now, Grace)},
	},
	{
		name: "path 2: a claim attached after its mark loses the mark",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), attachedAt("pv-a", "va-1", true, ago(time.Hour))},
		want: want{state: Attached, reason: "an attached volume is in use", marks: usedNow(Marks{OrphanedSince: Remove, Phase: Set, PhaseValue: Attached})},
	},
	{
		name: "path 2: a re-attach on an old VolumeAttachment is a use too",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), attempts("1", ago(time.Minute)))), attachedAt("pv-a", "va-1", true, ago(3*time.Hour))},
		want: want{state: Attached, reason: "an attached volume is in use", marks: usedNow(Marks{OrphanedSince: Remove, Phase: Set, PhaseValue: Attached, Attempts: Remove})},
	},
	{
		name: "path 2: once detached, a claim last seen Attached is not dated by the Unused condition",
		inv: []invOpt{claims(pvc("a", phaseLabel(Attached), unused("True", ago(5*time.Hour)))),
			snaps(snap("old", "a", ready, snapAt(ago(4*time.Hour))))},
		want: want{state: Grace, reason: "the volume was attached when last seen", marks: setBoth(now, Grace)},
	},
	{
		name: "path 2: an attachment older than the mark keeps it",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), attachedAt("pv-a", "va-1", false, ago(3*time.Hour))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 2: a use clears the attempt record",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), attempts("3", ago(-time.Hour)))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod", marks: usedNow(Marks{OrphanedSince: Remove, Attempts: Remove}), referrers: 1},
	},
	// Path 6: evidence that cannot be true is ignored.
	{
		name: "path 6: a mark earlier than the claim's creation (copied by a restore) is ignored",
		inv: []invOpt{claims(pvc("a", created(ago(time.Hour)), marked(ago(5*time.Hour)))),
			snaps(snap("a-copy", "a", ready, snapAt(ago(50*time.Minute))))},
		want: want{state: Grace, reason: "predates the claim's creation", marks: setBoth(now, Grace)},
	},
	{
		name: "path 6: a mark that does not parse is ignored and the claim marked afresh",
		inv:  []invOpt{claims(pvc("a", annot(inventory.AnnotationOrphanedSince, "yesterday")))},
		want: want{state: Grace, reason: "does not parse", marks: setBoth(now, Grace)},
	},
	{
		name: "path 6: an Unused condition without a lastTransitionTime is ignored",
		inv:  []invOpt{claims(pvc("a", unused("True", time.Time{})))},
		want: want{state: Grace, reason: "has no lastTransitionTime", marks: setBoth(now, Grace)},
	},
	{
		name: "path 6: an Unused condition from before the claim existed is ignored",
		inv:  []invOpt{claims(pvc("a", created(ago(time.Hour)), unused("True", ago(3*time.Hour))))},
		want: want{state: Grace, reason: "predates the claim's creation", marks: setBoth(now, Grace)},
	},
	// v3 finding 1 (issue 23): a use the janitor saw is recorded
	// (pvc-janitor.io/last-used) and no older evidence dates an orphan.
	{
		name: "v3 finding 1: an Unused condition older than the last use seen is stale: the old rescue does not count",
		inv: []invOpt{claims(pvc("a", unused("True", ago(5*time.Hour)), lastUsedAt(ago(time.Hour)))),
			snaps(janitorSnap("a-r1", "a", ago(5*time.Hour).Add(time.Second), cutAt(ago(4*time.Hour))))},
		want: want{state: Grace, reason: "predates the last use the janitor saw (2026-01-02T02:00:00Z): stale, ignored", marks: setBoth(now, Grace)},
	},
	{
		name: "v3 finding 1: a mark older than the last use seen is ignored",
		inv:  []invOpt{claims(pvc("a", marked(ago(5*time.Hour)), lastUsedAt(ago(time.Hour)))), snaps(snap("s", "a", ready, snapAt(ago(4*time.Hour))))},
		want: want{state: Grace, reason: "orphaned-since mark 2026-01-01T22:00:00Z predates the last use the janitor saw", marks: setBoth(now, Grace)},
	},
	{
		name: "v3 finding 1: a condition after the last use seen dates the orphan",
		inv:  []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour)), lastUsedAt(ago(3*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:01Z", since: tp(ago(2 * time.Hour).Add(time.Second)),
			marks: setBoth(ago(2*time.Hour).Add(time.Second), Orphaned)},
	},
	{
		name: "v3 finding 1: a mark at the second of the last use seen counts",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), lastUsedAt(ago(2*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:00Z", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "v3 finding 1: a last-used that does not parse is taken as a use seen now",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), unused("True", ago(3*time.Hour)), annot(inventory.AnnotationLastUsed, "soon")))},
		want: want{state: Grace, reason: `last-used mark "soon" does not parse: taken as a use seen now`, marks: usedNow(setBoth(now, Grace))},
	},
	{
		name: "v3 finding 1: a last-used before the claim's creation (copied) is ignored",
		inv:  []invOpt{claims(pvc("a", created(ago(time.Hour)), marked(ago(50*time.Minute)), lastUsedAt(ago(5*time.Hour))))},
		want: want{state: Orphaned, reason: "last-used mark 2026-01-01T22:00:00Z predates the claim's creation", since: tp(ago(50 * time.Minute)), marks: setPhase(Orphaned)},
	},
	{
		name: "v3 finding 1: a last use later than this run's clock dates the fresh mark",
		inv:  []invOpt{claims(pvc("a", lastUsedAt(now.Add(10*time.Second))))},
		want: want{state: Grace, reason: "marking it now", marks: setBoth(now.Add(10*time.Second), Grace)},
	},
	{
		name: "v3 finding 1: a pod using a claim whose Unused condition says True records the use",
		inv:  []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour)))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p", marks: usedNow(keep), referrers: 1},
	},
	{
		name: "v3 finding 1: a use already recorded at this second is not written again",
		inv:  []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour)), lastUsedAt(now))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p", marks: keep, referrers: 1},
	},
	{
		name: "v3 finding 1: a claim in use whose Unused condition agrees is not written every run",
		inv:  []invOpt{claims(pvc("a", unused("False", ago(time.Hour)))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p", marks: keep, referrers: 1},
	},
	{
		name: "v3 finding 1: Unused True with only a workload template referring agrees: not written every run",
		inv: []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour)))),
			refs("a", inventory.Referrer{Kind: "Deployment", Namespace: "ws", Name: "ide", Detail: "volume d"})},
		want: want{state: InUse, reason: "used by Deployment ws/ide", marks: keep, referrers: 1},
	},
	{
		name: "v3 finding 1: Unused True with only an ended pod referring agrees: not written every run",
		inv: []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour)))),
			refs("a", inventory.Referrer{Kind: "Pod", Namespace: "ws", Name: "job-1", Detail: "volume d", Terminal: true})},
		want: want{state: InUse, reason: "used by Pod ws/job-1", marks: keep, referrers: 1},
	},
	{
		name: "v3 finding 1: a held claim in use records the use with the mark's removal",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "true"), marked(ago(2*time.Hour)), lastUsedAt(ago(3*time.Hour)))), refs("a", pod("p", "volume d"))},
		want: want{state: Held, reason: "in use, so its orphaned-since mark is cleared", marks: usedNow(Marks{OrphanedSince: Remove}), referrers: 1},
	},
	// v3 finding 6 (issue 23): the cut (storage clock) must be at least
	// --clock-skew after orphaned-since (controller manager or API server).
	{
		name: "v3 finding 6: a cut exactly at orphaned-since is no rescue with a 2s clock skew",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("s", "a", ready, snapAt(ago(2*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:00Z", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "v3 finding 6: a cut at orphaned-since plus 2s rescues",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("s", "a", ready, cutAt(ago(2*time.Hour).Add(2*time.Second))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/s (intact, cut 2026-01-02T01:00:02Z)", since: tp(ago(2 * time.Hour)), marks: setPhase(Rescued), snapshot: "s"},
	},
	{
		name:   "v3 finding 6: without a margin the same second rescues",
		policy: func(p *Policy) { p.ClockSkew = 0 },
		inv:    []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("s", "a", ready, snapAt(ago(2*time.Hour))))},
		want:   want{state: Rescued, reason: "rescued by snapshot ws/s", since: tp(ago(2 * time.Hour)), marks: setPhase(Rescued), snapshot: "s"},
	},
	{
		name: "v3 finding 6: the janitor's own rescue cut behind the clock is SnapshotFailed, not silent",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(janitorSnap("a-rescue", "a", ago(2*time.Hour), cutAt(ago(2*time.Hour).Add(time.Second))))},
		want: want{state: SnapshotFailed, reason: "snapshot ws/a-rescue: cut 2026-01-02T01:00:01Z is within --clock-skew 2s of orphaned-since 2026-01-02T01:00:00Z: not trusted as the rescue; the next attempt takes a new one",
			since: tp(ago(2 * time.Hour)), marks: setPhase(SnapshotFailed), snapshot: "a-rescue"},
	},
	{
		name: "v3 finding 6: an own rescue of an earlier orphan period is stale, not behind the clock",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(janitorSnap("a-old", "a", ago(5*time.Hour), cutAt(ago(4*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:00Z", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	// Path 8: discard only on durable evidence whose time is known.
	{
		name: "path 8: a Pending newer claim supersedes but never justifies a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), phase("Pending")))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer claim ws/b", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			discard: no(), discardWhy: "kept"},
	},
	{
		name: "path 8: a Lost newer claim does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), phase("Lost")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 8: a newer claim in use justifies a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)))), refs("b", pod("ide", "volume home"))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer claim ws/b", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			discard: yes(), discardWhy: "claim b of the workspace is in use now"},
	},
	{
		name: "path 8 (descent): a newer claim in use created empty does not supersede (the returning user, a session's second claim)",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)))), refs("b", pod("ide", "volume home"))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 8 (descent): a newer claim created from a snapshot of this claim that holds its last data does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), fromSnapshot("a-user"))), refs("b", pod("ide", "volume home")),
			// Not ready (not intact): were it intact, it would rescue a.
			snaps(snap("a-user", "a", inWorkspace("w"), snapAt(ago(90*time.Minute)), cutAt(ago(90*time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 8 (descent): a claim created from a snapshot of this claim cut within --clock-skew of its last use supersedes it, never a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), fromSnapshot("a-user"))), refs("b", pod("ide", "volume home")),
			snaps(snap("a-user", "a", inWorkspace("w"), snapAt(ago(90*time.Minute)), cutAt(ago(2*time.Hour).Add(time.Second))))},
		want: want{state: Superseded, reason: "superseded by claim ws/b of workspace w, created from snapshot a-user of this claim", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			discard: no(), discardWhy: "kept: claim b moved on from this claim's data before its last use"},
	},
	{
		name: "path 8 (descent): a claim created from a snapshot of this claim cut before its last use supersedes it (the line forked), never a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), fromSnapshot("a-user"))), refs("b", pod("ide", "volume home")),
			snaps(snap("a-user", "a", inWorkspace("w"), snapAt(ago(3*time.Hour)), cutAt(ago(3*time.Hour))))},
		want: want{state: Superseded, reason: "superseded by claim ws/b of workspace w, created from snapshot a-user of this claim", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			discard: no(), discardWhy: "kept: claim b moved on from this claim's data before its last use"},
	},
	{
		name: "path 8: someone else's snapshot (data time only an upper bound) never justifies a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("b-user", "b", ready, inWorkspace("w"), snapAt(ago(time.Hour))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer snapshot ws/b-user", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			snapshot: "b-user", discard: no(), discardWhy: "kept"},
	},
	{
		name: "path 8: a rescue of the janitor's that is not ready never justifies a discard",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(ownSnap("b-rescue", "b", dataOf(ago(time.Hour)), inWorkspace("w"), snapAt(ago(30*time.Minute))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer snapshot ws/b-rescue", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded),
			snapshot: "b-rescue", discard: no(), discardWhy: "kept"},
	},
	{
		name: "path 8: a failed snapshot of another claim does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(ownSnap("b-rescue", "b", dataOf(ago(time.Hour)), inWorkspace("w"), failed("broken")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 8: a pre-provisioned snapshot is dated by its cut time, not its import",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("imported", "", ready, inWorkspace("w"), snapAt(ago(time.Minute)), cutAt(ago(72*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 8: a pre-provisioned snapshot cut after this claim's orphaned-since supersedes it (keep)",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("imported", "", ready, inWorkspace("w"), snapAt(ago(time.Minute)), cutAt(ago(time.Hour))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "(pre-provisioned), data time 2026-01-02T02:00:00Z", since: tp(ago(2 * time.Hour)),
			marks: setPhase(Superseded), snapshot: "imported", discard: no(), discardWhy: "kept"},
	},
	// Path 9: only an intact snapshot is a rescue.
	{
		name: "path 9: ready with status.error is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, failed("bad"), snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 9: a ready snapshot whose content is gone is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, snapAt(ago(time.Hour)), func(s *inventory.Snapshot) { s.ContentName = "gone" }))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 9: a ready snapshot whose content is bound to another snapshot is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, snapAt(ago(time.Hour)))),
			contentOf("s", inventory.Content{SnapshotUID: "someone-else", HasHandle: true})},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 9: a ready snapshot whose content has no handle is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, snapAt(ago(time.Hour)))),
			contentOf("s", inventory.Content{SnapshotUID: "snap-uid-s"})},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 9: a ready snapshot whose content is being deleted is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, snapAt(ago(time.Hour)))),
			contentOf("s", inventory.Content{SnapshotUID: "snap-uid-s", HasHandle: true, DeletionTimestamp: tp(ago(time.Minute))})},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "path 9: the janitor's own ready snapshot that is not intact is still in progress",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-rescue", "a", ready, dataOf(ago(2*time.Hour)), snapAt(ago(time.Hour)))),
			contentOf("a-rescue", inventory.Content{SnapshotUID: "snap-uid-a-rescue"})},
		want: want{state: Snapshotting, reason: "is ready but not intact: its VolumeSnapshotContent content-a-rescue has no snapshotHandle",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Snapshotting), snapshot: "a-rescue"},
	},
	{
		name: "path 9: the cut time, not the creation, decides a rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s", "a", ready, snapAt(ago(time.Hour)), cutAt(ago(3*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	// Path 13: attempts count across runs.
	{
		name: "path 13: failed attempts with the next not due yet: SnapshotFailed",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), attempts("3", ago(-time.Hour))))},
		want: want{state: SnapshotFailed, reason: "3 snapshot attempts failed; the next is due at 2026-01-02T04:00:00Z",
			since: tp(ago(2 * time.Hour)), marks: setPhase(SnapshotFailed)},
	},
	{
		name: "path 13: failed attempts with the next due: Orphaned again",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), attempts("3", ago(time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "own snapshot of an earlier orphan period is neither progress nor failure",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-old", "a", dataOf(ago(5*time.Hour)), failed("old error"), snapAt(ago(4*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
}

// TestUnusedConditionTrust: path 14, the condition is trusted only while the
// controller manager evidently maintains it.
func TestUnusedConditionTrust(t *testing.T) {
	oldPod := inventory.Referrer{Kind: "Pod", Namespace: "ws", Name: "p", Detail: "volume d", Created: ago(time.Hour)}
	newPod := oldPod
	newPod.Created = ago(time.Minute)
	donePod := oldPod
	donePod.Terminal = true
	for _, tc := range []struct {
		name string
		inv  []invOpt
		want string
	}{
		{"no claim carries it", []invOpt{claims(pvc("a"))}, ConditionAbsent},
		{"maintained", []invOpt{claims(pvc("a", unused("True", ago(3*time.Hour))), pvc("b", unused("False", ago(time.Hour)))),
			refs("b", oldPod)}, ConditionTrusted},
		{"frozen: True before a running pod older than two minutes was created",
			[]invOpt{claims(pvc("a", unused("True", ago(3*time.Hour)))), refs("a", oldPod)}, ConditionIgnored},
		{"a pod younger than two minutes is not yet evidence",
			[]invOpt{claims(pvc("a", unused("True", ago(3*time.Hour)))), refs("a", newPod)}, ConditionTrusted},
		{"a terminated pod is not a use the condition counts",
			[]invOpt{claims(pvc("a", unused("True", ago(3*time.Hour)))), refs("a", donePod)}, ConditionTrusted},
		{"True after the pod was created (it went, then a new one came) is not evidence of a frozen value",
			[]invOpt{claims(pvc("a", unused("True", ago(30*time.Minute)))), refs("a", oldPod)}, ConditionTrusted},
		{"a server without the condition (v1.35) and no claim carries it",
			[]invOpt{server("v1.35.4"), claims(pvc("a"))}, ConditionAbsent},
		{"a server without the condition (v1.35), yet a claim carries one: left by another version, frozen",
			[]invOpt{server("v1.35.4"), claims(pvc("a"), pvc("b", unused("True", ago(3*time.Hour))))}, ConditionIgnored},
		{"a v1.35 build with a suffix is still v1.35",
			[]invOpt{server("v1.35.4-eks-1a2b3c"), claims(pvc("a", unused("True", ago(3*time.Hour))))}, ConditionIgnored},
		{"alpha (v1.36): a maintained condition is trusted",
			[]invOpt{server("v1.36.3"), claims(pvc("a", unused("True", ago(3*time.Hour))))}, ConditionTrusted},
		{"beta (v1.37): a maintained condition is trusted",
			[]invOpt{server("v1.37.2"), claims(pvc("a", unused("True", ago(3*time.Hour))))}, ConditionTrusted},
		{"a newer server than the client knows (v1.38) is judged by the claims",
			[]invOpt{server("v1.38.0"), claims(pvc("a", unused("True", ago(3*time.Hour)))), refs("a", oldPod)}, ConditionIgnored},
		{"an unknown version is judged by the claims",
			[]invOpt{server(""), claims(pvc("a", unused("True", ago(3*time.Hour))))}, ConditionTrusted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := UnusedCondition(build(tc.inv...), now)
			if got != tc.want {
				t.Fatalf("UnusedCondition = %s (%s), want %s", got, why, tc.want)
			}
			if (got == ConditionIgnored) != (why != "") {
				t.Errorf("reason %q for %s", why, got)
			}
		})
	}
}

// server sets the API server's version of the inventory.
func server(v string) invOpt { return func(inv *inventory.Inventory) { inv.ServerVersion = v } }

func TestConditionSupport(t *testing.T) {
	for in, want := range map[string]string{
		"v1.34.0": SupportNone, "v1.35.4": SupportNone, "v1.35.4-gke.100": SupportNone, "v1.35+": SupportNone,
		"v1.36.3": SupportAlpha, "v1.37.2": SupportBeta, "v1.38.0": SupportBeta, "v1.40.1": SupportBeta,
		"": SupportUnknown, "v2.0.0": SupportUnknown, "garbage": SupportUnknown,
	} {
		if got := ConditionSupport(in); got != want {
			t.Errorf("ConditionSupport(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestConditionOfAnotherVersionIsNotOrphanedSince: on a v1.35 server a
// claim's Unused condition (left by a v1.37 control plane before a
// downgrade) never dates an orphan: the claim is Grace and marked afresh.
func TestConditionOfAnotherVersionIsNotOrphanedSince(t *testing.T) {
	inv := build(server("v1.35.4"), claims(pvc("a", unused("True", ago(3*time.Hour)))))
	d := Classify(inv, defaultPolicy(), now)[0]
	if d.State != Grace || d.OrphanedSince != nil {
		t.Fatalf("state %s since %v (%s), want Grace with no orphaned-since", d.State, d.OrphanedSince, d.Reason)
	}
	inv = build(server("v1.37.2"), claims(pvc("a", unused("True", ago(3*time.Hour)))))
	if d := Classify(inv, defaultPolicy(), now)[0]; d.State != Orphaned {
		t.Fatalf("on v1.37 the same claim is %s (%s), want Orphaned", d.State, d.Reason)
	}
}

// TestIgnoredConditionIsNotOrphanedSince: when the condition is ignored for
// the run, a claim with only the condition is Grace and marked afresh.
func TestIgnoredConditionIsNotOrphanedSince(t *testing.T) {
	frozen := inventory.Referrer{Kind: "Pod", Namespace: "ws", Name: "p", Detail: "volume d", Created: ago(time.Hour)}
	inv := build(claims(pvc("a", unused("True", ago(3*time.Hour))), pvc("b", unused("True", ago(3*time.Hour)))), refs("b", frozen))
	d := Classify(inv, defaultPolicy(), now)[0]
	if d.State != Grace || d.OrphanedSince != nil || d.Marks.OrphanedSince != Set || !d.Marks.OrphanedSinceValue.Equal(now) {
		t.Fatalf("state %s since %s marks %s: want Grace, unknown, marked now", d.State, fmtTime(d.OrphanedSince), fmtMarks(d.Marks))
	}
}

// TestIntact names each reason a snapshot is not intact.
func TestIntact(t *testing.T) {
	ok := inventory.Content{Name: "c", SnapshotUID: "u", HasHandle: true}
	base := inventory.Snapshot{Name: "s", UID: "u", ReadyToUse: true, ContentName: "c"}
	for _, tc := range []struct {
		name    string
		mutate  func(*inventory.Snapshot, *inventory.Content)
		missing bool
		want    string
	}{
		{"intact", func(*inventory.Snapshot, *inventory.Content) {}, false, ""},
		{"not ready", func(s *inventory.Snapshot, _ *inventory.Content) { s.ReadyToUse = false }, false, "not ready"},
		{"error", func(s *inventory.Snapshot, _ *inventory.Content) { s.Error = &inventory.SnapshotError{} }, false, "status.error"},
		{"deleting", func(s *inventory.Snapshot, _ *inventory.Content) { s.DeletionTimestamp = tp(now) }, false, "being deleted"},
		{"unbound", func(s *inventory.Snapshot, _ *inventory.Content) { s.ContentName = "" }, false, "not bound"},
		{"content gone", func(*inventory.Snapshot, *inventory.Content) {}, true, "does not exist"},
		{"foreign content", func(_ *inventory.Snapshot, c *inventory.Content) { c.SnapshotUID = "x" }, false, "another snapshot"},
		{"no handle", func(_ *inventory.Snapshot, c *inventory.Content) { c.HasHandle = false }, false, "no snapshotHandle"},
		{"content deleting", func(_ *inventory.Snapshot, c *inventory.Content) { c.DeletionTimestamp = tp(now) }, false, "VolumeSnapshotContent c is being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c := base, ok
			tc.mutate(&s, &c)
			contents := map[string]inventory.Content{}
			if !tc.missing {
				contents["c"] = c
			}
			got, why := Intact(&s, contents)
			if got != (tc.want == "") || !strings.Contains(why, tc.want) {
				t.Errorf("Intact = %v, %q; want %v, %q", got, why, tc.want == "", tc.want)
			}
		})
	}
}

// TestDataTime: the newest moment whose writes a snapshot can hold.
func TestDataTime(t *testing.T) {
	cut := ago(time.Hour)
	for _, tc := range []struct {
		name   string
		s      inventory.Snapshot
		source *time.Time
		want   time.Time
	}{
		{"janitor rescue: recorded orphaned-since", janitorSnap("r", "a", ago(5*time.Hour), cutAt(cut)), nil, ago(5 * time.Hour)},
		{"janitor rescue with an impossible record: cut", janitorSnap("r", "a", ago(time.Minute), cutAt(cut)), nil, cut},
		{"someone else's of an orphaned source: the source's orphaned-since", snap("x", "a", cutAt(cut)), tp(ago(3 * time.Hour)), ago(3 * time.Hour)},
		{"someone else's, source orphaned after the cut: cut", snap("x", "a", cutAt(cut)), tp(ago(time.Minute)), cut},
		{"someone else's, source unknown: cut", snap("x", "a", cutAt(cut)), nil, cut},
		{"no status.creationTime yet: creation", snap("x", "a", snapAt(ago(2*time.Hour))), nil, ago(2 * time.Hour)},
	} {
		if got := DataTime(&tc.s, tc.source); !got.Equal(tc.want) {
			t.Errorf("%s: DataTime = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// carrySessions is the operator's statement --sessions-carry-data
// (docs/spec.md#rule-sessions-carry-data).
func carrySessions(p *Policy) { p.SessionsCarryData = true }

// fromSnapshot is a claim created from snapshot name (spec.dataSource).
func fromSnapshot(name string) claimOpt { return func(c *inventory.Claim) { c.DataSource = name } }
