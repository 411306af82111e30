package janitor

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// ActionAtRisk is the report action of what a teardown would lose.
const ActionAtRisk = "at-risk"

// GuardOptions configure the pre-teardown gate (janitor guard).
type GuardOptions struct {
	// Scan configures the judging scan, which only reads whatever
	// Scan.DryRun says: a CI gate needs no write permission.
	Scan ScanOptions
	// AllowDeletePolicy accepts rescues whose content has deletionPolicy
	// Delete.
	AllowDeletePolicy bool
	// MinClaims fails the gate when fewer claims are in scope.
	MinClaims int
	// Rescue, when set, runs Snapshot with it first (guard --rescue).
	Rescue *RescueOptions
}

// ClaimRisk is a claim whose data a teardown would lose.
type ClaimRisk struct {
	// Index into the judging scan's decisions.
	Index int
	Why   string
}

// SnapshotRisk is the janitor's rescue of a claim that is gone: its only copy.
type SnapshotRisk struct {
	Snapshot *inventory.Snapshot
	AtRisk   bool
	Why      string
}

// GuardResult is the gate's verdict and its evidence.
type GuardResult struct {
	// Rescue is what --rescue did, nil without it.
	Rescue *RescueResult
	// Scan is the judging scan.
	Scan *ScanResult
	// AtRisk lists the claims at risk, in decision order.
	AtRisk []ClaimRisk
	// OnlyCopies lists the rescues of claims already reaped, by namespace
	// and name.
	OnlyCopies []SnapshotRisk
	// MinClaims is GuardOptions.MinClaims.
	MinClaims int
}

// RescueError is a guard --rescue whose rescue could not run or was cut
// short (failed rescues are not: the judgement counts their claims).
type RescueError struct{ Err error }

func (e *RescueError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *RescueError) Unwrap() error { return e.Err }

// Guard judges whether tearing the cluster down would lose data (docs/spec.md#commands,
// guard), after rescuing first when o.Rescue is set. An error means there
// is no verdict: a *RescueError from the rescue, or a failed read.
func Guard(ctx context.Context, c *kube.Clients, o GuardOptions) (*GuardResult, error) {
	res := &GuardResult{MinClaims: o.MinClaims}
	if o.Rescue != nil {
		// Failed rescues show up in the judgement as SnapshotFailed
		// claims, at risk.
		snap, err := Rescue(ctx, c, *o.Rescue)
		if err == nil {
			err = snap.Err
		}
		if err != nil {
			return nil, &RescueError{Err: err}
		}
		res.Rescue = snap
	}
	so := o.Scan
	so.DryRun = true
	scan, err := Scan(ctx, c, so)
	if err != nil {
		return nil, err
	}
	res.Scan = scan
	for i := range scan.Decisions {
		if risky, why := AtRisk(&scan.Decisions[i], scan.Inventory, o.AllowDeletePolicy); risky {
			res.AtRisk = append(res.AtRisk, ClaimRisk{Index: i, Why: why})
		}
	}
	live, err := LiveClaims(ctx, c, scan.Inventory)
	if err != nil {
		return nil, err
	}
	for _, sn := range OnlyCopies(scan.Inventory, live) {
		risky, why := SnapshotAtRisk(sn, scan.Inventory, o.AllowDeletePolicy)
		res.OnlyCopies = append(res.OnlyCopies, SnapshotRisk{Snapshot: sn, AtRisk: risky, Why: why})
	}
	return res, nil
}

// TooFew says, when fewer claims than MinClaims are in scope, so.
func (r *GuardResult) TooFew() string {
	if n := len(r.Scan.Decisions); n < r.MinClaims {
		return fmt.Sprintf("%d claims in scope, fewer than --min-claims %d (a mistyped selector or namespace?)", n, r.MinClaims)
	}
	return ""
}

