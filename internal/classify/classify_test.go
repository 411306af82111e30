package classify

import (
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The fixtures: every claim lives in namespace "ws", was created a day before
// now, is Bound and carries no marks unless a case says otherwise.

var now = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

const wsLabel = "example.com/workspace"

func ago(d time.Duration) time.Time { return now.Add(-d) }

func tp(t time.Time) *time.Time { return &t }

func defaultPolicy() Policy {
	return Policy{WorkspaceLabel: wsLabel, MinAge: 10 * time.Minute, GracePeriod: 30 * time.Minute, ClockSkew: 2 * time.Second}
}

type claimOpt func(*inventory.Claim)

func pvc(name string, opts ...claimOpt) inventory.Claim {
	c := inventory.Claim{
		Namespace: "ws", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
		CreationTimestamp: ago(24 * time.Hour),
		Annotations:       map[string]string{},
		Phase:             "Bound", VolumeName: "pv-" + name,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func created(t time.Time) claimOpt { return func(c *inventory.Claim) { c.CreationTimestamp = t } }
func label(k, v string) claimOpt {
	return func(c *inventory.Claim) {
		l := map[string]string{k: v}
		got := inventory.PickLabels(l, wsLabel)
		switch k {
		case wsLabel:
			c.Labels.Workspace = got.Workspace
		case inventory.LabelPhase:
			c.Labels.Phase, c.Labels.HasPhase = got.Phase, got.HasPhase
		case inventory.KeyHold:
			c.Labels.Hold, c.Labels.HasHold = got.Hold, got.HasHold
		}
	}
}
func annot(k, v string) claimOpt  { return func(c *inventory.Claim) { c.Annotations[k] = v } }
func workspace(w string) claimOpt { return label(wsLabel, w) }
func phase(p string) claimOpt     { return func(c *inventory.Claim) { c.Phase = p } }
func phaseLabel(s State) claimOpt { return label(inventory.LabelPhase, string(s)) }
func marked(t time.Time) claimOpt {
	return annot(inventory.AnnotationOrphanedSince, t.Format(time.RFC3339))
}
func deleting(t time.Time) claimOpt { return func(c *inventory.Claim) { c.DeletionTimestamp = &t } }
func unused(status string, t time.Time) claimOpt {
	return func(c *inventory.Claim) {
		c.Unused = &inventory.Condition{Status: status, LastTransitionTime: t}
	}
}
func owned(kind, name, uid string) claimOpt {
	return func(c *inventory.Claim) {
		c.Owners = append(c.Owners, inventory.OwnerRef{APIVersion: "example.com/v1", Kind: kind, Name: name, UID: types.UID(uid)})
	}
}

type snapOpt func(*inventory.Snapshot)

// snap is a snapshot of claim source, created an hour before now, not ready.
func snap(name, source string, opts ...snapOpt) inventory.Snapshot {
	s := inventory.Snapshot{Namespace: "ws", Name: name, UID: types.UID("snap-uid-" + name),
		CreationTimestamp: ago(time.Hour), SourceClaim: source}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func ready(s *inventory.Snapshot)   { s.ReadyToUse = true }
func archive(s *inventory.Snapshot) { s.Superseded = true }
func snapAt(t time.Time) snapOpt    { return func(s *inventory.Snapshot) { s.CreationTimestamp = t } }
func sourceUID(u string) snapOpt    { return func(s *inventory.Snapshot) { s.SourceUID = types.UID(u) } }
func inWorkspace(w string) snapOpt  { return func(s *inventory.Snapshot) { s.Workspace = w } }
func snapDeleting(t time.Time) snapOpt {
	return func(s *inventory.Snapshot) { s.DeletionTimestamp = &t }
}
func failed(msg string) snapOpt {
	return func(s *inventory.Snapshot) { s.Error = &inventory.SnapshotError{Message: msg, Time: ago(time.Minute)} }
}
func ownSnap(name, claim string, opts ...snapOpt) inventory.Snapshot {
	return snap(name, claim, append([]snapOpt{func(s *inventory.Snapshot) {
		s.ManagedByJanitor = true
		s.SourceUID = types.UID("uid-" + claim)
	}}, opts...)...)
}

type invOpt func(*inventory.Inventory)

func claims(cs ...inventory.Claim) invOpt {
	return func(inv *inventory.Inventory) { inv.Claims = append(inv.Claims, cs...) }
}

func snaps(ss ...inventory.Snapshot) invOpt {
	return func(inv *inventory.Inventory) {
		for _, s := range ss {
			inv.Snapshots[s.Namespace] = append(inv.Snapshots[s.Namespace], s)
		}
	}
}

func pod(name, detail string) inventory.Referrer {
	return inventory.Referrer{Kind: "Pod", Namespace: "ws", Name: name, Detail: detail}
}

func refs(claim string, rs ...inventory.Referrer) invOpt {
	return func(inv *inventory.Inventory) {
		k := inventory.Key{Namespace: "ws", Name: claim}
		inv.Referrers[k] = append(inv.Referrers[k], rs...)
	}
}

func liveOwner(uid, desc string) invOpt {
	return func(inv *inventory.Inventory) { inv.LiveOwners[types.UID(uid)] = desc }
}

func stsTemplate(ns, sts, tmpl string) invOpt {
	return func(inv *inventory.Inventory) {
		inv.StatefulSetTemplates = append(inv.StatefulSetTemplates,
			inventory.StatefulSetTemplate{Namespace: ns, StatefulSet: sts, Template: tmpl})
	}
}

func attachment(pv, node, name string, attached bool) invOpt {
	return func(inv *inventory.Inventory) {
		inv.Attachments[pv] = append(inv.Attachments[pv],
			inventory.Attachment{Name: name, PVName: pv, NodeName: node, Attached: attached})
	}
}

func build(opts ...invOpt) *inventory.Inventory {
	inv := &inventory.Inventory{
		Referrers:   map[inventory.Key][]inventory.Referrer{},
		LiveOwners:  map[types.UID]string{},
		PVs:         map[string]inventory.PV{},
		Attachments: map[string][]inventory.Attachment{},
		Snapshots:   map[string][]inventory.Snapshot{},
		Contents:    map[string]inventory.Content{},
		ServerTime:  now,
	}
	for _, o := range opts {
		o(inv)
	}
	for _, c := range inv.Claims {
		inv.PVs[c.VolumeName] = inventory.PV{Name: c.VolumeName, CSIDriver: "csi.example.com", VolumeHandle: "h-" + c.VolumeName}
	}
	// A ready snapshot is bound to an intact content unless the case says
	// otherwise (contentOf).
	for ns, list := range inv.Snapshots {
		for j := range list {
			s := &list[j]
			if s.ReadyToUse && s.ContentName == "" {
				s.ContentName = "content-" + s.Name
				if _, ok := inv.Contents[s.ContentName]; !ok {
					inv.Contents[s.ContentName] = inventory.Content{Name: s.ContentName, DeletionPolicy: "Retain",
						Snapshot: inventory.Key{Namespace: ns, Name: s.Name}, SnapshotUID: s.UID, HasHandle: true}
				}
			}
		}
	}
	return inv
}

// contentOf sets the content of snapshot snap (which must be bound to
// "content-"+snap by build) to c.
func contentOf(snap string, c inventory.Content) invOpt {
	return func(inv *inventory.Inventory) {
		c.Name = "content-" + snap
		inv.Contents[c.Name] = c
	}
}

type want struct {
	state  State
	reason string // substring of Decision.Reason
	since  *time.Time
	marks  Marks
	// snapshot is the name of Decision.Snapshot, "" for none.
	snapshot string
	// referrers is len(Decision.Referrers).
	referrers int
	// discard, when set, is Decision.Discard; discardWhy a substring of
	// Decision.DiscardReason.
	discard    *bool
	discardWhy string
}

// Mark shorthands.
var keep = Marks{}

func setPhase(s State) Marks { return Marks{Phase: Set, PhaseValue: s} }

// usedNow adds the record of a use seen now (docs/spec.md#rule-last-used) to m.
func usedNow(m Marks) Marks {
	m.LastUsed, m.LastUsedValue = Set, now
	return m
}

func setBoth(t time.Time, s State) Marks {
	return Marks{OrphanedSince: Set, OrphanedSinceValue: t, Phase: Set, PhaseValue: s}
}

func sameMarks(a, b Marks) bool {
	return a.OrphanedSince == b.OrphanedSince && a.OrphanedSinceValue.Equal(b.OrphanedSinceValue) &&
		a.Phase == b.Phase && a.PhaseValue == b.PhaseValue && a.Attempts == b.Attempts &&
		a.LastUsed == b.LastUsed && a.LastUsedValue.Equal(b.LastUsedValue)
}

func fmtMarks(m Marks) string {
	name := map[MarkAction]string{Keep: "Keep", Set: "Set", Remove: "Remove"}
	s := "orphanedSince=" + name[m.OrphanedSince]
	if m.OrphanedSince == Set {
		s += "(" + m.OrphanedSinceValue.Format(time.RFC3339Nano) + ")"
	}
	s += " phase=" + name[m.Phase]
	if m.Phase == Set {
		s += "(" + string(m.PhaseValue) + ")"
	}
	if m.Attempts != Keep {
		s += " attempts=" + name[m.Attempts]
	}
	if m.LastUsed != Keep {
		s += " lastUsed=" + name[m.LastUsed] + "(" + m.LastUsedValue.Format(time.RFC3339Nano) + ")"
	}
	return s
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "nil"
	}
	return t.Format(time.RFC3339Nano)
}

type classifyCase struct {
	name   string
	policy func(*Policy)
	// inv builds the inventory; the decision checked is the first claim's.
	inv  []invOpt
	want want
}

// cases is the specification of docs/spec.md#states: one case per row of the table, then
// one per precedence conflict and per rule of the marks.
var cases = []classifyCase{
	// --- one per row ---
	{
		name: "1 terminating",
		inv:  []invOpt{claims(pvc("a", deleting(ago(time.Minute)), marked(ago(2*time.Hour)), phaseLabel(Orphaned)))},
		want: want{state: Terminating, reason: "claim is being deleted (deletionTimestamp 2026-01-02T02:59:00Z)", marks: keep},
	},
	{
		name: "2 held by label",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "true"), phaseLabel(Orphaned), marked(ago(2*time.Hour))))},
		want: want{state: Held, reason: "held by label pvc-janitor.io/hold", marks: Marks{Phase: Remove}},
	},
	{
		name: "2 held by annotation",
		inv:  []invOpt{claims(pvc("a", annot(inventory.KeyHold, "true")))},
		want: want{state: Held, reason: "held by annotation pvc-janitor.io/hold", marks: keep},
	},
	{
		name: "2 hold value compared case-insensitively",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "True")))},
		want: want{state: Held, reason: "held by label", marks: keep},
	},
	{
		name: "2 hold false is no hold",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "false"), annot(inventory.KeyHold, "no"), marked(ago(2*time.Hour))))},
		want: want{state: Orphaned, reason: "no pod or workload references this claim", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "3 unbound pending",
		inv:  []invOpt{claims(pvc("a", phase("Pending"), phaseLabel(Grace)))},
		want: want{state: Unbound, reason: "claim is Pending, not Bound", marks: Marks{Phase: Remove}},
	},
	{
		name: "3 unbound lost",
		inv:  []invOpt{claims(pvc("a", phase("Lost")))},
		want: want{state: Unbound, reason: "claim is Lost, not Bound", marks: keep},
	},
	{
		name: "3 unbound empty phase reads as pending",
		inv:  []invOpt{claims(pvc("a", phase("")))},
		want: want{state: Unbound, reason: "claim is Pending, not Bound", marks: keep},
	},
	{
		name: "4 in use by a pod",
		inv:  []invOpt{claims(pvc("a")), refs("a", pod("ide-abc", "volume home"))},
		want: want{state: InUse, reason: "used by Pod ws/ide-abc (volume home)", marks: keep, referrers: 1},
	},
	{
		name: "4 in use by pods and a workload template",
		inv: []invOpt{claims(pvc("a")), refs("a", pod("ide-abc", "volume home"),
			inventory.Referrer{Kind: "Deployment", Namespace: "ws", Name: "x", Detail: "pod template"})},
		want: want{state: InUse, reason: "used by Pod ws/ide-abc (volume home), Deployment ws/x (pod template)", marks: keep, referrers: 2},
	},
	{
		name: "4 in use lists five referrers and counts the rest",
		inv: []invOpt{claims(pvc("a")), refs("a", pod("p1", "volume d"), pod("p2", "volume d"), pod("p3", "volume d"),
			pod("p4", "volume d"), pod("p5", "volume d"), pod("p6", "volume d"), pod("p7", "volume d"))},
		want: want{state: InUse, reason: "Pod ws/p4 (volume d), Pod ws/p5 (volume d) and 2 more", marks: keep, referrers: 7},
	},
	{
		name: "4 in use clears both marks",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), phaseLabel(Orphaned))), refs("a", pod("p", "ephemeral volume scratch"))},
		want: want{state: InUse, reason: "used by Pod ws/p (ephemeral volume scratch)", marks: usedNow(Marks{OrphanedSince: Remove, Phase: Remove}), referrers: 1},
	},
	{
		name: "4 in use clears an unparsable mark too",
		inv:  []invOpt{claims(pvc("a", annot(inventory.AnnotationOrphanedSince, "garbage"))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p", marks: usedNow(Marks{OrphanedSince: Remove}), referrers: 1},
	},
	{
		name: "4 owner alive",
		inv:  []invOpt{claims(pvc("a", owned("Workspace", "abc", "owner-1"))), liveOwner("owner-1", "Workspace/abc")},
		want: want{state: InUse, reason: "used by Workspace ws/abc (owner)", marks: keep, referrers: 1},
	},
	{
		name: "4 owner gone",
		inv:  []invOpt{claims(pvc("a", owned("Workspace", "abc", "owner-1"), marked(ago(2*time.Hour)))), liveOwner("owner-2", "Workspace/other")},
		want: want{state: Orphaned, reason: "no pod or workload references this claim", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "4 pod and live owner are both listed",
		inv: []invOpt{claims(pvc("a", owned("Workspace", "abc", "owner-1"))), liveOwner("owner-1", "Workspace/abc"),
			refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p (volume d), Workspace ws/abc (owner)", marks: keep, referrers: 2},
	},
	{
		name: "4 statefulset template produces the name",
		inv:  []invOpt{claims(pvc("data-web-0")), stsTemplate("ws", "web", "data")},
		want: want{state: InUse, reason: "used by StatefulSet ws/web (volumeClaimTemplate data)", marks: keep, referrers: 1},
	},
	{
		name: "4 statefulset template with a multi-digit ordinal and dashes in names",
		inv:  []invOpt{claims(pvc("my-data-my-web-12")), stsTemplate("ws", "my-web", "my-data")},
		want: want{state: InUse, reason: "used by StatefulSet ws/my-web (volumeClaimTemplate my-data)", marks: keep, referrers: 1},
	},
	{
		name: "4 statefulset near miss: ordinal not a number",
		inv:  []invOpt{claims(pvc("data-web-x", marked(ago(2*time.Hour)))), stsTemplate("ws", "web", "data")},
		want: want{state: Orphaned, reason: "no pod or workload references this claim", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "4 statefulset near miss: signed ordinal",
		inv:  []invOpt{claims(pvc("data-web-+1", marked(ago(2*time.Hour)))), stsTemplate("ws", "web", "data")},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "4 statefulset near miss: other statefulset name",
		inv:  []invOpt{claims(pvc("data-webx-0", marked(ago(2*time.Hour)))), stsTemplate("ws", "web", "data")},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "4 statefulset near miss: other namespace",
		inv:  []invOpt{claims(pvc("data-web-0", marked(ago(2*time.Hour)))), stsTemplate("other", "web", "data")},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "5 young",
		inv:  []invOpt{claims(pvc("a", created(ago(3*time.Minute)), phaseLabel(Grace)))},
		want: want{state: Young, reason: "created 3m0s ago, younger than min-age 10m0s", marks: Marks{Phase: Remove}},
	},
	{
		name: "6 attached",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			attachment("pv-a", "node-2", "va-old", false), attachment("pv-a", "node-1", "va-1", true)},
		want: want{state: Attached, reason: "volume pv-a is still attached to node node-1 (VolumeAttachment va-1); its orphaned-since mark is cleared",
			marks: usedNow(Marks{OrphanedSince: Remove, Phase: Set, PhaseValue: Attached})},
	},
	{
		name: "6 attached label already set",
		inv:  []invOpt{claims(pvc("a", phaseLabel(Attached))), attachment("pv-a", "node-1", "va-1", true)},
		want: want{state: Attached, reason: "attached to node node-1", marks: keep},
	},
	{
		name: "6 detached attachment does not count",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), attachment("pv-a", "node-1", "va-1", false)},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "7 rescued",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s1", "a", ready, sourceUID("uid-a"), snapAt(ago(time.Hour))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/s1 (intact, cut 2026-01-02T02:00:00Z)",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Rescued), snapshot: "s1"},
	},
	{
		name: "7 rescued at exactly orphaned-since plus the clock skew, without source-uid",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), phaseLabel(Rescued))),
			snaps(snap("s1", "a", ready, snapAt(ago(2*time.Hour).Add(2*time.Second))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/s1", since: tp(ago(2 * time.Hour)), marks: keep, snapshot: "s1"},
	},
	{
		name: "7 rescued picks the newest qualifying snapshot",
		inv: []invOpt{claims(pvc("a", marked(ago(3*time.Hour)))),
			snaps(snap("s-mid", "a", ready, snapAt(ago(2*time.Hour))), snap("s-new", "a", ready, snapAt(ago(time.Hour))),
				snap("s-newest-not-ready", "a", snapAt(ago(time.Minute))),
				snap("s-newest-deleting", "a", ready, snapAt(ago(time.Minute)), snapDeleting(ago(time.Second))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/s-new", since: tp(ago(3 * time.Hour)), marks: setPhase(Rescued), snapshot: "s-new"},
	},
	{
		name: "8 superseded by a newer claim of the workspace",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w"), created(ago(3*time.Hour)))),
			refs("b", pod("p", "volume home"))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer claim ws/b of workspace w, created 2026-01-02T00:00:00Z",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded)},
	},
	{
		name: "8 superseded by a newer snapshot of another claim of the workspace",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("b-snap", "b", ready, inWorkspace("w"), snapAt(ago(time.Hour))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "superseded by newer snapshot ws/b-snap of workspace w (of claim b), data time 2026-01-02T02:00:00Z, after this claim's orphaned-since 2026-01-02T01:00:00Z",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded), snapshot: "b-snap"},
	},
	{
		name: "9 snapshot failed",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-rescue-0123456789", "a", failed("rpc error: quota exceeded")))},
		want: want{state: SnapshotFailed, reason: "snapshot ws/a-rescue-0123456789 failed: rpc error: quota exceeded",
			since: tp(ago(2 * time.Hour)), marks: setPhase(SnapshotFailed), snapshot: "a-rescue-0123456789"},
	},
	{
		name: "10 snapshotting",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), phaseLabel(Orphaned))),
			snaps(ownSnap("a-rescue-0123456789", "a", snapAt(ago(time.Minute))))},
		want: want{state: Snapshotting, reason: "snapshot ws/a-rescue-0123456789 is not ready yet",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Snapshotting), snapshot: "a-rescue-0123456789"},
	},
	{
		name: "11 grace: orphaned-since unknown, marked with the server's clock",
		inv:  []invOpt{claims(pvc("a"))},
		want: want{state: Grace, reason: "no pod or workload references this claim; orphaned-since not known yet", marks: setBoth(now, Grace)},
	},
	{
		name: "11 grace: within the grace period",
		inv:  []invOpt{claims(pvc("a", marked(ago(10*time.Minute)), phaseLabel(Grace)))},
		want: want{state: Grace, reason: "orphaned since 2026-01-02T02:50:00Z, within the grace period of 30m0s", since: tp(ago(10 * time.Minute)), marks: keep},
	},
	{
		name: "12 orphaned",
		inv:  []invOpt{claims(pvc("a", marked(ago(time.Hour)), phaseLabel(Grace)))},
		want: want{state: Orphaned, reason: "no pod or workload references this claim; orphaned since 2026-01-02T02:00:00Z",
			since: tp(ago(time.Hour)), marks: setPhase(Orphaned)},
	},

	// --- precedence ---
	{
		name: "held beats in use",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "true"))), refs("a", pod("p", "volume d"))},
		want: want{state: Held, reason: "held by label", marks: keep, referrers: 1},
	},
	{
		name: "terminating beats held",
		inv:  []invOpt{claims(pvc("a", label(inventory.KeyHold, "true"), deleting(ago(time.Second)), phaseLabel(Orphaned)))},
		want: want{state: Terminating, reason: "claim is being deleted", marks: keep},
	},
	{
		name: "unbound beats in use",
		inv:  []invOpt{claims(pvc("a", phase("Pending"))), refs("a", pod("p", "volume d"))},
		want: want{state: Unbound, reason: "claim is Pending, not Bound", marks: keep},
	},
	{
		name: "in use beats young",
		inv:  []invOpt{claims(pvc("a", created(ago(time.Minute)))), refs("a", pod("p", "volume d"))},
		want: want{state: InUse, reason: "used by Pod ws/p (volume d)", marks: keep, referrers: 1},
	},
	{
		name: "young beats attached",
		inv:  []invOpt{claims(pvc("a", created(ago(time.Minute)))), attachment("pv-a", "node-1", "va-1", true)},
		want: want{state: Young, reason: "younger than min-age", marks: keep},
	},
	{
		name: "attached beats rescued",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), attachment("pv-a", "node-1", "va-1", true),
			snaps(snap("s1", "a", ready, snapAt(ago(time.Hour))))},
		want: want{state: Attached, reason: "attached to node node-1", marks: usedNow(Marks{OrphanedSince: Remove, Phase: Set, PhaseValue: Attached})},
	},
	{
		name: "rescued beats superseded",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w"), created(ago(3*time.Hour)))),
			refs("b", pod("p", "volume d")),
			snaps(ownSnap("a-archive", "a", ready, archive, inWorkspace("w"), snapAt(ago(time.Hour))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/a-archive", since: tp(ago(2 * time.Hour)), marks: setPhase(Rescued), snapshot: "a-archive"},
	},
	{
		name: "superseded beats snapshot failed",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w"), created(ago(3*time.Hour)))),
			snaps(ownSnap("a-rescue", "a", inWorkspace("w"), failed("boom")))},
		policy: carrySessions,
		want:   want{state: Superseded, reason: "superseded by newer claim ws/b", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded)},
	},
	{
		name: "superseded beats snapshotting",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-rescue", "a", inWorkspace("w")), snap("b-snap", "b", inWorkspace("w"), snapAt(ago(30*time.Minute))))},
		policy: carrySessions,
		want:   want{state: Superseded, reason: "superseded by newer snapshot ws/b-snap", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded), snapshot: "b-snap"},
	},
	{
		name: "snapshot failed beats grace",
		inv:  []invOpt{claims(pvc("a", marked(ago(5*time.Minute)))), snaps(ownSnap("a-rescue", "a", failed("no class"), snapAt(ago(4*time.Minute))))},
		want: want{state: SnapshotFailed, reason: "failed: no class", since: tp(ago(5 * time.Minute)), marks: setPhase(SnapshotFailed), snapshot: "a-rescue"},
	},

	// --- rescue evidence ---
	{
		name: "snapshot taken before orphaned-since is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s-old", "a", ready, sourceUID("uid-a"), snapAt(ago(3*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:00Z", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "own ready snapshot older than orphaned-since is neither rescue nor snapshotting",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-rescue", "a", ready, snapAt(ago(3*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "no rescue while orphaned-since is unknown",
		inv:  []invOpt{claims(pvc("a")), snaps(snap("s1", "a", ready, snapAt(ago(time.Minute))))},
		want: want{state: Grace, reason: "orphaned-since not known yet", marks: setBoth(now, Grace)},
	},
	{
		name: "snapshot whose source-uid is another claim of the same name is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s-of-earlier-a", "a", ready, sourceUID("uid-earlier-a"), snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of another claim's name is no rescue",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("s1", "ab", ready, snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot being deleted is no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s1", "a", ready, snapAt(ago(time.Hour)), snapDeleting(ago(time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name:   "trust existing snapshots: an older ready snapshot counts",
		policy: func(p *Policy) { p.TrustExistingSnapshots = true },
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s-old", "a", ready, snapAt(ago(3*time.Hour))))},
		want: want{state: Rescued, reason: "rescued by snapshot ws/s-old", since: tp(ago(2 * time.Hour)), marks: setPhase(Rescued), snapshot: "s-old"},
	},
	{
		name:   "trust existing snapshots: counts before any mark",
		policy: func(p *Policy) { p.TrustExistingSnapshots = true },
		inv:    []invOpt{claims(pvc("a")), snaps(snap("s-old", "a", ready, snapAt(ago(3*time.Hour))))},
		want:   want{state: Rescued, reason: "rescued by snapshot ws/s-old", marks: setBoth(now, Rescued), snapshot: "s-old"},
	},
	{
		name:   "trust existing snapshots: still not another claim's uid",
		policy: func(p *Policy) { p.TrustExistingSnapshots = true },
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s1", "a", ready, sourceUID("uid-earlier-a"), snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name:   "trust existing snapshots: a snapshot older than the claim is of an earlier claim",
		policy: func(p *Policy) { p.TrustExistingSnapshots = true },
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(snap("s-before-claim", "a", ready, snapAt(ago(25*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name:   "trust existing snapshots: not ready is no rescue",
		policy: func(p *Policy) { p.TrustExistingSnapshots = true },
		inv:    []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("s1", "a", snapAt(ago(time.Hour))))},
		want:   want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},

	// --- orphaned-since evidence ---
	{
		name: "unused condition later than the mark: condition wins, mark re-set, older snapshot no rescue",
		inv: []invOpt{claims(pvc("a", marked(ago(3*time.Hour)), unused("True", ago(time.Hour)), phaseLabel(Rescued))),
			snaps(snap("s1", "a", ready, snapAt(ago(2*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T02:00:01Z", since: tp(ago(time.Hour).Add(time.Second)),
			marks: setBoth(ago(time.Hour).Add(time.Second), Orphaned)},
	},
	{
		name: "mark later than the unused condition: mark wins",
		inv:  []invOpt{claims(pvc("a", marked(ago(time.Hour)), unused("True", ago(3*time.Hour)), phaseLabel(Orphaned)))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T02:00:00Z", since: tp(ago(time.Hour)), marks: keep},
	},
	{
		name: "unused condition without a mark: the end of the condition's second is orphaned-since and the mark",
		inv:  []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:01Z", since: tp(ago(2 * time.Hour).Add(time.Second)),
			marks: setBoth(ago(2*time.Hour).Add(time.Second), Orphaned)},
	},
	{
		name: "a rescue cut in the second the condition names does not count (the use may have ended after the cut, within that second)",
		inv: []invOpt{claims(pvc("a", unused("True", ago(time.Hour)))),
			snaps(ownSnap("s", "a", ready, snapAt(ago(time.Hour)), func(s *inventory.Snapshot) { t := ago(time.Hour); s.CutTime = &t }))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T02:00:01Z", since: tp(ago(time.Hour).Add(time.Second)),
			marks: setBoth(ago(time.Hour).Add(time.Second), Orphaned)},
	},
	{
		name: "unused condition with sub-second time: mark rounded up to whole seconds",
		inv:  []invOpt{claims(pvc("a", unused("True", ago(2*time.Hour).Add(300*time.Millisecond))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T01:00:01Z", since: tp(ago(2 * time.Hour).Add(time.Second)),
			marks: setBoth(ago(2*time.Hour).Add(time.Second), Orphaned)},
	},
	{
		name: "unused condition False is use, even with no pod listed",
		inv:  []invOpt{claims(pvc("a", unused("False", ago(3*time.Hour))))},
		want: want{state: InUse, reason: "Unused condition is False since 2026-01-02T00:00:00Z", marks: keep},
	},
	{
		name: "unused condition False after the mark: used again, marks cleared",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)), unused("False", ago(time.Minute)), phaseLabel(Orphaned)))},
		want: want{state: InUse, reason: "Unused condition is False since 2026-01-02T02:59:00Z", marks: usedNow(Marks{OrphanedSince: Remove, Phase: Remove})},
	},
	{
		name: "unparsable mark is re-set",
		inv:  []invOpt{claims(pvc("a", annot(inventory.AnnotationOrphanedSince, "yesterday"), phaseLabel(Grace)))},
		want: want{state: Grace, reason: "orphaned-since not known yet", marks: Marks{OrphanedSince: Set, OrphanedSinceValue: now}},
	},
	{
		name: "unparsable mark with the condition: re-set to the condition",
		inv:  []invOpt{claims(pvc("a", annot(inventory.AnnotationOrphanedSince, "2026-13-01"), unused("True", ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T02:00:01Z", since: tp(ago(time.Hour).Add(time.Second)), marks: setBoth(ago(time.Hour).Add(time.Second), Orphaned)},
	},

	// --- supersession evidence ---
	{
		name: "archive snapshot of another claim does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(ownSnap("b-archive", "b", ready, archive, inWorkspace("w"), snapAt(ago(time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of another claim being deleted does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("b-snap", "b", inWorkspace("w"), snapDeleting(ago(time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of another claim taken before this claim does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("b-snap", "b", ready, inWorkspace("w"), snapAt(ago(48*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of another workspace does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("b-snap", "b", inWorkspace("w2")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of this claim does not supersede it",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("a-user-snap", "a", inWorkspace("w"), snapAt(ago(time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "snapshot of this claim does not hide an older snapshot of another claim",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("a-user-snap", "a", inWorkspace("w"), snapAt(ago(time.Minute))),
				snap("b-snap", "b", inWorkspace("w"), snapAt(ago(90*time.Minute))))},
		policy: carrySessions,
		want:   want{state: Superseded, reason: "superseded by newer snapshot ws/b-snap", since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded), snapshot: "b-snap"},
	},
	{
		name: "snapshot of an earlier claim with this name supersedes when its data is newer than this claim's orphaned-since",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour)))),
			snaps(snap("a-user-snap", "a", inWorkspace("w"), snapAt(ago(time.Minute))),
				snap("old-a-copy", "a", inWorkspace("w"), sourceUID("uid-earlier-a"), snapAt(ago(90*time.Minute))))},
		policy: carrySessions,
		want: want{state: Superseded, reason: "ws/old-a-copy of workspace w (of an earlier claim a)",
			since: tp(ago(2 * time.Hour)), marks: setPhase(Superseded), snapshot: "old-a-copy"},
	},
	{
		name: "older claim of the workspace does not supersede",
		inv:  []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w"), created(ago(48*time.Hour))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "claim created in the same second does not supersede",
		inv:  []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "newer claim in another namespace does not supersede",
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))),
			pvc("b", workspace("w"), created(ago(time.Hour)), func(c *inventory.Claim) { c.Namespace = "other" }))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name:   "without a workspace label every claim is its own workspace",
		policy: func(p *Policy) { p.WorkspaceLabel = "" },
		inv: []invOpt{claims(pvc("a", workspace("w"), marked(ago(2*time.Hour))), pvc("b", workspace("w"), created(ago(time.Hour)))),
			snaps(snap("b-snap", "b", inWorkspace("w")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "claim without the workspace label is its own workspace",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour))), pvc("b", created(ago(time.Hour)))),
			snaps(snap("b-snap", "b", inWorkspace("")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},

	// --- own snapshots ---
	{
		name: "own snapshot being deleted is not progress",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-rescue", "a", failed("boom"), snapDeleting(ago(time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "someone else's pending snapshot is not the janitor's",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(snap("user-snap", "a", sourceUID("uid-a")))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "own archive snapshot pending is not snapshotting",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(ownSnap("a-archive", "a", archive))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour)), marks: setPhase(Orphaned)},
	},
	{
		name: "newest own snapshot decides between failed and snapshotting",
		inv: []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))),
			snaps(ownSnap("a-try1", "a", failed("boom"), snapAt(ago(time.Hour))), ownSnap("a-try2", "a", snapAt(ago(time.Minute))))},
		want: want{state: Snapshotting, reason: "snapshot ws/a-try2 is not ready yet", since: tp(ago(2 * time.Hour)), marks: setPhase(Snapshotting), snapshot: "a-try2"},
	},
	{
		name: "failed snapshot without a message",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour)))), snaps(ownSnap("a-rescue", "a", failed("")))},
		want: want{state: SnapshotFailed, reason: "failed: status.error without a message", since: tp(ago(2 * time.Hour)), marks: setPhase(SnapshotFailed), snapshot: "a-rescue"},
	},

	// --- boundaries ---
	{
		name: "grace boundary: exactly the grace period ago is orphaned",
		inv:  []invOpt{claims(pvc("a", marked(ago(30*time.Minute))))},
		want: want{state: Orphaned, reason: "orphaned since 2026-01-02T02:30:00Z", since: tp(ago(30 * time.Minute)), marks: setPhase(Orphaned)},
	},
	{
		name: "grace boundary: a second less is grace",
		inv:  []invOpt{claims(pvc("a", marked(ago(30*time.Minute-time.Second))))},
		want: want{state: Grace, reason: "within the grace period", since: tp(ago(30*time.Minute - time.Second)), marks: setPhase(Grace)},
	},
	{
		name: "min-age boundary: exactly min-age old is not young",
		inv:  []invOpt{claims(pvc("a", created(ago(10*time.Minute))))},
		want: want{state: Grace, reason: "orphaned-since not known yet", marks: setBoth(now, Grace)},
	},
	{
		name: "min-age boundary: a second younger is young",
		inv:  []invOpt{claims(pvc("a", created(ago(10*time.Minute-time.Second))))},
		want: want{state: Young, reason: "created 9m59s ago", marks: keep},
	},
	{
		name:   "grace period zero: orphaned once marked",
		policy: func(p *Policy) { p.GracePeriod = 0 },
		inv:    []invOpt{claims(pvc("a", marked(now)))},
		want:   want{state: Orphaned, reason: "orphaned since 2026-01-02T03:00:00Z", since: tp(now), marks: setPhase(Orphaned)},
	},

	// --- marks ---
	{
		name: "marks idempotence: marks already applied",
		inv:  []invOpt{claims(pvc("a", marked(ago(2*time.Hour).Add(time.Second)), unused("True", ago(2*time.Hour)), phaseLabel(Orphaned)))},
		want: want{state: Orphaned, reason: "orphaned since", since: tp(ago(2 * time.Hour).Add(time.Second)), marks: keep},
	},
	{
		name: "young keeps the orphaned-since mark",
		inv:  []invOpt{claims(pvc("a", created(ago(time.Minute)), marked(ago(time.Minute))))},
		want: want{state: Young, reason: "younger than min-age", marks: keep},
	},
	{
		name: "held keeps the orphaned-since mark",
		inv:  []invOpt{claims(pvc("a", annot(inventory.KeyHold, "true"), marked(ago(time.Hour))))},
		want: want{state: Held, reason: "held by annotation", marks: keep},
	},
	{
		name: "attached sets no orphaned-since mark",
		inv:  []invOpt{claims(pvc("a")), attachment("pv-a", "node-1", "va-1", true)},
		want: want{state: Attached, reason: "attached", marks: usedNow(setPhase(Attached))},
	},
}

