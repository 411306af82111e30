package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

// Output is how Write prints a report: the -o value (Format), --no-headers
// and --sort-by.
type Output struct {
	Format    string
	NoHeaders bool
	SortBy    string
}

// rowsOf are the entries a report's custom-columns and --sort-by work on,
// as JSON documents: its snapshots for prune (whose report is about them),
// else its claims.
func rowsOf(r *Report) ([]any, error) {
	if r.Command == "prune" {
		return documents(r.Snapshots)
	}
	return documents(r.Claims)
}

func documents[T any](rows []T) ([]any, error) {
	docs := make([]any, 0, len(rows))
	for i := range rows {
		d, err := kubeout.Document(rows[i])
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// The kinds -o name prints, as kubectl names them.
const (
	claimName    = "persistentvolumeclaim/"
	snapshotName = "volumesnapshot.snapshot.storage.k8s.io/"
)

// Actions of other packages that -o name selects by (the packages that
// name them import this one, or are the CLI's).
const (
	actionMarked       = "marked"        // mark.Marked
	actionWouldMark    = "would-mark"    // mark.WouldMark
	actionWouldPrune   = "would-prune"   // prune.ActionWouldPrune
	actionAtRisk       = "at-risk"       // janitor.ActionAtRisk
	actionRestored     = "restored"      // the CLI's restore
	actionWouldRestore = "would-restore" // the CLI's restore, dry run
)

// rowNames are what -o name prints (docs/spec.md#output-formats): the
// objects the command acted on, or in a dry run would act on, in the rows'
// order, as kubectl's delete --dry-run -o name prints what it would delete.
// A claim the command left alone (in use, held, skipped, blocked, failed) is
// never named: piped into kubectl, the list must be what the janitor did.
func rowNames(r *Report) []string {
	var out []string
	claims := func(actions ...string) {
		for _, e := range r.Claims {
			if slices.Contains(actions, e.Action) {
				out = append(out, claimName+e.Name)
			}
		}
	}
	snapshots := func(actions ...string) {
		for _, e := range r.Snapshots {
			if slices.Contains(actions, e.Action) {
				out = append(out, snapshotName+e.Name)
			}
		}
	}
	switch r.Command {
	case "scan":
		claims(actionMarked, actionWouldMark)
	case "reap":
		claims(reap.ActionDeleted, reap.ActionWould)
	case "snapshot", "run":
		// run: per claim, its rescue created, then the claim deleted;
		// then the rescues pruned.
		for _, e := range r.Claims {
			if createdSnapshot(e) {
				out = append(out, snapshotName+e.Snapshot.Name)
			}
			if r.Command == "run" && (e.Action == reap.ActionDeleted || e.Action == reap.ActionWould) {
				out = append(out, claimName+e.Name)
			}
		}
		if r.Command == "run" {
			snapshots(ActionPruned, actionWouldPrune)
		}
	case "prune":
		snapshots(ActionPruned, actionWouldPrune)
	case "guard":
		// The gate acts on nothing: it names what a teardown would lose.
		claims(actionAtRisk)
		snapshots(actionAtRisk)
	case "restore":
		claims(actionRestored, actionWouldRestore)
	}
	return out
}

// createdSnapshot reports whether the run created the claim's snapshot
// (or, in a dry run, would): a rescue or an archive made ready, or one
// whose claim a later step of the run then reaped.
func createdSnapshot(e *ClaimEntry) bool {
	if e.Snapshot == nil || e.Snapshot.Name == "" {
		return false
	}
	switch e.Action {
	case rescue.ActionCreated, rescue.ActionWould, rescue.ActionArchived:
		return true
	}
	return e.SnapshotCreated
}

// sortRows orders the report's rows (rowsOf) by --sort-by, and returns
// them as documents in that order, for custom-columns to reuse.
func sortRows(r *Report, path string) ([]any, error) {
	docs, err := rowsOf(r)
	if err != nil {
		return nil, err
	}
	idx, err := kubeout.Order(docs, path)
	if err != nil {
		return nil, err
	}
	if r.Command == "prune" {
		r.Snapshots = permute(r.Snapshots, idx)
	} else {
		r.Claims = permute(r.Claims, idx)
	}
	return permute(docs, idx), nil
}

func permute[T any](s []T, idx []int) []T {
	out := make([]T, len(s))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// writeKubectl prints r in one of kubectl's kinds (kubeout.Parse): name, a
// JSONPath template over the report's JSON, or custom columns over its rows
// (docs, when --sort-by built them already, else built here).
func writeKubectl(w io.Writer, r *Report, spec kubeout.Spec, noHeaders bool, docs []any) error {
	switch spec.Kind {
	case kubeout.KindJSONPath:
		doc, err := kubeout.Document(r)
		if err != nil {
			return err
		}
		return kubeout.JSONPath(w, spec.Template, doc)
	case kubeout.KindName:
		var b strings.Builder
		for _, n := range rowNames(r) {
			b.WriteString(n + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	case kubeout.KindCustomColumns:
		if docs == nil {
			var err error
			if docs, err = rowsOf(r); err != nil {
				return err
			}
		}
		return kubeout.Columns(w, spec.Columns, docs, noHeaders)
	}
	return fmt.Errorf("unknown output format %q", spec.Kind)
}