// Problems are the reasons the gate fails, empty when nothing in scope
// would be lost.
func (r *GuardResult) Problems() []string {
	var problems []string
	if n := len(r.AtRisk); n > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d claims in scope hold data a teardown would lose", n, len(r.Scan.Decisions)))
	}
	snaps := 0
	for _, s := range r.OnlyCopies {
		if s.AtRisk {
			snaps++
		}
	}
	if snaps > 0 {
		problems = append(problems, fmt.Sprintf("%d rescues of reaped claims (their only copy) could be lost", snaps))
	}
	if msg := r.TooFew(); msg != "" {
		problems = append(problems, msg)
	}
	return problems
}

// AtRisk says whether tearing the cluster down would lose the data of the
// claim decided by d (docs/spec.md#guard), and why: the state rule's
// Teardown (classify.StateRules). Every state but Terminating, Unbound and
// Rescued holds data that a teardown would lose: InUse and Young claims
// hold live data (stop the workspaces first), Held claims are kept by an
// operator, the others have no durable snapshot. A Rescued claim is at
// risk while its rescue is not intact, or while its content has
// deletionPolicy Delete (the teardown may delete the backing snapshot too)
// unless allowDeletePolicy.
func AtRisk(d *classify.Decision, inv *inventory.Inventory, allowDeletePolicy bool) (bool, string) {
	if classify.RuleFor(d.State).Snapshot == classify.SnapRescue {
		if d.Snapshot == nil {
			return true, "rescued without a known snapshot"
		}
		return SnapshotAtRisk(d.Snapshot, inv, allowDeletePolicy)
	}
	why := classify.RuleFor(d.State).Teardown
	return why != "", why
}

// SnapshotAtRisk says whether a teardown could lose the rescue s: it is
// not intact, or its content has deletionPolicy Delete (unless
// allowDeletePolicy).
func SnapshotAtRisk(s *inventory.Snapshot, inv *inventory.Inventory, allowDeletePolicy bool) (bool, string) {
	if ok, why := classify.Intact(s, inv.Contents); !ok {
		return true, "snapshot " + s.Name + " is not intact: " + why
	}
	if inv.Contents[s.ContentName].DeletionPolicy == "Delete" && !allowDeletePolicy {
		return true, "snapshot " + s.Name + " has deletionPolicy Delete: a teardown can delete it too"
	}
	return false, ""
}

// Live is what exists of the claims that snapshots name: their UIDs and
// their namespace/names. Created, when it has a name, is when the live
// claim of that name was created: a snapshot that names it but was taken
// before is of an earlier claim of the name, which is gone
// (docs/spec.md#rule-descent).
type Live struct {
	UIDs    map[types.UID]bool
	Names   map[inventory.Key]bool
	Created map[inventory.Key]time.Time
}

// gone reports whether no live claim is the source of s: by UID when s
// records one, and by name.
func (l Live) gone(s *inventory.Snapshot) bool {
	if s.SourceUID != "" && l.UIDs[s.SourceUID] {
		return false
	}
	if k := (inventory.Key{Namespace: s.Namespace, Name: s.SourceClaim}); s.SourceUID == "" && s.SourceClaim != "" && l.Names[k] {
		created, ok := l.Created[k]
		if !ok || !s.CreationTimestamp.Before(created) {
			return false
		}
	}
	return s.SourceUID != "" || s.SourceClaim != ""
}