func buildCase(tc classifyCase) (*inventory.Inventory, Policy) {
	p := defaultPolicy()
	if tc.policy != nil {
		tc.policy(&p)
	}
	return build(tc.inv...), p
}

func checkDecision(t *testing.T, d Decision, w want) {
	t.Helper()
	if d.State != w.state {
		t.Errorf("state = %s (%q), want %s", d.State, d.Reason, w.state)
	}
	if w.reason == "" || !strings.Contains(d.Reason, w.reason) {
		t.Errorf("reason = %q, want it to contain %q", d.Reason, w.reason)
	}
	if (d.OrphanedSince == nil) != (w.since == nil) || (d.OrphanedSince != nil && !d.OrphanedSince.Equal(*w.since)) {
		t.Errorf("orphanedSince = %s, want %s", fmtTime(d.OrphanedSince), fmtTime(w.since))
	}
	if !sameMarks(d.Marks, w.marks) {
		t.Errorf("marks = %s, want %s", fmtMarks(d.Marks), fmtMarks(w.marks))
	}
	if d.Marks.Changed() != (w.marks != keep) {
		t.Errorf("marks.Changed() = %v for %s", d.Marks.Changed(), fmtMarks(d.Marks))
	}
	got := ""
	if d.Snapshot != nil {
		got = d.Snapshot.Name
	}
	if got != w.snapshot {
		t.Errorf("snapshot = %q, want %q", got, w.snapshot)
	}
	if len(d.Referrers) != w.referrers {
		t.Errorf("referrers = %v, want %d of them", d.Referrers, w.referrers)
	}
	if w.discard != nil && (d.Discard != *w.discard || !strings.Contains(d.DiscardReason, w.discardWhy)) {
		t.Errorf("discard = %v (%q), want %v (%q)", d.Discard, d.DiscardReason, *w.discard, w.discardWhy)
	}
	// A discard on an intact rescue names it as Durable (reap reads that
	// one again before the delete); any other decision names none.
	if onRescue := d.Discard && strings.HasPrefix(d.DiscardReason, "newer data of the workspace is in intact rescue "); onRescue != (d.Durable != nil) ||
		(onRescue && !strings.Contains(d.DiscardReason, " "+d.Durable.Name+" ")) {
		t.Errorf("durable = %v for discard %v (%q)", d.Durable, d.Discard, d.DiscardReason)
	}
}

