// Package model is a model checker of the janitor's safety rules with ground
// truth (issue 38, item 3). A World is one namespace over time: workspaces
// whose sessions write numbered data versions into claims, the platform
// that creates those claims (names reused, empty, or from a snapshot), its
// backup tool's snapshots, the controller manager's Unused condition, and
// the janitor. The janitor's steps ask the project's real pure decision
// functions (classify.Classify, rescue.Targets, reap.Reapable,
// retention.Decide, prune.StillPrunable, restore.Plan, janitor.AtRisk and
// OnlyCopies) on an inventory.Inventory built from the world, and the world
// applies what they decide. The ground truth is what each claim and
// snapshot really holds: a set of data versions. Check says whether a
// step broke an invariant of docs/safety.md#the-model-checker.
//
// The package is pure: no cluster, no clock, no randomness. The test
// (model_test.go) draws histories with pgregory.net/rapid and shrinks a
// failing one to a short story (World.Story).
package model

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// NS is the model's one namespace; WorkspaceLabel the label key a claim's
// workspace is read from when the janitor is configured with one.
const (
	NS             = "ws"
	WorkspaceLabel = "workspace-id"
)

// T0 is the model's epoch: every time is T0 plus a whole number of seconds.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Line is one line of a workspace's data: a user's home, or their second
// claim (data). Versions are numbered per line.
type Line struct {
	User string
	Slot string // "home" or "data"
}

func (l Line) String() string { return l.User + "/" + l.Slot }

// Platform is how the workspace platform names and creates claims.
type Platform int

const (
	// Spawner names a user's claim claim-<user> (claim-<user>-data) and
	// reuses a live one; a returning user gets a new claim under the same
	// name (JupyterHub's KubeSpawner).
	Spawner Platform = iota
	// Unique gives every session new claims ws-<user>-<n> (data-<user>-<n>).
	Unique
)

// Config is what a history is configured with: the janitor's flags and the
// cluster's traits.
type Config struct {
	Policy     classify.Policy
	Superseded string // keep, archive, discard
	KeepFor    time.Duration
	KeepLast   int
	// DeleteContents is --delete-contents; RescueRetain: the snapshot
	// class's deletionPolicy is Retain (else Delete).
	DeleteContents bool
	RescueRetain   bool
	Platform       Platform
	// Condition: the controller manager maintains the Unused condition
	// (Kubernetes 1.37); false: no condition (1.35).
	Condition bool
	// Slots: users have a data claim beside home.
	Slots bool
}

// Claim is a claim as the world knows it: what the API shows and what it
// really holds.
type Claim struct {
	Name    string
	UID     types.UID
	Line    Line
	Labeled bool // carries the workspace label
	Created time.Time
	Deleted bool
	// Ann holds the pvc-janitor.io/ annotations (marks, provenance, hold).
	Ann        map[string]string
	PhaseLabel string
	HoldLabel  string
	DataSource string // the snapshot it was created from
	// Data is the ground truth: the versions of its line it holds.
	Data     map[int]bool
	Pod      string // the pod using it, "" when none
	PodStart time.Time
	// PodSeen: a janitor run saw the pod; PodCM: the controller manager
	// maintained the Unused condition when the pod started. A pod that
	// neither the condition nor a run can see never ends (see EndSession).
	PodSeen, PodCM bool
	Unused         *inventory.Condition
	// NoticeRun is the janitor run that wrote its reap-after, ReapAfter
	// that mark's value (zero: none).
	NoticeRun int
	ReapAfter time.Time
}

// Snap is a VolumeSnapshot: the janitor's rescue or archive, or the
// backup tool's snapshot, and what it really holds.
type Snap struct {
	Name       string
	UID        types.UID
	SourceName string
	SourceUID  types.UID // pvc-janitor.io/source-uid, "" when not recorded
	Line       Line
	Workspace  string // workspace label value
	Janitor    bool
	Archive    bool
	Since      *time.Time // pvc-janitor.io/orphaned-since
	Restored   *time.Time // pvc-janitor.io/restored-data-time
	Created    time.Time
	Cut        time.Time
	Retain     bool
	Hold       string // pvc-janitor.io/hold label value
	Data       map[int]bool
	Deleted    bool
}

