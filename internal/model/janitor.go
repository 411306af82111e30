package model

import (
	"fmt"
	"sort"
	"strings"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
)

// Inventory is what a read of the namespace at now (the API server's
// clock as the janitor sees it) would give: kube.Read's reduction of the
// world's claims, pods and snapshots.
func (w *World) Inventory(now time.Time) *inventory.Inventory {
	inv := &inventory.Inventory{Referrers: map[inventory.Key][]inventory.Referrer{}, PVs: map[string]inventory.PV{},
		Snapshots: map[string][]inventory.Snapshot{}, Contents: map[string]inventory.Content{}, ServerTime: now,
		ServerVersion: "v1.35.4"}
	if w.Cfg.Condition {
		inv.ServerVersion = "v1.37.0"
	}
	for _, c := range w.LiveClaims() {
		cl := inventory.Claim{Namespace: NS, Name: c.Name, UID: c.UID, ResourceVersion: "1", CreationTimestamp: c.Created,
			Annotations: make(map[string]string, len(c.Ann)), Phase: "Bound", VolumeName: "pv-" + string(c.UID),
			DataSource: c.DataSource}
		for k, v := range c.Ann {
			cl.Annotations[k] = v
		}
		if w.Cfg.Policy.WorkspaceLabel != "" && c.Labeled {
			cl.Labels.Workspace = c.Line.User
		}
		cl.Labels.Phase, cl.Labels.HasPhase = c.PhaseLabel, c.PhaseLabel != ""
		cl.Labels.Hold, cl.Labels.HasHold = c.HoldLabel, c.HoldLabel != ""
		if c.Unused != nil {
			u := *c.Unused
			cl.Unused = &u
		}
		if c.Pod != "" {
			inv.Referrers[cl.Key()] = []inventory.Referrer{{Kind: "Pod", Namespace: NS, Name: c.Pod,
				Detail: "volume " + c.Line.Slot, Created: c.PodStart}}
		}
		inv.PVs[cl.VolumeName] = inventory.PV{Name: cl.VolumeName, CSIDriver: "csi.model", VolumeHandle: string(c.UID), ReclaimPolicy: "Delete"}
		inv.Claims = append(inv.Claims, cl)
	}
	for _, s := range w.LiveSnaps() {
		cut := s.Cut
		is := inventory.Snapshot{Namespace: NS, Name: s.Name, UID: s.UID, CreationTimestamp: s.Created, SourceClaim: s.SourceName,
			SourceUID: s.SourceUID, ManagedByJanitor: s.Janitor, Superseded: s.Archive, OrphanedSince: s.Since,
			RestoredDataTime: s.Restored, CutTime: &cut, ReadyToUse: true, ContentName: "content-" + string(s.UID)}
		if w.Cfg.Policy.WorkspaceLabel != "" {
			is.Workspace = s.Workspace
		}
		policy := "Delete"
		if s.Retain {
			policy = "Retain"
		}
		inv.Contents[is.ContentName] = inventory.Content{Name: is.ContentName, DeletionPolicy: policy, Snapshot: is.Key(),
			SnapshotUID: s.UID, HasHandle: true}
		inv.Snapshots[NS] = append(inv.Snapshots[NS], is)
	}
	return inv
}

func (w *World) claimByUID(uid types.UID) *Claim {
	for _, c := range w.Claims {
		if c.UID == uid && !c.Deleted {
			return c
		}
	}
	return nil
}

func (w *World) snapByUID(uid types.UID) *Snap {
	for _, s := range w.Snaps {
		if s.UID == uid && !s.Deleted {
			return s
		}
	}
	return nil
}