func TestClassify(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range allCases() {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			inv, p := buildCase(tc)
			ds := Classify(inv, p, now)
			if len(ds) != len(inv.Claims) {
				t.Fatalf("got %d decisions for %d claims", len(ds), len(inv.Claims))
			}
			checkDecision(t, ds[0], tc.want)
		})
	}
}

// TestClassifyCoversEveryState keeps the table honest: every state of the
// spec has at least one case.
func TestClassifyCoversEveryState(t *testing.T) {
	covered := map[State]bool{}
	for _, tc := range allCases() {
		covered[tc.want.state] = true
	}
	for _, s := range States {
		if !covered[s] {
			t.Errorf("no case for state %s", s)
		}
	}
}

// applyMarks writes m onto a copy of c the way the janitor's patch does.
func applyMarks(c inventory.Claim, m Marks) inventory.Claim {
	c.Annotations = maps.Clone(c.Annotations)
	switch m.OrphanedSince {
	case Set:
		c.Annotations[inventory.AnnotationOrphanedSince] = m.OrphanedSinceValue.Format(time.RFC3339)
	case Remove:
		delete(c.Annotations, inventory.AnnotationOrphanedSince)
	}
	switch m.Phase {
	case Set:
		c.Labels.Phase, c.Labels.HasPhase = string(m.PhaseValue), true
	case Remove:
		c.Labels.Phase, c.Labels.HasPhase = "", false
	}
	if m.Attempts == Remove {
		delete(c.Annotations, inventory.AnnotationRescueAttempts)
		delete(c.Annotations, inventory.AnnotationNextAttempt)
	}
	if m.LastUsed == Set {
		c.Annotations[inventory.AnnotationLastUsed] = m.LastUsedValue.Format(time.RFC3339)
	}
	return c
}