// World is the namespace at one moment.
type World struct {
	Cfg    Config
	Now    time.Time
	Claims []*Claim
	Snaps  []*Snap
	// Needed holds, per line, the versions no later write superseded: a
	// version is superseded once the user writes a newer one into a claim
	// that holds it (a copy that descends from it).
	Needed  map[Line]map[int]bool
	next    map[Line]int
	session map[string]int
	// CMDown: the controller manager is down; the Unused condition is not
	// updated.
	CMDown bool
	// CMOffset and StorageOffset are the controller manager's and the
	// storage system's clocks against the API server's.
	CMOffset      time.Duration
	StorageOffset time.Duration
	runs          int
	uids          int
	story         []string
	// Violations found by the last step.
	Violations []string
}

// NewWorld is an empty namespace at T0.
func NewWorld(cfg Config) *World {
	return &World{Cfg: cfg, Now: T0, Needed: map[Line]map[int]bool{}, next: map[Line]int{}, session: map[string]int{}}
}

// Story is the history so far, one line per step.
func (w *World) Story() string { return strings.Join(w.story, "\n") }

func (w *World) say(format string, a ...any) {
	d := w.Now.Sub(T0)
	w.story = append(w.story, fmt.Sprintf("t=%-9s ", fmtDur(d))+fmt.Sprintf(format, a...))
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), (d % time.Minute).Seconds()
	out := ""
	if h > 0 {
		out += fmt.Sprintf("%dh", h)
	}
	if m > 0 {
		out += fmt.Sprintf("%dm", m)
	}
	if s > 0 {
		out += fmt.Sprintf("%.4gs", s)
	}
	return out
}

func (w *World) uid(prefix string) types.UID {
	w.uids++
	return types.UID(fmt.Sprintf("%s-%d", prefix, w.uids))
}

// Users of the model.
var Users = []string{"alice", "bob"}

func (w *World) slots() []string {
	if w.Cfg.Slots {
		return []string{"home", "data"}
	}
	return []string{"home"}
}

// live returns the live claim named name, nil when none.
func (w *World) live(name string) *Claim {
	for _, c := range w.Claims {
		if !c.Deleted && c.Name == name {
			return c
		}
	}
	return nil
}

// LiveClaims are the claims not deleted.
func (w *World) LiveClaims() []*Claim {
	var out []*Claim
	for _, c := range w.Claims {
		if !c.Deleted {
			out = append(out, c)
		}
	}
	return out
}

// LiveSnaps are the snapshots not deleted.
func (w *World) LiveSnaps() []*Snap {
	var out []*Snap
	for _, s := range w.Snaps {
		if !s.Deleted {
			out = append(out, s)
		}
	}
	return out
}

func (w *World) snap(name string) *Snap {
	for _, s := range w.Snaps {
		if !s.Deleted && s.Name == name {
			return s
		}
	}
	return nil
}

// newestSnapOf is the snapshot of line l with the newest cut, nil when none.
func (w *World) newestSnapOf(l Line) *Snap {
	var best *Snap
	for _, s := range w.LiveSnaps() {
		if s.Line == l && (best == nil || s.Cut.After(best.Cut)) {
			best = s
		}
	}
	return best
}

func copyData(d map[int]bool) map[int]bool {
	out := make(map[int]bool, len(d))
	for k := range d {
		out[k] = true
	}
	return out
}

