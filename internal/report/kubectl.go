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

// rowsOf are the entries a report's name, custom-columns and --sort-by work
// on: its snapshots for prune (whose report is about them), else its
// claims.
func rowsOf(r *Report) (docs []any, name func(i int) string, err error) {
	if r.Command == "prune" {
		for _, s := range r.Snapshots {
			d, err := kubeout.Document(s)
			if err != nil {
				return nil, nil, err
			}
			docs = append(docs, d)
		}
		return docs, func(i int) string { return "volumesnapshot.snapshot.storage.k8s.io/" + r.Snapshots[i].Name }, nil
	}
	for _, c := range r.Claims {
		d, err := kubeout.Document(c)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, d)
	}
	return docs, func(i int) string { return "persistentvolumeclaim/" + r.Claims[i].Name }, nil
}

// sortRows orders the report's rows (rowsOf) by --sort-by.
func sortRows(r *Report, path string) error {
	docs, _, err := rowsOf(r)
	if err != nil {
		return err
	}
	idx, err := kubeout.Order(docs, path)
	if err != nil {
		return err
	}
	if r.Command == "prune" {
		r.Snapshots = permute(r.Snapshots, idx)
	} else {
		r.Claims = permute(r.Claims, idx)
	}
	return nil
}

func permute[T any](s []T, idx []int) []T {
	out := make([]T, len(s))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

// writeKubectl prints r in one of kubectl's kinds (kubeout.Parse): name, a
// JSONPath template over the report's JSON, or custom columns over its rows.
func writeKubectl(w io.Writer, r *Report, spec kubeout.Spec, noHeaders bool) error {
	switch spec.Kind {
	case kubeout.KindJSONPath:
		doc, err := kubeout.Document(r)
		if err != nil {
			return err
		}
		return kubeout.JSONPath(w, spec.Template, doc)
	case kubeout.KindName:
		docs, name, err := rowsOf(r)
		if err != nil {
			return err
		}
		var b strings.Builder
		for i := range docs {
			b.WriteString(name(i) + "\n")
		}
		_, err = io.WriteString(w, b.String())
		return err
	case kubeout.KindCustomColumns:
		docs, _, err := rowsOf(r)
		if err != nil {
			return err
		}
		return kubeout.Columns(w, spec.Columns, docs, noHeaders)
	}
	return fmt.Errorf("unknown output format %q", spec.Kind)
}