// applyMarks writes a decision's marks on the claim, as mark.Patch would.
func (w *World) applyMarks(c *Claim, m classify.Marks, run int) {
	switch m.OrphanedSince {
	case classify.Set:
		c.Ann[inventory.AnnotationOrphanedSince] = m.OrphanedSinceValue.UTC().Format(time.RFC3339)
	case classify.Remove:
		delete(c.Ann, inventory.AnnotationOrphanedSince)
	}
	switch m.Phase {
	case classify.Set:
		c.PhaseLabel = string(m.PhaseValue)
	case classify.Remove:
		c.PhaseLabel = ""
	}
	if m.Attempts == classify.Remove {
		delete(c.Ann, inventory.AnnotationRescueAttempts)
		delete(c.Ann, inventory.AnnotationNextAttempt)
	}
	if m.LastUsed == classify.Set {
		c.Ann[inventory.AnnotationLastUsed] = m.LastUsedValue.UTC().Format(time.RFC3339)
	}
	switch m.ReapAfter {
	case classify.Set:
		c.Ann[inventory.AnnotationReapAfter] = m.ReapAfterValue.UTC().Format(time.RFC3339)
		c.ReapAfter, c.NoticeRun = m.ReapAfterValue, run
	case classify.Remove:
		delete(c.Ann, inventory.AnnotationReapAfter)
		c.ReapAfter, c.NoticeRun = time.Time{}, 0
	}
}

// ReapAsksRunStart mirrors reap's planOf since 481b474 (finding G): a
// claim under a notice is deleted only by a run that began after the
// notice's end. On 2f2dc47 it was false.
var ReapAsksRunStart = true

// Run is one janitor run: how long it takes from its scan to its reap's
// re-read, and how far ahead of the API server's true clock the clock it
// keeps is (issue 38 finding H: a replica or an aggregated API ahead).
type Run struct {
	Duration time.Duration
	Ahead    time.Duration
}

func states(ds []classify.Decision) string {
	parts := make([]string, 0, len(ds))
	for i := range ds {
		parts = append(parts, ds[i].Claim.Name+" "+string(ds[i].State))
	}
	return strings.Join(parts, ", ")
}