// TestClassifyMarksIdempotent applies each case's marks and classifies again:
// the state must not move and nothing more may be written.
func TestClassifyMarksIdempotent(t *testing.T) {
	for _, tc := range allCases() {
		t.Run(tc.name, func(t *testing.T) {
			inv, p := buildCase(tc)
			first := Classify(inv, p, now)
			for i := range inv.Claims {
				inv.Claims[i] = applyMarks(inv.Claims[i], first[i].Marks)
			}
			second := Classify(inv, p, now)
			for i, d := range second {
				if d.State != first[i].State {
					t.Errorf("claim %s: state moved from %s to %s after marking", d.Claim.Name, first[i].State, d.State)
				}
				if d.Marks.Changed() {
					t.Errorf("claim %s: marks %s after marking with %s", d.Claim.Name, fmtMarks(d.Marks), fmtMarks(first[i].Marks))
				}
			}
		})
	}
}

func TestClassifyOrderAndPointers(t *testing.T) {
	inv := build(
		claims(pvc("c"), pvc("a", phase("Pending")), pvc("b", workspace("w1"))),
		refs("c", pod("p", "volume d")),
	)
	ds := Classify(inv, defaultPolicy(), now)
	if len(ds) != 3 {
		t.Fatalf("got %d decisions, want 3", len(ds))
	}
	for i := range ds {
		if ds[i].Claim != &inv.Claims[i] {
			t.Errorf("decision %d points at %p, want &inv.Claims[%d]", i, ds[i].Claim, i)
		}
	}
	if got := []State{ds[0].State, ds[1].State, ds[2].State}; got[0] != InUse || got[1] != Unbound || got[2] != Grace {
		t.Errorf("states = %v, want [InUse Unbound Grace]", got)
	}
	if ds[2].Workspace != "w1" || ds[0].Workspace != "" {
		t.Errorf("workspaces = %q, %q; want \"\", \"w1\"", ds[0].Workspace, ds[2].Workspace)
	}
	if Classify(&inventory.Inventory{}, defaultPolicy(), now) != nil || Classify(nil, defaultPolicy(), now) != nil {
		t.Error("an empty inventory must give no decisions")
	}
}

