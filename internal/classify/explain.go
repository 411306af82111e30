package classify

import (
	"sort"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Explanation is the whole evidence chain of one claim's state (janitor
// explain): every rule of docs/spec.md#states in order with whether it matched and why,
// the evidence of use and of orphaned-since side by side, every snapshot
// considered, the workspace's other claims, and the next action. It is
// derived from the same classification a run makes; it never changes it.
type Explanation struct {
	Claim     inventory.Key        `json:"claim"`
	Workspace string               `json:"workspace,omitempty"`
	State     State                `json:"state"`
	Reason    string               `json:"reason"`
	Rules     []Rule               `json:"rules"`
	Referrers []inventory.Referrer `json:"referrers,omitempty"`
	// Mark is the claim's pvc-janitor.io/orphaned-since annotation as
	// written ("" when none); Condition is its Unused condition; Counts
	// says which of them dates the orphan period.
	Mark          string               `json:"mark,omitempty"`
	Condition     *inventory.Condition `json:"unusedCondition,omitempty"`
	ConditionUse  string               `json:"unusedConditionTrust"` // trusted, ignored or absent (for the run)
	ConditionWhy  string               `json:"unusedConditionWhy,omitempty"`
	Counts        string               `json:"orphanedSinceFrom,omitempty"` // "mark", "condition", "mark and condition (the later)", "none yet"
	OrphanedSince *time.Time           `json:"orphanedSince,omitempty"`
	Snapshots     []SnapshotEvidence   `json:"snapshots,omitempty"`
	OtherClaims   []OtherClaim         `json:"otherClaims,omitempty"`
	Next          Next                 `json:"next"`
	Discard       string               `json:"discard,omitempty"` // Superseded: whether --superseded=discard may delete it, and why
}

// Rule is one rule of docs/spec.md#states as applied to the claim.
type Rule struct {
	Number  int    `json:"number"`
	State   State  `json:"state"`
	Matched bool   `json:"matched"`
	Why     string `json:"why"`
}

// SnapshotEvidence is one snapshot considered for the claim: of the claim's
// name, or of its workspace.
type SnapshotEvidence struct {
	Name      string    `json:"name"`
	Source    string    `json:"source,omitempty"` // spec.source claim, "" for pre-provisioned
	Janitor   bool      `json:"janitor"`
	Intact    bool      `json:"intact"`
	NotIntact string    `json:"notIntact,omitempty"`
	Cut       time.Time `json:"cut"`
	Data      time.Time `json:"data"`
	DataKnown bool      `json:"dataKnown"`
	// Stale: labelled pvc-janitor.io/stale, a rescue of an earlier orphan
	// period of its claim, left to prune.
	Stale bool   `json:"stale,omitempty"`
	Role  string `json:"role"`
}

// OtherClaim is another claim of the workspace.
type OtherClaim struct {
	Name    string    `json:"name"`
	State   State     `json:"state"`
	Created time.Time `json:"created"`
}

// Next is what the janitor will do with the claim next, and the earliest
// moment it can (nil: nothing is scheduled, or as soon as a run comes).
type Next struct {
	Action   string     `json:"action"`
	Earliest *time.Time `json:"earliest,omitempty"`
}

// Explain classifies inv and explains the claim k. ok is false when k is
// not in inv's claims.
func Explain(inv *inventory.Inventory, p Policy, now time.Time, k inventory.Key) (Explanation, bool) {
	if inv == nil {
		return Explanation{}, false
	}
	idx := -1
	for i := range inv.Claims {
		if inv.Claims[i].Key() == k {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Explanation{}, false
	}
	c, ds := classify(inv, p, now)
	d := &ds[idx]
	cl := d.Claim
	e := Explanation{Claim: k, Workspace: d.Workspace, State: d.State, Reason: d.Reason,
		Referrers: c.referrers(cl), OrphanedSince: d.OrphanedSince, Discard: d.DiscardReason}
	e.ConditionUse, e.ConditionWhy = UnusedCondition(inv, now)
	e.Mark = cl.Annotations[inventory.AnnotationOrphanedSince]
	e.Condition = cl.Unused
	e.Counts = counts(cl, d, c.condTrusted)
	e.Rules = c.rules(d)
	e.Snapshots = c.snapshotEvidence(d)
	e.OtherClaims = otherClaims(inv, ds, idx)
	e.Next = c.next(d)
	return e, true
}

// counts says which evidence dates the orphan period.
func counts(cl *inventory.Claim, d *Decision, condTrusted bool) string {
	if d.OrphanedSince == nil {
		if d.Marks.OrphanedSince == Set {
			return "none yet: marked now (" + d.Marks.OrphanedSinceValue.UTC().Format(time.RFC3339) + ")"
		}
		return ""
	}
	eff := *d.OrphanedSince
	if u := cl.Unused; condTrusted && u != nil && u.Status == "True" && endOfSecond(u.LastTransitionTime).Equal(eff) {
		if raw, ok := cl.Annotations[inventory.AnnotationOrphanedSince]; ok && raw != eff.UTC().Format(time.RFC3339) {
			return "the Unused condition (later than the mark: used again between two runs)"
		}
		return "the Unused condition"
	}
	return "the janitor's mark"
}

// rules walks the state rules (StateRules) in order: the ones before the
// claim's state did not match (and why), the claim's state did, the rest
// were not reached.
func (c *classifier) rules(d *Decision) []Rule {
	out := make([]Rule, 0, len(StateRules))
	reached := true
	for i := range StateRules {
		s := StateRules[i].State
		r := Rule{Number: i + 1, State: s}
		switch {
		case s == d.State:
			r.Matched, r.Why = true, d.Reason
			reached = false
		case reached:
			r.Why = StateRules[i].not(c, d)
		default:
			r.Why = "not reached: an earlier rule matched"
		}
		out = append(out, r)
	}
	return out
}

// snapshotEvidence lists the snapshots of the claim's name and of its
// workspace in its namespace, each with what it proves for this claim.
func (c *classifier) snapshotEvidence(d *Decision) []SnapshotEvidence {
	cl := d.Claim
	var out []SnapshotEvidence
	for i := range c.inv.Snapshots[cl.Namespace] {
		s := &c.inv.Snapshots[cl.Namespace][i]
		mine := s.SourceClaim == cl.Name
		if !mine && (d.Workspace == "" || s.Workspace != d.Workspace) {
			continue
		}
		ok, why := Intact(s, c.inv.Contents)
		ev := SnapshotEvidence{Name: s.Name, Source: s.SourceClaim, Janitor: s.ManagedByJanitor, Intact: ok, NotIntact: why,
			Cut: CutTime(s), Data: c.dataTime(s), DataKnown: DataTimeKnown(s), Stale: s.Stale}
		ev.Role = c.role(d, s)
		out = append(out, ev)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Data.After(out[b].Data) })
	return out
}

// role says what snapshot s, of the claim of d's name or of its
// workspace, is to that claim.
func (c *classifier) role(d *Decision, s *inventory.Snapshot) string {
	cl := d.Claim
	mine := s.SourceClaim == cl.Name
	intact, _ := Intact(s, c.inv.Contents)
	if d.Snapshot == s {
		switch d.State {
		case Rescued:
			return "the rescue: intact and cut at or after the orphaned-since"
		case Superseded:
			return "evidence that the workspace moved on: newer data than this claim's last use"
		case SnapshotFailed:
			if d.CutBehind {
				return "the janitor's rescue of this orphan period, cut within --clock-skew " + c.p.ClockSkew.String() +
					" of orphaned-since: not trusted, the next attempt replaces it"
			}
			return "the janitor's snapshot of this orphan period"
		case Snapshotting:
			return "the janitor's snapshot of this orphan period"
		}
	}
	eff := d.OrphanedSince
	switch {
	case mine && !c.fromOtherClaim(s, cl) && !intact:
		return "not a rescue: not intact"
	case mine && !c.fromOtherClaim(s, cl) && eff != nil && CutTime(s).Before(*eff):
		return "not a rescue: cut before this claim's orphaned-since, so older than its last use"
	case mine && !c.fromOtherClaim(s, cl) && eff != nil && CutTime(s).Before(eff.Add(c.p.ClockSkew)):
		return "not a rescue: cut within --clock-skew " + c.p.ClockSkew.String() + " of this claim's orphaned-since, which may precede the end of its last use"
	case mine && !c.fromOtherClaim(s, cl) && eff == nil:
		return "not a rescue yet: this claim's orphaned-since is not known"
	case mine && !c.fromOtherClaim(s, cl):
		return "a rescue of this claim (another one was chosen, or the claim is not orphaned)"
	case eff != nil && c.dataTime(s).After(*eff) && !c.lineTime(s, c.dataTime(s)).After(*eff):
		return "of a restored claim whose data is older than this claim's last use: proves nothing about this claim"
	case eff != nil && c.dataTime(s).After(*eff):
		return "newer data of the workspace than this claim's last use"
	case eff != nil:
		return "older data of the workspace: proves nothing about this claim"
	}
	return "of another or an earlier claim of the workspace"
}

// otherClaims lists the other claims of the workspace of claim idx.
func otherClaims(inv *inventory.Inventory, ds []Decision, idx int) []OtherClaim {
	ws := ds[idx].Workspace
	if ws == "" {
		return nil
	}
	ns := inv.Claims[idx].Namespace
	var out []OtherClaim
	for i := range inv.Claims {
		if i != idx && ds[i].Workspace == ws && inv.Claims[i].Namespace == ns {
			out = append(out, OtherClaim{Name: inv.Claims[i].Name, State: ds[i].State, Created: inv.Claims[i].CreationTimestamp})
		}
	}
	return out
}

// next is what happens next to a claim in its state: its rule's then.
func (c *classifier) next(d *Decision) Next {
	if r := RuleFor(d.State); r.then != nil {
		return r.then(c, d)
	}
	return Next{}
}

// at is t as a Next's Earliest: never before now, in UTC.
func (c *classifier) at(t time.Time) *time.Time {
	if t.Before(c.now) {
		t = c.now
	}
	t = t.UTC()
	return &t
}

// graceEnd is when the claim's grace period ends (zero when its
// orphaned-since is not known).
func (c *classifier) graceEnd(d *Decision) time.Time {
	switch {
	case d.OrphanedSince != nil:
		return GraceEnd(*d.OrphanedSince, c.p.GracePeriod)
	case d.Marks.OrphanedSince == Set:
		return GraceEnd(d.Marks.OrphanedSinceValue, c.p.GracePeriod)
	}
	return time.Time{}
}

func snapName(d *Decision) string {
	if d.Snapshot == nil {
		return ""
	}
	return d.Snapshot.Name
}