func dataString(d map[int]bool) string {
	if len(d) == 0 {
		return "{}"
	}
	ks := make([]int, 0, len(d))
	for k := range d {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprint(k)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func maxOf(d map[int]bool) int {
	m := 0
	for k := range d {
		if k > m {
			m = k
		}
	}
	return m
}

// tick is the moment every step takes: no two steps happen at the same
// instant, as no two API requests do.
func (w *World) tick() { w.Now = w.Now.Add(tick) }

// tick is how long a step takes.
const tick = 100 * time.Millisecond

// Advance lets time pass.
func (w *World) Advance(d time.Duration) {
	w.Now = w.Now.Add(d)
}

// claimName is the platform's name for a line's claim in session n.
func (w *World) claimName(l Line, n int) string {
	if w.Cfg.Platform == Spawner {
		if l.Slot == "home" {
			return "claim-" + l.User
		}
		return "claim-" + l.User + "-data"
	}
	if l.Slot == "home" {
		return fmt.Sprintf("ws-%s-%d", l.User, n)
	}
	return fmt.Sprintf("data-%s-%d", l.User, n)
}

// userClaims are the claims a user's running session uses.
func (w *World) userClaims(user string) []*Claim {
	var out []*Claim
	for _, c := range w.LiveClaims() {
		if c.Line.User == user && c.Pod != "" {
			out = append(out, c)
		}
	}
	return out
}

// From says how the platform creates a new claim for a session.
type From int

// How a new claim starts.
const (
	Empty        From = iota // a new, empty claim
	FromSnapshot             // spec.dataSource: the line's newest snapshot
)

// StartSession starts a session of user: for each of its lines, the
// platform reuses the live claim of that name (Spawner) or creates one
// (empty, or from the line's newest snapshot through spec.dataSource), and
// a pod mounts it. from[i] is for the i-th line; labeled says whether new
// claims carry the workspace label.
func (w *World) StartSession(user string, from []From, labeled bool) {
	w.tick()
	if len(w.userClaims(user)) > 0 {
		return
	}
	w.session[user]++
	n := w.session[user]
	pod := fmt.Sprintf("%s-session-%d", user, n)
	for i, slot := range w.slots() {
		l := Line{user, slot}
		name := w.claimName(l, n)
		c := w.live(name)
		how := "reuses"
		if c == nil {
			c = &Claim{Name: name, UID: w.uid("pvc"), Line: l, Labeled: labeled, Created: w.Now, Ann: map[string]string{}, Data: map[int]bool{}}
			how = "creates"
			what := "(empty)"
			f := Empty
			if i < len(from) {
				f = from[i]
			}
			if f == FromSnapshot {
				if s := w.newestSnapOf(l); s != nil {
					c.DataSource = s.Name
					c.Data = copyData(s.Data)
					what = "from snapshot " + s.Name + " (spec.dataSource) " + dataString(c.Data)
				}
			}
			if !labeled {
				what += ", no workspace label"
			}
			how += " " + name + " " + what
			w.Claims = append(w.Claims, c)
		} else {
			how += " " + name + " " + dataString(c.Data)
		}
		c.Pod, c.PodStart, c.PodSeen, c.PodCM = pod, w.Now, false, w.Cfg.Condition && !w.CMDown
		if w.Cfg.Condition && !w.CMDown {
			c.Unused = &inventory.Condition{Status: "False", LastTransitionTime: w.cmTime()}
		}
		w.say("%s's session %d %s", user, n, how)
	}
}

// Mount starts a session of user on the i-th idle live claim of its lines
// (a restored claim, say) instead of the platform's: the user mounts it.
func (w *World) Mount(user string, i int) {
	w.tick()
	if len(w.userClaims(user)) > 0 {
		return
	}
	var idle []*Claim
	for _, c := range w.LiveClaims() {
		if c.Line.User == user && c.Pod == "" {
			idle = append(idle, c)
		}
	}
	if len(idle) == 0 {
		return
	}
	c := idle[i%len(idle)]
	w.session[user]++
	c.Pod, c.PodStart, c.PodSeen, c.PodCM = fmt.Sprintf("%s-session-%d", user, w.session[user]), w.Now, false, w.Cfg.Condition && !w.CMDown
	if w.Cfg.Condition && !w.CMDown {
		c.Unused = &inventory.Condition{Status: "False", LastTransitionTime: w.cmTime()}
	}
	w.say("%s's session %d mounts %s %s", user, w.session[user], c.Name, dataString(c.Data))
}

// cmTime is the controller manager's clock, to the second.
func (w *World) cmTime() time.Time { return w.Now.Add(w.CMOffset).Truncate(time.Second) }

// Write is user's running session writing a new version into the claim of
// slot i (of its lines); the versions that claim held are superseded.
func (w *World) Write(user string, i int) {
	w.tick()
	cs := w.userClaims(user)
	if len(cs) == 0 {
		return
	}
	c := cs[i%len(cs)]
	l := c.Line
	w.next[l]++
	v := w.next[l]
	if w.Needed[l] == nil {
		w.Needed[l] = map[int]bool{}
	}
	for old := range c.Data {
		delete(w.Needed[l], old)
	}
	c.Data[v] = true
	w.Needed[l][v] = true
	w.say("%s writes %s version %d into %s %s", c.Pod, l, v, c.Name, dataString(c.Data))
}

// EndSession ends user's session: its pod goes. A use that neither the
// Unused condition (maintained at the pod's start and end) nor a janitor
// run saw cannot be known (docs/safety.md#what-is-not-covered: a brief use
// between two runs, on a cluster without the condition): such a session
// does not end before a run has seen it.
func (w *World) EndSession(user string) {
	w.tick()
	cs := w.userClaims(user)
	if len(cs) == 0 {
		return
	}
	for _, c := range cs {
		if !c.PodSeen && !(c.PodCM && w.Cfg.Condition && !w.CMDown) {
			return
		}
	}
	pod := cs[0].Pod
	for _, c := range cs {
		c.Pod = ""
		if w.Cfg.Condition && !w.CMDown {
			c.Unused = &inventory.Condition{Status: "True", LastTransitionTime: w.cmTime()}
		}
	}
	w.say("%s ends (its pod is deleted)", pod)
}

// ControllerManager takes the controller manager down or brings it back;
// back, it sets every claim's Unused condition afresh.
func (w *World) ControllerManager(down bool) {
	if !w.Cfg.Condition || w.CMDown == down {
		return
	}
	w.CMDown = down
	if down {
		w.say("the controller manager stops (the Unused condition is frozen)")
		return
	}
	for _, c := range w.LiveClaims() {
		st := "True"
		if c.Pod != "" {
			st = "False"
		}
		if c.Unused == nil || c.Unused.Status != st {
			c.Unused = &inventory.Condition{Status: st, LastTransitionTime: w.cmTime()}
		}
	}
	w.say("the controller manager is back")
}

// Backup is the backup tool's snapshot of the i-th live claim (someone
// else's): with or without a source UID, Retain or Delete; then, when
// deleteClaim and the claim is idle, the platform deletes the claim (its
// own snapshot-then-delete).
func (w *World) Backup(i int, uid, retain, deleteClaim bool) {
	w.tick()
	cs := w.LiveClaims()
	if len(cs) == 0 {
		return
	}
	c := cs[i%len(cs)]
	s := &Snap{Name: fmt.Sprintf("backup-%d", len(w.Snaps)+1), UID: w.uid("vs"), SourceName: c.Name, Line: c.Line,
		Created: w.Now, Cut: w.storageTime(w.Now), Retain: retain, Data: copyData(c.Data)}
	if uid {
		s.SourceUID = c.UID
	}
	if c.Labeled {
		s.Workspace = c.Line.User
	}
	w.Snaps = append(w.Snaps, s)
	what := []string{}
	if uid {
		what = append(what, "source UID")
	} else {
		what = append(what, "no source UID")
	}
	if retain {
		what = append(what, "Retain")
	} else {
		what = append(what, "Delete")
	}
	w.say("the backup tool snapshots %s as %s %s (%s)", c.Name, s.Name, dataString(s.Data), strings.Join(what, ", "))
	if deleteClaim && c.Pod == "" {
		c.Deleted = true
		w.say("the platform deletes %s (its backup holds it)", c.Name)
	}
}

// storageTime is the storage system's clock at t, to the second.
func (w *World) storageTime(t time.Time) time.Time {
	return t.Add(w.StorageOffset).Truncate(time.Second)
}

// Hold puts the operator's hold on the i-th live claim (claim) or the
// janitor's i-th rescue, with value ("true", "True"); asLabel: as a label.
func (w *World) Hold(claim bool, i int, value string, asLabel bool) {
	if claim {
		cs := w.LiveClaims()
		if len(cs) == 0 {
			return
		}
		c := cs[i%len(cs)]
		if asLabel {
			c.HoldLabel = value
		} else {
			c.Ann[inventory.KeyHold] = value
		}
		w.say("an operator holds claim %s (pvc-janitor.io/hold: %q)", c.Name, value)
		return
	}
	var rs []*Snap
	for _, s := range w.LiveSnaps() {
		if s.Janitor {
			rs = append(rs, s)
		}
	}
	if len(rs) == 0 {
		return
	}
	s := rs[i%len(rs)]
	s.Hold = value
	w.say("an operator holds rescue %s (pvc-janitor.io/hold: %q)", s.Name, value)
}

// held reports whether an operator held c or s (any case of "true": what
// docs/spec.md#rule-held says of a claim).
func heldValue(v string) bool { return strings.EqualFold(v, "true") }
