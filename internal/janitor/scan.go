// Package janitor is the library behind the commands: it chains reading,
// classifying and acting, and knows nothing about flags, terminals, reports
// or exit codes. Each pipeline is one function with typed options and a
// typed result: Scan, Rescue (the snapshot command), Reap, Run (snapshot,
// reap, prune), Guard and Prune, and Lock takes the run's Lease around
// them. The steps below them are named after what they do
// (rescue.SnapshotTargets, reap.DeleteCandidates, prune.DeleteByRetention).
// A result says what happened in types (rescue and reap outcomes,
// reap.BlockedBlastRadius, reap.BlockedDeclined, claims at risk); an error
// means there is no result (*InputError for bad input only the cluster
// could reveal). The CLI turns
// flags into these options, results into the report, errors into exit
// codes; an integration test can call the pipelines just as well.
package janitor

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
)

// ScanOptions configure a scan.
type ScanOptions struct {
	Scope  kube.Scope
	Policy classify.Policy
	DryRun bool
	// MarksOnly, with DryRun, writes the mark annotations and nothing
	// else (docs/spec.md#marks-only).
	MarksOnly   bool
	Concurrency int
}

// ScanResult is what a scan read, decided and marked.
type ScanResult struct {
	Inventory *inventory.Inventory
	Decisions []classify.Decision
	Marks     mark.Result
	// Now is the API server's clock once the lists that prove no use were
	// read (inventory.Inventory.ServerTime): what the claims are
	// classified and marked on.
	Now time.Time
	// Start is the API server's clock at the run's first read (the Date
	// of the first response its clients read, kube.ServerClock.First):
	// when the run began (docs/spec.md#notice).
	Start time.Time
	// ReadTime is how long reading took.
	ReadTime time.Duration
	// UnusedCondition is whether the run trusted the claims' Unused
	// condition (classify.ConditionTrusted, Ignored or Absent).
	UnusedCondition string
	// ServerVersion is the API server's version ("" when unknown).
	ServerVersion string
}

// logServer says what the server's version offers of the Unused condition
// (docs/spec.md#rule-condition-trust): the evidence a run has differs by
// minor.
func logServer(log *zerolog.Logger, version string) {
	switch classify.ConditionSupport(version) {
	case classify.SupportNone:
		log.Info().Str("server", version).Msg("this Kubernetes has no Unused condition (it came in v1.36): orphaned-since is the janitor's own marks, and the grace period guards uses between runs")
	case classify.SupportAlpha:
		log.Info().Str("server", version).Msg("the Unused condition is alpha in this Kubernetes (gate PersistentVolumeClaimUnusedSinceTime, off by default): used only where the claims show it")
	case classify.SupportUnknown:
		log.Warn().Str("server", version).Msg("cannot tell the API server's version: the Unused condition is judged from the claims alone")
	default:
		log.Debug().Str("server", version).Msg("server version")
	}
}

// releaseGarbage collects and returns to the OS what the step before left:
// the read's decoding garbage, the classifier's indexes. A scan's memory
// comes in steps (the inventory, then the decisions beside it, then the
// report beside both), and without this each step started on top of the
// last one's garbage and of pages the runtime kept but no longer used: at
// 100k claims the peak RSS went from 210-240 MiB to 200-210 MiB, for two
// collections of the live heap (docs/benchmarks.md).
func releaseGarbage() { debug.FreeOSMemory() }

// Scan reads the cluster, classifies every claim in scope and, unless dry
// run, writes the marks. A failed read returns an error and marks nothing.
func Scan(ctx context.Context, c *kube.Clients, o ScanOptions) (*ScanResult, error) {
	log := zerolog.Ctx(ctx)
	start := time.Now()
	inv, err := kube.Read(ctx, c, o.Scope)
	if err != nil {
		return nil, err
	}
	releaseGarbage()
	if !o.DryRun {
		// Every run that writes settles what a killed prune left
		// (docs/spec.md#retention-intent).
		prune.SettleIntents(ctx, c, inv.Snapshots, inv.Contents)
	}
	res := &ScanResult{Inventory: inv, Now: inv.ServerTime, Start: c.Clock.First(), ReadTime: time.Since(start)}
	if res.Now.IsZero() {
		// Marks must be on the server's clock; never guess with ours.
		return nil, errors.New("the API server sent no Date header: cannot tell its time, refusing to classify")
	}
	cond, why := classify.UnusedCondition(inv, res.Now)
	res.UnusedCondition, res.ServerVersion = cond, inv.ServerVersion
	logServer(log, inv.ServerVersion)
	if cond == classify.ConditionIgnored {
		log.Warn().Str("evidence", why).Msg("the controller manager does not maintain the claims' Unused condition: ignored for this run (marks and the grace period only)")
	}
	res.Decisions = classify.Classify(inv, o.Policy, res.Now)
	releaseGarbage()
	log.Info().Int("claims", len(inv.Claims)).Dur("read", res.ReadTime).Time("server_time", res.Now).Msg("classified")
	res.Marks = mark.Apply(ctx, c, res.Decisions, mark.Options{DryRun: o.DryRun && !o.MarksOnly, MarksOnly: o.MarksOnly, Concurrency: o.Concurrency})
	return res, nil
}