// TestClassifyDoesNotModifyInventory guards purity: the referrers of an InUse
// decision may share the inventory's array, but appending owners must not
// write into it.
func TestClassifyDoesNotModifyInventory(t *testing.T) {
	shared := make([]inventory.Referrer, 1, 4)
	shared[0] = pod("p", "volume d")
	inv := build(claims(pvc("a", owned("Workspace", "abc", "owner-1"))), liveOwner("owner-1", "Workspace/abc"))
	inv.Referrers[inventory.Key{Namespace: "ws", Name: "a"}] = shared
	ds := Classify(inv, defaultPolicy(), now)
	if len(ds[0].Referrers) != 2 {
		t.Fatalf("referrers = %v, want pod and owner", ds[0].Referrers)
	}
	if spare := shared[:2]; spare[1] != (inventory.Referrer{}) {
		t.Errorf("Classify wrote %v into the inventory's referrer array", spare[1])
	}
	if len(inv.Claims[0].Annotations) != 0 || !reflect.DeepEqual(inv.Claims[0].Labels, inventory.ClaimLabels{}) {
		t.Errorf("Classify modified the claim: %v %v", inv.Claims[0].Labels, inv.Claims[0].Annotations)
	}
}

// TestClassifyDeterministic: snapshots come from a map, so ties between
// equally old snapshots must not depend on iteration order.
func TestClassifyDeterministic(t *testing.T) {
	var ss []inventory.Snapshot
	for i := range 20 {
		ss = append(ss, snap("s"+strconv.Itoa(i), "a", ready, snapAt(ago(time.Hour))))
	}
	for k := range len(ss) {
		inv := build(claims(pvc("a", marked(ago(2*time.Hour)))), snaps(append(append([]inventory.Snapshot{}, ss[k:]...), ss[:k]...)...))
		d := Classify(inv, defaultPolicy(), now)[0]
		if d.State != Rescued || d.Snapshot.Name != "s9" {
			t.Fatalf("rotation %d: state %s by %v, want Rescued by s9 (the greatest name among equals)", k, d.State, d.Snapshot)
		}
	}
}

