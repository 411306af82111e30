// Package report is the janitor's report of one run (docs/spec.md#output): what every
// claim in scope was classified as, what was done to it, and a summary. It is
// what a command prints on stdout, as a kubectl-like table or as JSON/YAML
// whose field names are public interface.
package report

import (
	"sort"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
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
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Command    string `json:"command"`
	DryRun     bool   `json:"dryRun"`
	// MarksOnly is a dry run that wrote the janitor's mark annotations
	// (docs/spec.md#marks-only); set it before adding decisions.
	MarksOnly  bool      `json:"marksOnly,omitempty"`
	Cluster    string    `json:"cluster"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	// UnusedCondition says whether the run trusted the claims' Unused
	// condition: "trusted", "ignored" (the controller manager evidently does
	// not maintain it) or "absent" (docs/spec.md#marks).
	UnusedCondition string `json:"unusedCondition,omitempty"`
	// ServerVersion is the API server's version (GET /version), e.g.
	// "v1.35.4": what it offers of the Unused condition differs by minor.
	ServerVersion string  `json:"serverVersion,omitempty"`
	Summary       Summary `json:"summary"`
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
	// Clusters has one block per cluster of a fleet run (several
	// contexts): its summary, exit code and error; Summary is then the
	// total. Absent for one cluster.
	Clusters []ClusterBlock `json:"clusters,omitempty"`

	index  map[key]*ClaimEntry
	prices cost.Prices
	// rescues are the janitor's ready rescues read (SetRescues; nil when
	// none were read); merged is a fleet report's sum of its clusters'.
	rescues []rescueItem
	merged  *Rescues
	// started and finished are the run's times as measured, to the
	// nanosecond (the document shows seconds).
	started, finished time.Time
}

// Duration is how long the run took, exactly (zero before Finish).
func (r *Report) Duration() time.Duration {
	if r.finished.IsZero() || r.started.IsZero() {
		return 0
	}
	return r.finished.Sub(r.started)
}

// SetPrices gives the report the price table: Finish then computes the
// money (none without prices).
func (r *Report) SetPrices(p cost.Prices) { r.prices = p }

// Summary counts what the report holds; Finish computes it.
type Summary struct {
	// Claims is the number of claims in scope.
	Claims int `json:"claims"`
	// States counts claims per state; states with no claim are left out.
	States map[string]int `json:"states"`
	// SnapshotsCreated counts entries whose action is "snapshot-created",
	// or whose rescue this run created before reaping the claim.
	SnapshotsCreated int `json:"snapshotsCreated"`
	// ClaimsDeleted counts entries whose action is "deleted".
	ClaimsDeleted int `json:"claimsDeleted"`
	// Failures counts entries whose action ends in "-failed".
	Failures int `json:"failures"`
	// SnapshotsPruned counts snapshot entries whose action is "pruned".
	SnapshotsPruned int `json:"snapshotsPruned,omitempty"`
	// LeakedContents counts the VolumeSnapshotContents the run's snapshot
	// deletions left behind: Retain ones (named in the claims' entries) and
	// ones set to Delete that the snapshot controller did not delete (named
	// in the snapshots' entries).
	LeakedContents int `json:"leakedContents,omitempty"`
	// BytesByState sums the claims' capacity per state.
	BytesByState map[string]int64 `json:"bytesByState,omitempty"`
	// FreedBytes is the capacity of the claims this run deleted whose
	// volume's reclaim policy is Delete; UnfreedBytes of those whose
	// volume is Retain (or Recycle): it stays Released and costs on, and
	// ReleasedVolumes names those volumes. "Deleted" is accepted, not yet
	// gone: a claim can stay Terminating for a while.
	FreedBytes      int64    `json:"freedBytes,omitempty"`
	UnfreedBytes    int64    `json:"unfreedBytes,omitempty"`
	ReleasedVolumes []string `json:"releasedVolumes,omitempty"`
	// Cost is the money side, only when prices were given.
	Cost *Cost `json:"cost,omitempty"`
	// Rescues is what the janitor's ready rescues in scope hold.
	Rescues *Rescues `json:"rescues,omitempty"`
}

// Cost is the monthly cost (per the prices given: --price per storage
// class, --snapshot-price) of what the report holds.
type Cost struct {
	// Orphaned is the claims nobody uses that are still there (Grace,
	// Orphaned, Snapshotting, SnapshotFailed, Rescued); Superseded the
	// superseded claims still there; Rescues the snapshots the claims'
	// entries name (their restore size); Saved what the claims this run
	// freed cost.
	Orphaned   float64 `json:"orphanedMonthly"`
	Superseded float64 `json:"supersededMonthly"`
	Rescues    float64 `json:"rescuesMonthly"`
	Saved      float64 `json:"savedMonthly"`
	// Unpriced counts claims whose class has no price (and no "*").
	Unpriced int `json:"unpricedClaims,omitempty"`
}

// ClaimEntry is one claim of the report.
type ClaimEntry struct {
	// Cluster is the kubeconfig context the claim was read from, in a
	// fleet run only.
	Cluster    string `json:"cluster,omitempty"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Workspace  string `json:"workspace"`
	State      string `json:"state"` // a classify.State
	Reason     string `json:"reason"`
	VolumeName string `json:"volumeName"`
	// OrphanedSince is the effective orphaned-since, when known.
	OrphanedSince *time.Time `json:"orphanedSince,omitempty"`
	// ReapAfter is, under a notice (docs/spec.md#notice), the earliest the
	// claim may be reaped: the notice's end or the owner's snooze;
	// Notice says what postponed it beyond the notice (a snooze, a capped
	// one).
	ReapAfter *time.Time `json:"reapAfter,omitempty"`
	Notice    string     `json:"notice,omitempty"`
	// Snapshot is the snapshot the state or the action is about.
	Snapshot *SnapshotRef `json:"snapshot,omitempty"`
	// Action is what the run did (or, in a dry run, would do) to the claim,
	// e.g. "marked", "snapshot-created", "deleted", "snapshot-failed".
	Action string `json:"action,omitempty"`
	// SnapshotCreated is true when this run created the claim's rescue and
	// a later step of the same run (run's reap) then set Action: the
	// summary still counts the snapshot.
	SnapshotCreated bool `json:"snapshotCreated,omitempty"`
	// LeakedContents are the VolumeSnapshotContents the rescue's snapshot
	// deletions left behind (docs/spec.md#retention): Retain ones, or ones set to Delete
	// that the snapshot controller did not delete.
	LeakedContents []string `json:"leakedContents,omitempty"`
	// Capacity is status.capacity in bytes; the classes are the spec's;
	// ReclaimPolicy is the volume's (Delete, Retain).
	Capacity              int64  `json:"capacity,omitempty"`
	StorageClass          string `json:"storageClass,omitempty"`
	VolumeAttributesClass string `json:"volumeAttributesClass,omitempty"`
	ReclaimPolicy         string `json:"reclaimPolicy,omitempty"`
	// MonthlyCost is the claim's cost per month, when its class has a price.
	MonthlyCost *float64 `json:"monthlyCost,omitempty"`
	// Labels are the claim's labels notifications read (its owner, the
	// routes' selectors); not part of the report's JSON.
	Labels map[string]string `json:"-"`
}

