// Package prune deletes the janitor's own rescues by retention (docs/spec.md#retention):
// it reads the scope, lets retention.Decide say which rescues may go, holds
// the blast radius, and deletes each with its UID and resourceVersion as
// preconditions, setting a Retain content to Delete first when allowed to.
package prune

import (
	"context"
	"sort"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// Actions of the report's snapshots[] entries.
const (
	ActionPruned     = "pruned"
	ActionWouldPrune = "would-prune"
	ActionKept       = "kept"
	ActionFailed     = "prune-failed"
	ActionLimited    = "prune-limited"
)

// Options configure a prune.
type Options struct {
	Scope              kube.Scope
	Policy             classify.Policy
	Retention          retention.Policy
	DryRun             bool
	MaxDeletions       int
	MaxDeletionPercent float64
	// Confirm, when set, is asked before the first delete with the number
	// of rescues; false deletes nothing.
	Confirm func(n int) (bool, error)
	// BeforeDelete, when set, is called for each rescue between prune's
	// read and its delete: the tests' way to act as a second actor (a
	// restore) at that moment, deterministically. Nil in the command.
	BeforeDelete func(ctx context.Context, snapshot inventory.Key)
}

// Outcome is what became of one of the janitor's rescues.
type Outcome struct {
	Namespace string
	Name      string
	Source    string // the source claim's name
	Workspace string
	Action    string
	Reason    string
	// RestoreSize is status.restoreSize in bytes (0 when unknown).
	RestoreSize int64
	// LeakedContent names the content that outlives the pruned snapshot
	// although it was set to Delete (kube.ContentSettle).
	LeakedContent string
	Err           error
	// Snapshot is the rescue as this run read it (readiness, source UID,
	// data time), for the report.
	Snapshot inventory.Snapshot
	// DeletionPolicy is its content's deletionPolicy as read, before any
	// --delete-contents patch; empty while it has no content.
	DeletionPolicy string
}

// Result is a prune's outcomes, and why it deleted nothing when the blast
// radius held it back.
type Result struct {
	Outcomes []Outcome
	Blocked  string
	// Rescues is how many of the janitor's rescues were in scope.
	Rescues int
	// Snapshots are the snapshots read, by namespace, at Now (the server's
	// clock): the report's summary of rescues.
	Snapshots map[string][]inventory.Snapshot
	Now       time.Time
}

// writeUses writes down the uses of claims prune's read saw in use while
// they carry the janitor's marks (classify's removals and last-used), as
// the scan would: a workspace started again after its rescue, between the
// reap's re-read and this read, is seen here only.
func writeUses(ctx context.Context, c *kube.Clients, ds []classify.Decision, dryRun bool) {
	var used []classify.Decision
	for i := range ds {
		if ds[i].Marks.RecordsUse() {
			used = append(used, ds[i])
		}
	}
	if len(used) == 0 {
		return
	}
	for _, err := range mark.Apply(ctx, c, used, mark.Options{DryRun: dryRun, Concurrency: 1}).Errors {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("write down a use prune's read saw")
	}
}

// DeleteByRetention reads the scope and deletes the janitor's rescues that
// retention.Decide lets go (janitor.Prune and janitor.Run's retention
// step call it).
func DeleteByRetention(ctx context.Context, c *kube.Clients, o Options) (*Result, error) {
	inv, err := kube.Read(ctx, c, o.Scope)
	if err != nil {
		return nil, err
	}
	now := c.Clock.Latest()
	if !o.DryRun {
		// A prune killed after setting a content to Delete left its
		// intent: put the kept rescues back first (docs/spec.md#retention-intent).
		SettleIntents(ctx, c, inv.Snapshots, inv.Contents)
	}
	ds := classify.Classify(inv, o.Policy, now)
	// The uses this read saw are written down last, as the reap's re-read
	// does (nothing goes between the read and the deletes): on a cluster
	// without the Unused condition the next run may not see them any more
	// (docs/spec.md#rule-last-used).
	defer writeUses(ctx, c, ds, o.DryRun)
	raw, err := rescues(ctx, c, o)
	if err != nil {
		return nil, err
	}
	res := &Result{Snapshots: inv.Snapshots, Now: now}
	var p pass
	// The judge's policy is the scan's: one home for both
	// (docs/spec.md#rule-descent, #rule-clock-skew).
	ret := o.Retention
	ret.SessionsCarryData, ret.ClockSkew = o.Policy.SessionsCarryData, o.Policy.ClockSkew
	for _, ns := range sortedKeys(raw) {
		claims, err := namespaceClaims(ctx, c, o, ns, ds)
		if err != nil {
			return nil, err
		}
		p.decide(ret, raw[ns], claims, inv.Contents, now)
	}
	res.Rescues = len(p.outs)
	if why := limit(len(p.del), len(p.outs), o); why != "" {
		res.Blocked = why
		res.Outcomes = p.hold(ActionLimited, why)
		return res, nil
	}
	if !o.DryRun && len(p.del) > 0 && o.Confirm != nil {
		ok, err := o.Confirm(len(p.del))
		if err != nil {
			return nil, err
		}
		if !ok {
			res.Blocked = "declined at the prompt; nothing was pruned"
			res.Outcomes = p.hold(ActionKept, res.Blocked)
			return res, nil
		}
	}
	if !o.DryRun {
		pruneAll(ctx, c, o, &p, inv.Contents)
	}
	res.Outcomes = p.outs
	return res, nil
}

// pass is one prune's decisions: an outcome per rescue read (outs, with
// its rescue at the same index of meta) and the indexes of those to delete.
type pass struct {
	outs []Outcome
	meta []rawRescue
	del  []int
}

// decide asks retention about the rescues of one namespace (rs, of one
// namespace) and records an outcome for each.
func (p *pass) decide(pol retention.Policy, rs []rawRescue, claims []retention.Claim, contents map[string]inventory.Content, now time.Time) {
	in := make([]retention.Rescue, len(rs))
	for i := range rs {
		in[i] = retention.Rescue{Snapshot: rs[i].snap, Hold: rs[i].hold}
	}
	for i, v := range retention.Decide(pol, in, contents, claims, now) {
		s := rs[i].snap
		out := Outcome{Namespace: s.Namespace, Name: s.Name, Source: s.SourceClaim, Workspace: s.Workspace,
			Action: ActionKept, Reason: v.Reason, RestoreSize: rs[i].restoreSize, Snapshot: s,
			DeletionPolicy: contents[s.ContentName].DeletionPolicy}
		if v.Prune {
			p.del = append(p.del, len(p.outs))
			out.Action = ActionWouldPrune
		}
		p.outs = append(p.outs, out)
		p.meta = append(p.meta, rs[i])
	}
}

// hold gives every rescue to delete the action and reason instead (the
// blast radius, a declined prompt) and returns the outcomes.
func (p *pass) hold(action, why string) []Outcome {
	for _, i := range p.del {
		p.outs[i].Action, p.outs[i].Reason = action, why
	}
	return p.outs
}

func limit(n, total int, o Options) string {
	if n == 0 {
		return ""
	}
	return reap.LimitOf("rescues", n, total, o.MaxDeletions, o.MaxDeletionPercent)
}

// rawRescue is one of the janitor's VolumeSnapshots as prune needs it.
type rawRescue struct {
	snap        inventory.Snapshot
	rv          string
	hold        bool
	restoreSize int64
}

// rescues lists the janitor's snapshots in scope, by namespace.
func rescues(ctx context.Context, c *kube.Clients, o Options) (map[string][]rawRescue, error) {
	sel := inventory.LabelManagedBy + "=" + inventory.ManagedByValue
	nss := o.Scope.Namespaces
	if nss == nil {
		nss = []string{metav1.NamespaceAll}
	}
	out := map[string][]rawRescue{}
	for _, ns := range nss {
		var l *snapv1.VolumeSnapshotList
		err := c.Retry.Do(ctx, "list the janitor's snapshots", func(ctx context.Context) error {
			var err error
			l, err = c.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			return err
		})
		if err != nil {
			return nil, &kube.ReadError{What: "the janitor's snapshots", Err: err}
		}
		for i := range l.Items {
			vs := &l.Items[i]
			if o.Scope.Exclude[vs.Namespace] {
				continue
			}
			r := rawRescue{snap: kube.Snapshot(vs, o.Policy.WorkspaceLabel), rv: vs.ResourceVersion,
				hold: inventory.HeldBy(vs.Labels, vs.Annotations)}
			if vs.Status != nil && vs.Status.RestoreSize != nil {
				r.restoreSize = vs.Status.RestoreSize.Value()
			}
			out[vs.Namespace] = append(out[vs.Namespace], r)
		}
	}
	return out, nil
}

// namespaceClaims lists every claim of the namespace (not only the
// selected ones: a source claim or a restore outside the selector still
// keeps a rescue) with its state this run, when it has one.
func namespaceClaims(ctx context.Context, c *kube.Clients, o Options, ns string, ds []classify.Decision) ([]retention.Claim, error) {
	var l *corev1.PersistentVolumeClaimList
	err := c.Retry.Do(ctx, "list claims in "+ns, func(ctx context.Context) error {
		var err error
		l, err = c.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return nil, &kube.ReadError{What: "claims in " + ns, Err: err}
	}
	byUID := map[types.UID]*classify.Decision{}
	for i := range ds {
		if ds[i].Claim.Namespace == ns {
			byUID[ds[i].Claim.UID] = &ds[i]
		}
	}
	out := make([]retention.Claim, 0, len(l.Items))
	for i := range l.Items {
		p := &l.Items[i]
		rc := retention.Claim{UID: p.UID, Name: p.Name, Bound: p.Status.Phase == corev1.ClaimBound, RestoresFrom: restoresFrom(p),
			Created: p.CreationTimestamp.Time, RestoredDataTime: p.Annotations[classify.AnnotationRestoredDataTime],
			RestoredFrom: p.Annotations[classify.AnnotationRestoredFrom]}
		if o.Policy.WorkspaceLabel != "" {
			rc.Workspace = p.Labels[o.Policy.WorkspaceLabel]
		}
		if d, ok := byUID[p.UID]; ok {
			rc.State, rc.OrphanedSince = d.State, d.OrphanedSince
			rc.Rescue = d.Rescue()
		} else {
			// Not classified (outside the selector): counted as in use,
			// the safe side for every rule.
			rc.State = classify.InUse
			rc.Workspace = ""
		}
		out = append(out, rc)
	}
	return out, nil
}

// restoresFrom is the VolumeSnapshot a claim is restored from, if any
// (kube.SnapshotSource: the inventory reads it the same way).
func restoresFrom(p *corev1.PersistentVolumeClaim) string {
	return kube.Claim(p, "").DataSource
}

// pruneAll deletes the rescues at del in three steps: every Retain content
// set to Delete first (only with --delete-contents, and only the content
// bound to its snapshot's UID), one kube.ContentSettle for the snapshot
// controller to see those patches, then each snapshot with its UID and
// resourceVersion as preconditions. A patched content that outlives its
// snapshot all the same is named on its outcome (LeakedContent).
func pruneAll(ctx context.Context, c *kube.Clients, o Options, p *pass, contents map[string]inventory.Content) {
	del, meta, outs := p.del, p.meta, p.outs
	var ready []int
	patched := map[int]string{} // outcome → its content, set to Delete
	for _, i := range del {
		content, out := release(ctx, c, o, &meta[i], contents, outs[i])
		outs[i] = out
		if out.Action != ActionWouldPrune {
			continue // kept or failed
		}
		if content != "" {
			patched[i] = content
		}
		ready = append(ready, i)
	}
	if len(patched) > 0 && !retry.Sleep(ctx, kube.ContentSettle) {
		for _, i := range ready {
			outs[i].Action, outs[i].Reason, outs[i].Err = ActionFailed, "interrupted before the delete: "+ctx.Err().Error(), ctx.Err()
		}
	} else {
		for _, i := range ready {
			outs[i] = prune(ctx, c, o, meta[i], patched[i] != "", outs[i])
		}
	}
	deadline := time.Now().Add(leftWait)
	unchecked := 0
	for _, i := range ready {
		content := patched[i]
		switch {
		case content == "":
		case outs[i].Action == ActionPruned:
			var checked bool
			outs[i].LeakedContent, checked = left(ctx, c, o, meta[i].snap, content, deadline)
			if !checked {
				unchecked++
			}
		default:
			unpatch(ctx, c, o, meta[i].snap, content)
		}
	}
	if unchecked > 0 {
		zerolog.Ctx(ctx).Warn().Int("contents", unchecked).Dur("within", leftWait).
			Msg("pruned snapshots not gone in time: whether their contents outlive them was not checked")
	}
}

// unpatch sets the content of a rescue that was kept after all (held,
// changed, interrupted, failed) back to Retain, as it was: a Delete content
// would take the storage-side snapshot with it on any later delete of the
// rescue (a namespace's teardown). Only while the rescue is still there,
// the same and not being deleted: the snapshot controller may be deleting
// the content of one that is. It outlives the run's cancellation, bounded.
func unpatch(ctx context.Context, c *kube.Clients, o Options, s inventory.Snapshot, content string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	log := zerolog.Ctx(ctx).With().Str("namespace", s.Namespace).Str("snapshot", s.Name).Str("content", content).Logger()
	vs, err := kube.GetSnapshot(ctx, c, s.Namespace, s.Name)
	if err != nil {
		log.Error().Err(err).Msg("the rescue was kept but its content stays Delete: set it back to Retain by hand")
		return
	}
	if vs == nil || vs.UID != s.UID || vs.DeletionTimestamp != nil {
		return
	}
	if err := kube.SetContentRetain(ctx, c, content, s.UID); err != nil {
		log.Error().Err(err).Msg("the rescue was kept but its content stays Delete: the next run sets it back to Retain (its prune intent stays)")
		return
	}
	if v, ok := vs.Annotations[inventory.AnnotationPruneIntent]; ok {
		if err := kube.UnannotateSnapshot(ctx, c, &s, inventory.AnnotationPruneIntent, v); err != nil {
			log.Warn().Err(err).Msg("remove the prune intent: the next run does")
		}
	}
}

// release readies one rescue's content for the delete: a Retain content is
// kept without --delete-contents and set to Delete with it. It returns the
// content it patched, if any, and the outcome (still would-prune when the
// snapshot may be deleted).
//
// The intent (pvc-janitor.io/prune-intent) goes on the rescue before its
// content is set to Delete, at the resourceVersion prune read (r.rv moves
// to the patched one): a run killed before the delete leaves a record that
// the next run settles (docs/spec.md#retention-intent).
func release(ctx context.Context, c *kube.Clients, o Options, r *rawRescue, contents map[string]inventory.Content, out Outcome) (string, Outcome) {
	s := r.snap
	ct, ok := contents[s.ContentName]
	if !ok || ct.DeletionPolicy != "Retain" {
		return "", out
	}
	if !o.Retention.DeleteContents {
		out.Action, out.Reason = ActionKept, "its content is Retain and --delete-contents is off"
		return "", out
	}
	log := zerolog.Ctx(ctx).With().Str("namespace", s.Namespace).Str("snapshot", s.Name).Logger()
	intent := intentValue(c.Clock.Latest())
	vs, err := kube.AnnotateSnapshot(ctx, c, &s, r.rv, inventory.AnnotationPruneIntent, intent)
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		out.Action, out.Reason = ActionKept, "changed since it was read; left for the next prune"
		return "", out
	case err != nil:
		out.Action, out.Reason, out.Err = ActionFailed, "record the prune intent on it: "+err.Error(), err
		log.Error().Err(err).Msg("prune")
		return "", out
	}
	r.rv = vs.ResourceVersion
	if err := kube.SetContentDelete(ctx, c, ct.Name, s.UID); err != nil {
		out.Action, out.Reason, out.Err = ActionFailed, "set content "+ct.Name+" to Delete: "+err.Error(), err
		log.Error().Err(err).Msg("prune")
		// The content may be Delete all the same (a lost response): the
		// intent stays for the next run to settle.
		return "", out
	}
	return ct.Name, out
}

// prune deletes one rescue with its UID and resourceVersion as
// preconditions; patched says its content was set to Delete, after which
// the snapshot controller's own update may move the resourceVersion on.
func prune(ctx context.Context, c *kube.Clients, o Options, r rawRescue, patched bool, out Outcome) Outcome {
	s := r.snap
	log := zerolog.Ctx(ctx).With().Str("namespace", s.Namespace).Str("snapshot", s.Name).Logger()
	uid := s.UID
	if o.BeforeDelete != nil {
		o.BeforeDelete(ctx, s.Key())
	}
	var err error
	// lost: a delete of this run's may have been applied although its
	// call failed (docs/spec.md#retention-lost-response).
	lost := false
	for try := 0; ; try++ {
		err = c.Retry.Do(ctx, "delete snapshot "+s.Namespace+"/"+s.Name, func(ctx context.Context) error {
			// A restore may have begun since prune read the claims
			// (docs/spec.md#restore-protects-source): read again first.
			if err := stillPrunable(ctx, c, s); err != nil {
				return err
			}
			err := c.Snap.SnapshotV1().VolumeSnapshots(s.Namespace).Delete(ctx, s.Name,
				metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &r.rv}})
			lost = lost || mayHaveApplied(err)
			return err
		})
		if k, ok := reap.AsRereadRefusal(err); ok {
			if lost && k.Gone {
				err = nil
				out.Reason += " (the response to the delete was lost: " + k.Why + ")"
				break
			}
			out.Action, out.Reason = ActionKept, k.Why
			return out
		}
		if !apierrors.IsConflict(err) || !patched || try == 2 {
			break
		}
		// The snapshot controller's update after the content's patch:
		// read again, check again, delete at the new resourceVersion.
		if !retry.Sleep(ctx, 300*time.Millisecond) {
			break
		}
		rv, why := reread(ctx, c, o, s)
		if why != "" {
			out.Action, out.Reason = ActionKept, why
			return out
		}
		r.rv = rv
	}
	switch {
	case apierrors.IsNotFound(err) && lost:
		out.Reason += " (the response to the delete was lost: gone since)"
	case apierrors.IsNotFound(err):
		out.Action, out.Reason = ActionKept, "gone since it was read"
		return out
	case apierrors.IsConflict(err):
		out.Action, out.Reason = ActionKept, "changed since it was read (delete precondition failed); left for the next prune"
		return out
	case err != nil:
		out.Action, out.Reason, out.Err = ActionFailed, err.Error(), err
		log.Error().Err(err).Msg("prune")
		return out
	}
	out.Action = ActionPruned
	msg := "pruned by retention: " + out.Reason
	if err := event(ctx, c, s, msg); err != nil {
		log.Warn().Err(err).Msg("record Pruned event")
	}
	log.Info().Str("reason", out.Reason).Msg("pruned")
	return out
}