func TestStsOrdinal(t *testing.T) {
	for name, want := range map[string]string{
		"data-web-0": "data-web", "data-web-10": "data-web", "data-web-007": "data-web",
		"data-web-x": "", "data-web-": "", "data-web--1": "data-web-", "-0": "", "0": "", "data-web-1a": "",
		"data-web-+1": "",
	} {
		got, ok := stsOrdinal(name)
		if ok != (want != "") || got != want {
			t.Errorf("stsOrdinal(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestClassifyMarksWholeSeconds: the API server's clock may carry fractions
// (a Date header does not, a caller's time.Time may); the mark is whole
// seconds, rounded up, so that writing it as RFC 3339 and reading it back is
// a no-op.
func TestClassifyMarksWholeSeconds(t *testing.T) {
	at := now.Add(700 * time.Millisecond)
	inv := build(claims(pvc("a")))
	d := Classify(inv, defaultPolicy(), at)[0]
	// Rounded up, never down: a use that ended during the pod list ended
	// before the mark (docs/spec.md#marks).
	want := now.Add(time.Second)
	if d.Marks.OrphanedSince != Set || !d.Marks.OrphanedSinceValue.Equal(want) || d.Marks.OrphanedSinceValue.Location() != time.UTC {
		t.Fatalf("marks = %s, want orphaned-since set to %s in UTC", fmtMarks(d.Marks), want.Format(time.RFC3339))
	}
	inv.Claims[0] = applyMarks(inv.Claims[0], d.Marks)
	if d := Classify(inv, defaultPolicy(), at.Add(time.Minute))[0]; d.Marks.Changed() || !d.OrphanedSince.Equal(want) {
		t.Errorf("after marking: marks %s, orphanedSince %s", fmtMarks(d.Marks), fmtTime(d.OrphanedSince))
	}
}