// SnapshotRef is the part of a VolumeSnapshot the report shows.
type SnapshotRef struct {
	Name       string `json:"name"`
	ReadyToUse bool   `json:"readyToUse"`
	// Error is the snapshot's status.error message, empty when none.
	Error string `json:"error"`
	// RestoreSize is status.restoreSize in bytes, when known.
	RestoreSize int64 `json:"restoreSize,omitempty"`
}

// SnapshotEntry is one snapshot of the report.
type SnapshotEntry struct {
	// Cluster is the kubeconfig context, in a fleet run only.
	Cluster   string `json:"cluster,omitempty"`
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
	// LeakedContent names the VolumeSnapshotContent that outlives the
	// pruned snapshot although it was set to Delete (docs/spec.md#retention).
	LeakedContent string `json:"leakedContent,omitempty"`
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
		started:    startedAt,
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
	if len(r.Claims) == 0 {
		// Sized once: at 100k claims, growing them held the old and the
		// new arrays at once (docs/benchmarks.md).
		r.Claims = make([]*ClaimEntry, 0, len(ds))
		r.index = make(map[key]*ClaimEntry, len(ds))
	}
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
		if r.DryRun && !r.MarksOnly {
			e.Reason = dryRunReason(d)
		}
		e.VolumeName = d.Claim.VolumeName
		e.OrphanedSince = nil
		if d.OrphanedSince != nil {
			t := normalize(*d.OrphanedSince)
			e.OrphanedSince = &t
		}
		if d.Claim.Labels.Notify != nil {
			e.Labels = d.Claim.Labels.Notify
		}
		e.ReapAfter, e.Notice = nil, d.NoticeNote
		if d.NotBefore != nil {
			t := normalize(*d.NotBefore)
			e.ReapAfter = &t
		}
		e.Capacity, e.StorageClass, e.VolumeAttributesClass = d.Claim.Capacity, d.Claim.StorageClass, d.Claim.VolumeAttributesClass
		e.Snapshot = nil
		if s := d.Snapshot; s != nil {
			e.Snapshot = &SnapshotRef{Name: s.Name, ReadyToUse: s.ReadyToUse, RestoreSize: s.RestoreSize}
			if s.Error != nil {
				e.Snapshot.Error = s.Error.Message
			}
		}
	}
	sort.SliceStable(r.Claims, func(i, j int) bool { return less(r.Claims[i], r.Claims[j]) })
}

// markingNow is how the classifier's reason for an orphan without
// orphaned-since ends (docs/spec.md#rule-grace): a run that writes marks it
// now. TestDryRunReasonIsHonest holds it to the classifier's wording.
const markingNow = ", marking it now"

// dryRunReason is d's reason as a dry run may state it: it writes no mark,
// so an orphan the classifier would mark now is not marked, and its grace
// period does not start (issue 39 item 4: without the Unused condition,
// dry run after dry run shows it Grace).
func dryRunReason(d *classify.Decision) string {
	if d.Marks.OrphanedSince != classify.Set || !strings.HasSuffix(d.Reason, markingNow) {
		return d.Reason
	}
	return strings.TrimSuffix(d.Reason, markingNow) +
		"; a dry run writes no mark, so its grace period has not started (a run without --dry-run marks it)"
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
	r.finished = at
	s := Summary{Claims: len(r.Claims), States: map[string]int{}}
	for _, e := range r.Claims {
		if e.State != "" {
			s.States[e.State]++
		}
		if e.Action == ActionSnapshotCreated || e.SnapshotCreated {
			s.SnapshotsCreated++
		}
		switch {
		case e.Action == ActionSnapshotCreated:
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
		if e.LeakedContent != "" {
			s.LeakedContents++
		}
	}
	r.sizes(&s)
	s.Rescues = r.rescueSummary()
	r.Summary = s
}