// leftWait bounds, over one prune, the wait for pruned snapshots to be gone
// before their contents are looked at.
const leftWait = 30 * time.Second

// left waits (until deadline) for a pruned snapshot to be gone, then
// returns its content's name if the content outlives it (kube.ContentLeft):
// it holds a storage-side snapshot nobody will delete, so it is reported
// and logged for an operator to delete. Empty when it went; checked is
// false when that could not be told by deadline.
func left(ctx context.Context, c *kube.Clients, o Options, s inventory.Snapshot, content string, deadline time.Time) (name string, checked bool) {
	if err := kube.WaitSnapshotGone(ctx, c, s.Namespace, s.Name, s.UID, deadline); err != nil {
		return "", false
	}
	l, err := kube.ContentLeft(ctx, c, content, s.UID)
	if err != nil {
		return "", false
	}
	if !l {
		return "", true
	}
	zerolog.Ctx(ctx).Warn().Str("namespace", s.Namespace).Str("snapshot", s.Name).Str("content", content).
		Msg("the content outlives its pruned snapshot although it was set to Delete (the snapshot controller judged an older copy); it holds a storage-side snapshot: delete it with kubectl delete volumesnapshotcontent")
	return content, true
}

// reread reads the snapshot again after its content was patched: its new
// resourceVersion, or why it must be kept now (gone, another snapshot of
// that name, being deleted, held).
func reread(ctx context.Context, c *kube.Clients, o Options, s inventory.Snapshot) (string, string) {
	vs, err := kube.GetSnapshot(ctx, c, s.Namespace, s.Name)
	switch {
	case err == nil && vs == nil:
		return "", "gone since it was read"
	case err != nil:
		return "", "cannot read it again after setting its content to Delete: " + err.Error()
	case vs.UID != s.UID:
		return "", "another snapshot has its name now"
	case vs.DeletionTimestamp != nil:
		return "", "being deleted by someone else"
	case inventory.HeldBy(vs.Labels, vs.Annotations):
		return "", "held (pvc-janitor.io/hold) since it was read"
	}
	return vs.ResourceVersion, ""
}

// event records Pruned on the snapshot.
func event(ctx context.Context, c *kube.Clients, s inventory.Snapshot, msg string) error {
	return c.EventOn(ctx, corev1.ObjectReference{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1",
		Namespace: s.Namespace, Name: s.Name, UID: s.UID}, corev1.EventTypeNormal, "Pruned", msg)
}

func sortedKeys(m map[string][]rawRescue) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
