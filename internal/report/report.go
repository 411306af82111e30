// Package report is the janitor's report of one run (SPEC §8): what every
// claim in scope was classified as, what was done to it, and a summary. It is
// what a command prints on stdout, as a kubectl-like table or as JSON/YAML
// whose field names are public interface.
package report

import (
	"sort"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// Kind and APIVersion identify the JSON/YAML document.
const (
	Kind       = "Report"
	APIVersion = "pvc-janitor.io/v1"
)

// Actions that Finish counts, as the steps that act name them. Any action
// ending in FailedSuffix counts as a failure.
const (
	ActionSnapshotCreated = rescue.ActionCreated
	ActionDeleted         = reap.ActionDeleted
	ActionPruned          = "pruned"
	FailedSuffix          = "-failed"
)

// Report is the report of one run. Times are UTC, to the second, and
// marshal as RFC 3339.
type Report struct {
	Kind       string    `json:"kind"`
	APIVersion string    `json:"apiVersion"`
	Command    string    `json:"command"`
	DryRun     bool      `json:"dryRun"`
	Cluster    string    `json:"cluster"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// UnusedCondition says whether the run trusted the claims' Unused
	// condition: "trusted", "ignored" (the controller manager evidently does
	// not maintain it) or "absent" (SPEC §3 Marks).
	UnusedCondition string  `json:"unusedCondition,omitempty"`
	Summary         Summary `json:"summary"`
	// Notes are run-level messages, e.g. why the blast radius stopped a reap.
	Notes []string `json:"notes,omitempty"`
	// Error is the error that ended the run early, if any.
	Error string `json:"error,omitempty"`
	// Claims holds one entry per claim in scope. Entries are pointers so
	// that those returned by Entry stay valid however the slice is sorted.
	Claims []*ClaimEntry `json:"claims"`
	// Snapshots holds entries about snapshots rather than claims: for
	// guard, the janitor's rescues of claims that are gone (their only copy).
	Snapshots []*SnapshotEntry `json:"snapshots,omitempty"`

	index map[key]*ClaimEntry
}

// Summary counts what the report holds; Finish computes it.
type Summary struct {
	// Claims is the number of claims in scope.
	Claims int `json:"claims"`
	// States counts claims per state; states with no claim are left out.
	States map[string]int `json:"states"`
	// SnapshotsCreated counts entries whose action is "snapshot-created".
	SnapshotsCreated int `json:"snapshotsCreated"`
	// ClaimsDeleted counts entries whose action is "deleted".
	ClaimsDeleted int `json:"claimsDeleted"`
	// Failures counts entries whose action ends in "-failed".
	Failures int `json:"failures"`
	// SnapshotsPruned counts snapshot entries whose action is "pruned".
	SnapshotsPruned int `json:"snapshotsPruned,omitempty"`
	// LeakedContents counts the Retain VolumeSnapshotContents the run's
	// snapshot deletions left behind (named in the claims' entries).
	LeakedContents int `json:"leakedContents,omitempty"`
}

// ClaimEntry is one claim of the report.
type ClaimEntry struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Workspace  string `json:"workspace"`
	State      string `json:"state"` // a classify.State
	Reason     string `json:"reason"`
	VolumeName string `json:"volumeName"`
	// OrphanedSince is the effective orphaned-since, when known.
	OrphanedSince *time.Time `json:"orphanedSince,omitempty"`
	// Snapshot is the snapshot the state or the action is about.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// Action is what the run did (or, in a dry run, would do) to the claim,
	// e.g. "marked", "snapshot-created", "deleted", "snapshot-failed".
	Action string `json:"action,omitempty"`
	// LeakedContents are the Retain VolumeSnapshotContents the rescue's
	// snapshot deletions left behind (SPEC §11).
	LeakedContents []string `json:"leakedContents,omitempty"`
}

// SnapshotRef is the part of a VolumeSnapshot the report shows.
type SnapshotRef struct {
	Name       string `json:"name"`
	ReadyToUse bool   `json:"readyToUse"`
	// Error is the snapshot's status.error message, empty when none.
	Error string `json:"error"`
}

// SnapshotEntry is one snapshot of the report.
type SnapshotEntry struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// SourceClaim and SourceUID name the claim it rescued.
	SourceClaim string `json:"sourceClaim"`
	SourceUID   string `json:"sourceUID"`
	Workspace   string `json:"workspace,omitempty"`
	// DataTime is the newest moment whose writes it holds.
	DataTime       *time.Time `json:"dataTime,omitempty"`
	ReadyToUse     bool       `json:"readyToUse"`
	DeletionPolicy string     `json:"deletionPolicy,omitempty"`
	// RestoreSize is status.restoreSize in bytes, when known.
	RestoreSize int64  `json:"restoreSize,omitempty"`
	Action      string `json:"action,omitempty"`
	Reason      string `json:"reason"`
}

type key struct{ namespace, name string }

// New starts the report of a command.
func New(command string, dryRun bool, cluster string, startedAt time.Time) *Report {
	return &Report{
		Kind:       Kind,
		APIVersion: APIVersion,
		Command:    command,
		DryRun:     dryRun,
		Cluster:    cluster,
		StartedAt:  normalize(startedAt),
		Summary:    Summary{States: map[string]int{}},
		Claims:     []*ClaimEntry{},
	}
}

// normalize drops what RFC 3339 to the second cannot show: the location,
// the monotonic reading and sub-second digits.
func normalize(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// AddDecisions adds one entry per decision and keeps the entries sorted by
// namespace and name. A decision for a claim already in the report replaces
// its classification, keeping its action.
func (r *Report) AddDecisions(ds []classify.Decision) {
	for i := range ds {
		d := &ds[i]
		if d.Claim == nil {
			continue
		}
		e := r.Entry(d.Claim.Namespace, d.Claim.Name)
		if e == nil {
			e = &ClaimEntry{Namespace: d.Claim.Namespace, Name: d.Claim.Name}
			r.Claims = append(r.Claims, e)
			r.index[key{e.Namespace, e.Name}] = e
		}
		e.UID = string(d.Claim.UID)
		e.Workspace = d.Workspace
		e.State = string(d.State)
		e.Reason = d.Reason
		e.VolumeName = d.Claim.VolumeName
		e.OrphanedSince = nil
		if d.OrphanedSince != nil {
			t := normalize(*d.OrphanedSince)
			e.OrphanedSince = &t
		}
		e.Snapshot = nil
		if s := d.Snapshot; s != nil {
			e.Snapshot = &SnapshotRef{Name: s.Name, ReadyToUse: s.ReadyToUse}
			if s.Error != nil {
				e.Snapshot.Error = s.Error.Message
			}
		}
	}
	sort.SliceStable(r.Claims, func(i, j int) bool { return less(r.Claims[i], r.Claims[j]) })
}

func less(a, b *ClaimEntry) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Entry returns the entry of a claim, to set its Action or Snapshot later,
// or nil when the claim is not in the report. The pointer stays valid for
// the life of the report.
func (r *Report) Entry(namespace, name string) *ClaimEntry {
	if r.index == nil || len(r.index) != len(r.Claims) {
		r.index = make(map[key]*ClaimEntry, len(r.Claims))
		for _, e := range r.Claims {
			r.index[key{e.Namespace, e.Name}] = e
		}
	}
	return r.index[key{namespace, name}]
}

// AddNote adds a run-level message, e.g. why nothing was deleted.
func (r *Report) AddNote(note string) { r.Notes = append(r.Notes, note) }

// SortAtRiskFirst puts the entries for which atRisk is true first, keeping
// each group sorted by namespace and name. atRisk is called once per entry,
// before anything moves.
func (r *Report) SortAtRiskFirst(atRisk func(*ClaimEntry) bool) {
	risky := make(map[*ClaimEntry]bool, len(r.Claims))
	for _, e := range r.Claims {
		risky[e] = atRisk(e)
	}
	sort.SliceStable(r.Claims, func(i, j int) bool {
		a, b := r.Claims[i], r.Claims[j]
		if risky[a] != risky[b] {
			return risky[a]
		}
		return less(a, b)
	})
}

// Finish records when the run ended and computes the summary from the
// entries: states from their State, the counters from their Action.
func (r *Report) Finish(at time.Time) {
	r.FinishedAt = normalize(at)
	s := Summary{Claims: len(r.Claims), States: map[string]int{}}
	for _, e := range r.Claims {
		if e.State != "" {
			s.States[e.State]++
		}
		switch {
		case e.Action == ActionSnapshotCreated:
			s.SnapshotsCreated++
		case e.Action == ActionDeleted:
			s.ClaimsDeleted++
		case strings.HasSuffix(e.Action, FailedSuffix):
			s.Failures++
		}
		s.LeakedContents += len(e.LeakedContents)
	}
	for _, e := range r.Snapshots {
		switch {
		case e.Action == ActionPruned:
			s.SnapshotsPruned++
		case strings.HasSuffix(e.Action, FailedSuffix):
			s.Failures++
		}
	}
	r.Summary = s
}