// JanitorRun is `janitor run`: scan (and mark), snapshot, reap, and prune
// when retention is set (janitor.Run's steps, each on a read of its own).
func (w *World) JanitorRun(o Run) {
	w.tick()
	w.runs++
	run := w.runs
	pol := w.Cfg.Policy
	now := w.Now.Add(o.Ahead)
	start := now
	inv := w.Inventory(now)
	ds := classify.Classify(inv, pol, now)
	ahead := ""
	if o.Ahead > 0 {
		ahead = fmt.Sprintf(" (its clock %s ahead)", fmtDur(o.Ahead))
	}
	w.say("janitor run %d%s scans: %s", run, ahead, states(ds))
	for i := range ds {
		if c := w.claimByUID(ds[i].Claim.UID); c != nil {
			w.applyMarks(c, ds[i].Marks, run)
			if c.Pod != "" {
				c.PodSeen = true
			}
		}
	}
	// Snapshot: rescue.Targets, each created once the clock has passed
	// orphaned-since plus twice the skew (rescue's clockWait).
	candidates := map[types.UID]bool{}
	for i := range ds {
		if reap.Reapable(&ds[i], w.Cfg.Superseded == classify.SupersededDiscard, pol.GracePeriod, now) {
			candidates[ds[i].Claim.UID] = true
		}
	}
	for _, i := range rescue.Targets(ds, w.Cfg.Superseded) {
		d := &ds[i]
		c := w.claimByUID(d.Claim.UID)
		if c == nil || d.OrphanedSince == nil {
			continue
		}
		since := *d.OrphanedSince
		name := rescue.Name(c.Name, c.UID, since)
		if d.CutBehind && d.Snapshot != nil {
			if s := w.snapByUID(d.Snapshot.UID); s != nil {
				s.Deleted = true
				w.say("janitor run %d deletes its rescue %s (cut behind the clock) to take it again", run, s.Name)
			}
		}
		if w.snap(name) != nil {
			continue
		}
		at := w.Now
		if wait := since.Add(2 * pol.ClockSkew).Sub(now); wait > 0 {
			// The rescue waits for the clocks (rescue.clockWait) and
			// cuts then: the world moves on to that moment, so the
			// snapshot holds what the claim holds when it is cut.
			at = at.Add(wait)
			if at.After(w.Now) {
				w.Now = at
			}
		}
		s := &Snap{Name: name, UID: w.uid("vs"), SourceName: c.Name, SourceUID: c.UID, Line: c.Line, Janitor: true,
			Archive: classify.RuleFor(d.State).Archive, Since: &since, Created: at, Cut: w.storageTime(at),
			Retain: w.Cfg.RescueRetain, Data: copyData(c.Data)}
		if c.Labeled {
			s.Workspace = c.Line.User
		}
		if rt, ok := classify.RestoredDataTime(d.Claim); ok {
			s.Restored = &rt
		} else if rt, ok := rescue.OriginDataTime(inv, d.Claim); ok {
			// The rescuer's own record (rescue's annotations).
			s.Restored = &rt
		}
		w.Snaps = append(w.Snaps, s)
		what := "rescue"
		if s.Archive {
			what = "archive"
		}
		w.say("janitor run %d takes %s %s of %s %s (orphaned-since t=%s)", run, what, s.Name, c.Name, dataString(s.Data), fmtDur(since.Sub(T0)))
		candidates[c.UID] = true // janitor's RescueResult.rescued: reaped in the same run
	}
	w.check("snapshot")
	// Reap: the re-read, classified again; each candidate still reapable
	// is deleted.
	w.Now = w.Now.Add(o.Duration)
	now = w.Now.Add(o.Ahead)
	inv = w.Inventory(now)
	ds = classify.Classify(inv, pol, now)
	keep := map[types.UID]string{}
	for i := range ds {
		d := &ds[i]
		discard := w.Cfg.Superseded == classify.SupersededDiscard
		if !candidates[d.Claim.UID] || !reap.Reapable(d, discard, pol.GracePeriod, now) {
			continue
		}
		// reap's planOf (unexported; since 481b474) also asks whether
		// the notice was over at the run's start (Options.RunStart, the
		// scan's clock): Reapable at that moment, for a candidate.
		if ReapAsksRunStart && !reap.Reapable(d, discard, pol.GracePeriod, start) {
			continue
		}
		// planOf also waits for the workspace's other orphans to be
		// rescued (docs/spec.md#reap-workspace-first).
		if reap.WorkspaceWaits(ds, d) != "" {
			continue
		}
		c := w.claimByUID(d.Claim.UID)
		if ev := reap.EvidenceOf(d); ev != nil {
			s := w.snapByUID(ev.UID)
			if s == nil {
				continue
			}
			keep[ev.UID] = "reaped on"
		}
		c.Deleted = true
		why := string(d.State)
		if d.Snapshot != nil {
			why += " by " + d.Snapshot.Name
		}
		if classify.RuleFor(d.State).Reap == classify.ReapOnDiscard {
			why += ", discarded: " + d.DiscardReason
		}
		w.say("janitor run %d reaps %s (%s)", run, c.Name, why)
		w.checkReap(c, run)
	}
	w.check("reap")
	if w.Cfg.KeepFor > 0 || w.Cfg.KeepLast > 0 {
		w.prune(run, now, keep)
	}
}

