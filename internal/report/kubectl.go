package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
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

// rowNames are the rows of rowsOf as kubectl's -o name prints them.
func rowNames(r *Report) []string {
	if r.Command == "prune" {
		out := make([]string, len(r.Snapshots))
		for i := range r.Snapshots {
			out[i] = "volumesnapshot.snapshot.storage.k8s.io/" + r.Snapshots[i].Name
		}
		return out
	}
	out := make([]string, len(r.Claims))
	for i := range r.Claims {
		out[i] = "persistentvolumeclaim/" + r.Claims[i].Name
	}
	return out
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
