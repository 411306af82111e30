package report

import (
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/cost"
)

// ClusterBlock is one cluster's part of a fleet report.
type ClusterBlock struct {
	// Name is the kubeconfig context; Cluster the cluster it names.
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	// ExitCode is the code the run would have exited with on this cluster
	// alone.
	ExitCode        int    `json:"exitCode"`
	UnusedCondition string `json:"unusedCondition,omitempty"`
	ServerVersion   string `json:"serverVersion,omitempty"`
	// Summary is the cluster's own; absent when the cluster could not be
	// read (Error says why).
	Summary *Summary `json:"summary,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Part is one cluster's outcome, for Merge: its report (nil when the run
// failed before it had one), its error and exit code.
type Part struct {
	Context string
	Report  *Report
	Err     error
	Code    int
}

// Merge makes the one report of a fleet run from the clusters' finished
// reports, in the order of parts: every entry carries its cluster, and
// each cluster gets a block with its summary, exit code and error. Call
// Finish on the result: its summary is then the total.
func Merge(command string, dryRun bool, started time.Time, prices cost.Prices, parts []Part) *Report {
	names := make([]string, 0, len(parts))
	for _, p := range parts {
		names = append(names, p.Context)
	}
	r := New(command, dryRun, strings.Join(names, ","), started)
	r.SetPrices(prices)
	conditions := map[string]bool{}
	for _, p := range parts {
		b := ClusterBlock{Name: p.Context, ExitCode: p.Code}
		if p.Err != nil {
			b.Error = p.Err.Error()
		}
		if pr := p.Report; pr != nil {
			b.Cluster, b.UnusedCondition, b.Notes = pr.Cluster, pr.UnusedCondition, pr.Notes
			b.ServerVersion = pr.ServerVersion
			sum := pr.Summary
			b.Summary = &sum
			if sum.Rescues != nil {
				if r.merged == nil {
					r.merged = newRescues()
				}
				r.merged.add(sum.Rescues)
			}
			if b.Error == "" {
				b.Error = pr.Error
			}
			conditions[pr.UnusedCondition] = true
			for _, e := range pr.Claims {
				e.Cluster = p.Context
				r.Claims = append(r.Claims, e)
			}
			for _, e := range pr.Snapshots {
				e.Cluster = p.Context
				r.Snapshots = append(r.Snapshots, e)
			}
			for _, n := range pr.Notes {
				r.AddNote(p.Context + ": " + n)
			}
		}
		r.Clusters = append(r.Clusters, b)
	}
	if len(conditions) == 1 {
		for c := range conditions {
			r.UnusedCondition = c
		}
	}
	return r
}