// prune is the retention step: prune.DeleteByRetention's read,
// retention.Decide and prune.StillPrunable, then the deletes.
func (w *World) prune(run int, now time.Time, keep map[types.UID]string) {
	pol := w.Cfg.Policy
	inv := w.Inventory(now)
	ds := classify.Classify(inv, pol, now)
	var rescues []retention.Rescue
	for _, s := range inv.Snapshots[NS] {
		if !s.ManagedByJanitor {
			continue
		}
		ws := w.snapByUID(s.UID)
		// prune.rescues: the hold counts when exactly "true".
		rescues = append(rescues, retention.Rescue{Snapshot: s, Hold: ws.Hold == "true"})
	}
	if len(rescues) == 0 {
		return
	}
	claims, pvcs := w.pruneClaims(ds)
	// As prune.DeleteByRetention builds it: the scan's policy decides the
	// judge's.
	p := retention.Policy{KeepFor: w.Cfg.KeepFor, KeepLast: w.Cfg.KeepLast, DeleteContents: w.Cfg.DeleteContents, Keep: keep,
		SessionsCarryData: w.Cfg.Policy.SessionsCarryData, ClockSkew: w.Cfg.Policy.ClockSkew}
	for _, v := range retention.Decide(p, rescues, inv.Contents, claims, now) {
		if !v.Prune {
			continue
		}
		s := w.snapByUID(v.Snapshot.UID)
		vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: s.Name, UID: s.UID}}
		if s.Hold != "" {
			vs.Labels = map[string]string{inventory.KeyHold: s.Hold}
		}
		if ok, _ := prune.StillPrunable(s.UID, vs, pvcs, now); !ok {
			continue
		}
		s.Deleted = true
		w.say("janitor run %d prunes %s %s (%s)", run, s.Name, dataString(s.Data), v.Reason)
		if heldValue(s.Hold) {
			w.violate("held: rescue %s, held by an operator (pvc-janitor.io/hold: %q), was pruned", s.Name, s.Hold)
		}
	}
	w.check("prune")
}

// pruneClaims is prune.namespaceClaims on the world: every claim with its
// state this run.
func (w *World) pruneClaims(ds []classify.Decision) ([]retention.Claim, []corev1.PersistentVolumeClaim) {
	var out []retention.Claim
	var pvcs []corev1.PersistentVolumeClaim
	for i := range ds {
		d := &ds[i]
		c := w.claimByUID(d.Claim.UID)
		rc := retention.Claim{UID: c.UID, Name: c.Name, Bound: true, RestoresFrom: c.DataSource, Created: c.Created,
			RestoredDataTime: c.Ann[classify.AnnotationRestoredDataTime], State: d.State}
		if w.Cfg.Policy.WorkspaceLabel != "" {
			rc.Workspace = d.Claim.Labels.Workspace
		}
		rc.Rescue = d.Rescue()
		out = append(out, rc)
		pvc := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: c.Name, UID: c.UID},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
		if c.DataSource != "" {
			pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "VolumeSnapshot", Name: c.DataSource}
		}
		pvcs = append(pvcs, pvc)
	}
	return out, pvcs
}

// Guard is `janitor guard` (janitor.Guard's judgement, --min-claims 1,
// without --allow-delete-policy): the reasons it fails, none when it
// passes. The invariant is checked against the ground truth.
func (w *World) Guard() []string {
	w.tick()
	inv := w.Inventory(w.Now)
	ds := classify.Classify(inv, w.Cfg.Policy, w.Now)
	res := &janitor.GuardResult{Scan: &janitor.ScanResult{Inventory: inv, Decisions: ds, Now: w.Now}, MinClaims: 1}
	for i := range ds {
		if risky, why := janitor.AtRisk(&ds[i], inv, false); risky {
			res.AtRisk = append(res.AtRisk, janitor.ClaimRisk{Index: i, Why: why})
		}
	}
	// janitor.LiveClaims: every claim of the namespace is in scope here.
	live := janitor.Live{UIDs: map[types.UID]bool{}, Names: map[inventory.Key]bool{}, Created: map[inventory.Key]time.Time{}}
	for i := range inv.Claims {
		live.UIDs[inv.Claims[i].UID] = true
		live.Names[inv.Claims[i].Key()] = true
		live.Created[inv.Claims[i].Key()] = inv.Claims[i].CreationTimestamp
	}
	for _, sn := range janitor.OnlyCopies(inv, live) {
		risky, why := janitor.SnapshotAtRisk(sn, inv, false)
		res.OnlyCopies = append(res.OnlyCopies, janitor.SnapshotRisk{Snapshot: sn, AtRisk: risky, Why: why})
	}
	problems := res.Problems()
	if len(problems) > 0 {
		w.say("guard exits 3: %s", strings.Join(problems, "; "))
		return problems
	}
	w.say("guard exits 0")
	// Ground truth: a teardown deletes every claim and every snapshot
	// whose content is Delete.
	for l, vs := range w.Needed {
		for v := range vs {
			kept := false
			for _, s := range w.LiveSnaps() {
				if s.Retain && s.Line == l && s.Data[v] {
					kept = true
					break
				}
			}
			if !kept {
				w.violate("guard: guard exits 0, yet a teardown loses %s version %d (the newest of its line): %s", l, v, w.copiesOf(l, v))
			}
		}
	}
	return nil
}