// OnlyCopies returns, per claim that no longer exists, its newest
// snapshot (by data time): its only copy (docs/spec.md#guard-only-copies). The
// janitor's rescues count per source UID, archives of superseded claims too.
// Someone else's snapshots count per source claim (docs/spec.md#guard-only-copies):
// the classifier takes any intact snapshot of a claim as its rescue, so a
// claim may have been reaped on a backup tool's snapshot, and that
// snapshot is then the only copy, at risk in a teardown when its content
// would go with the cluster. A source claim is known by the volume its
// content was cut from (Content.SourceVolume), never by its name alone: a
// name is reused by the next claim (docs/spec.md#rule-descent). A janitor's
// rescue cut from the same volume with data at least as new makes it
// redundant; one whose volume is unknown counts alone. The result is
// sorted by namespace and name.
func OnlyCopies(inv *inventory.Inventory, live Live) []*inventory.Snapshot {
	newest := map[types.UID]*inventory.Snapshot{}
	// foreign: someone else's newest snapshot per source volume (or, when
	// its volume is unknown, the snapshot alone).
	type source struct{ ns, volume, alone string }
	foreign := map[source]*inventory.Snapshot{}
	for ns := range inv.Snapshots {
		list := inv.Snapshots[ns]
		for j := range list {
			s := &list[j]
			if !live.gone(s) {
				continue
			}
			if !s.ManagedByJanitor {
				if s.SourceClaim == "" {
					continue
				}
				k := source{ns: s.Namespace, volume: inv.Contents[s.ContentName].SourceVolume}
				if k.volume == "" {
					k.alone = s.Name
				}
				if o, ok := foreign[k]; !ok || dataAfter(s, o) {
					foreign[k] = s
				}
				continue
			}
			if s.SourceUID == "" {
				continue
			}
			if o, ok := newest[s.SourceUID]; !ok || dataAfter(s, o) {
				newest[s.SourceUID] = s
			}
		}
	}
	out := make([]*inventory.Snapshot, 0, len(newest)+len(foreign))
	// mine: the newest data time of the janitor's rescues per volume.
	mine := make(map[source]time.Time, len(newest))
	for _, s := range newest {
		out = append(out, s)
		k := source{ns: s.Namespace, volume: inv.Contents[s.ContentName].SourceVolume}
		if t := classify.DataTime(s, nil); k.volume != "" && t.After(mine[k]) {
			mine[k] = t
		}
	}
	for k, s := range foreign {
		if t, ok := mine[source{ns: k.ns, volume: k.volume}]; ok && k.volume != "" && !t.Before(classify.DataTime(s, nil)) {
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func dataAfter(a, b *inventory.Snapshot) bool {
	ta, tb := classify.DataTime(a, nil), classify.DataTime(b, nil)
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return a.Name > b.Name
}

// LiveClaims lists the UIDs and names of every live claim (not being
// deleted, whatever its labels) of the namespaces where snapshots name a
// claim that is not in scope, so that a claim outside the selector is not
// taken for a reaped one. A claim being deleted does not count: its rescue
// is about to be the only copy. It reads metadata only.
func LiveClaims(ctx context.Context, c *kube.Clients, inv *inventory.Inventory) (Live, error) {
	live := Live{UIDs: make(map[types.UID]bool, len(inv.Claims)), Names: make(map[inventory.Key]bool, len(inv.Claims)),
		Created: make(map[inventory.Key]time.Time, len(inv.Claims))}
	for i := range inv.Claims {
		if cl := &inv.Claims[i]; cl.DeletionTimestamp == nil {
			live.UIDs[cl.UID] = true
			live.Names[cl.Key()] = true
			live.Created[cl.Key()] = cl.CreationTimestamp
		}
	}
	var nss []string
	for ns, list := range inv.Snapshots {
		for j := range list {
			if s := &list[j]; live.gone(s) {
				nss = append(nss, ns)
				break
			}
		}
	}
	sort.Strings(nss)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	for _, ns := range nss {
		var l *metav1.PartialObjectMetadataList
		err := c.Retry.Do(ctx, fmt.Sprintf("list claims in %q", ns), func(ctx context.Context) error {
			var err error
			l, err = c.Meta.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			return Live{}, fmt.Errorf("list claims in %q: %w", ns, err)
		}
		for i := range l.Items {
			if m := &l.Items[i]; m.DeletionTimestamp == nil {
				live.UIDs[m.UID] = true
				live.Names[inventory.Key{Namespace: ns, Name: m.Name}] = true
				live.Created[inventory.Key{Namespace: ns, Name: m.Name}] = m.CreationTimestamp.Time
			}
		}
	}
	return live, nil
}