// copiesOf says where version v of l is now.
func (w *World) copiesOf(l Line, v int) string {
	var in []string
	for _, c := range w.LiveClaims() {
		if c.Line == l && c.Data[v] {
			in = append(in, "claim "+c.Name)
		}
	}
	for _, s := range w.LiveSnaps() {
		if s.Line == l && s.Data[v] {
			p := "Delete"
			if s.Retain {
				p = "Retain"
			}
			in = append(in, "snapshot "+s.Name+" ("+p+")")
		}
	}
	if len(in) == 0 {
		return "in no copy"
	}
	return "only in " + strings.Join(in, ", ")
}

// Restore kinds.
const (
	ByClaim = iota
	ByWorkspace
	ByFrom
)

// RestoreReq is a `janitor restore`: by claim name, --workspace, or
// --from a snapshot (Pick chooses which, among those the world has), --as
// a new name, --allow-older.
type RestoreReq struct {
	Kind       int
	Pick       int
	As         bool
	AllowOlder bool
}

// Restore runs restore.Plan on the world and creates the claim it plans.
func (w *World) Restore(r RestoreReq) {
	w.tick()
	snaps := w.LiveSnaps()
	if len(snaps) == 0 {
		return
	}
	pol := w.Cfg.Policy
	req := restore.Request{Namespace: NS, AllowOlder: r.AllowOlder, StorageClass: "standard", Size: "1Gi", WorkspaceLabel: pol.WorkspaceLabel}
	what := ""
	switch r.Kind {
	case ByClaim:
		req.Claim = snaps[r.Pick%len(snaps)].SourceName
		what = "restore " + NS + "/" + req.Claim
	case ByWorkspace:
		if pol.WorkspaceLabel == "" {
			return
		}
		req.Workspace = Users[r.Pick%len(Users)]
		what = "restore --workspace " + req.Workspace
	default:
		req.From = snaps[r.Pick%len(snaps)].Name
		what = "restore --from " + req.From
	}
	if r.As {
		req.As = fmt.Sprintf("restored-%d", len(w.Claims)+1)
		what += " --as " + req.As
	}
	if r.AllowOlder {
		what += " --allow-older"
	}
	inv := w.Inventory(w.Now)
	ds := classify.Classify(inv, pol, w.Now)
	claims := make([]restore.Claim, 0, len(ds))
	for i := range ds {
		claims = append(claims, restore.ClaimOf(&ds[i], w.Now))
	}
	var rs []restore.Snapshot
	for _, s := range inv.Snapshots[NS] {
		rs = append(rs, restore.Snapshot{Snapshot: s})
	}
	sort.Slice(rs, func(a, b int) bool { return rs[a].Name < rs[b].Name })
	req.ClockSkew = pol.ClockSkew
	plan, err := restore.Plan(req, rs, inv.Contents, claims)
	if err != nil {
		w.say("%s: refused (%v)", what, err)
		return
	}
	s := w.snapByUID(plan.Snapshot.UID)
	c := &Claim{Name: plan.Claim.Name, UID: w.uid("pvc"), Line: s.Line, Created: w.Now, Ann: map[string]string{},
		DataSource: s.Name, Data: copyData(s.Data)}
	for k, v := range plan.Claim.Annotations {
		if strings.HasPrefix(k, inventory.Prefix) {
			c.Ann[k] = v
		}
	}
	if pol.WorkspaceLabel != "" && plan.Claim.Labels[pol.WorkspaceLabel] != "" {
		c.Labeled = true
	}
	w.Claims = append(w.Claims, c)
	w.say("%s: creates %s from %s %s", what, c.Name, s.Name, dataString(c.Data))
	if !r.AllowOlder {
		w.checkRestore(c, s)
	}
}
