package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
)

// Explanation is janitor explain's document: the claim's evidence chain
// (classify.Explanation) and its size, class, volume and monthly cost.
type Explanation struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Cluster is the kubeconfig context, over a fleet only.
	Cluster string `json:"cluster,omitempty"`
	classify.Explanation
	Capacity      int64    `json:"capacity,omitempty"`
	StorageClass  string   `json:"storageClass,omitempty"`
	Volume        string   `json:"volumeName,omitempty"`
	ReclaimPolicy string   `json:"reclaimPolicy,omitempty"`
	MonthlyCost   *float64 `json:"monthlyCost,omitempty"`
}

// ExplanationList is explain's document over a fleet: the claim's
// explanation in each cluster that has it, and the error of each that
// could not be read.
type ExplanationList struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Items      []*Explanation `json:"items"`
	Errors     []ClusterError `json:"errors,omitempty"`
}

// ClusterError is a cluster of a fleet that gave no explanation.
type ClusterError struct {
	Cluster  string `json:"cluster"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error"`
}

// WriteExplanations prints an explanation (*Explanation) or a fleet's
// (*ExplanationList) in out.Format: JSON or YAML as they are, a table as the
// evidence chain for a person, under a heading per cluster over a fleet;
// kubectl's kinds with a row per explanation (--no-headers, --sort-by).
func WriteExplanations(w io.Writer, doc any, out Output) error {
	format := out.Format
	if spec, ok, err := kubeout.Parse(format); ok {
		if err != nil {
			return err
		}
		return writeExplanationsKubectl(w, doc, spec, out)
	}
	switch format {
	case FormatJSON, FormatYAML:
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if format == FormatYAML {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			b = append(b, '\n')
		}
		_, err = w.Write(b)
		return err
	}
	switch d := doc.(type) {
	case *Explanation:
		return WriteExplanation(w, d)
	case *ExplanationList:
		for i, e := range d.Items {
			if i > 0 {
				_, _ = io.WriteString(w, "\n")
			}
			_, _ = fmt.Fprintf(w, "Cluster %s:\n", e.Cluster)
			if err := WriteExplanation(w, e); err != nil {
				return err
			}
		}
		for _, e := range d.Errors {
			_, _ = fmt.Fprintf(w, "\nCluster %s: %s\n", e.Cluster, e.Error)
		}
		return nil
	}
	return fmt.Errorf("no table for %T", doc)
}

// ts is a time for a person: RFC 3339 in UTC, "-" for none.
func ts(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// orNone fills an empty value, as kubectl does.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// WriteExplanation prints the evidence chain of one claim for a person.
func WriteExplanation(w io.Writer, d *Explanation) error {
	var b strings.Builder
	explainClaim(&b, d)
	explainRules(&b, d)
	explainUse(&b, d)
	explainSnapshots(&b, d)
	if len(d.OtherClaims) > 0 {
		b.WriteString("\nOther claims of the workspace:\n")
		for _, o := range d.OtherClaims {
			fmt.Fprintf(&b, "  %s: %s, created %s\n", o.Name, o.State, o.Created.UTC().Format(time.RFC3339))
		}
	}
	if d.Discard != "" {
		fmt.Fprintf(&b, "\nDiscard (--superseded=discard): %s\n", d.Discard)
	}
	fmt.Fprintf(&b, "\nNext: %s", d.Next.Action)
	if d.Next.Earliest != nil {
		fmt.Fprintf(&b, ", not before %s", ts(d.Next.Earliest))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// explainClaim writes the claim, its state and reason, its workspace, size
// and cost.
func explainClaim(b *strings.Builder, d *Explanation) {
	fmt.Fprintf(b, "Claim %s: %s\n  %s\n", d.Claim, d.State, d.Reason)
	if d.Workspace != "" {
		fmt.Fprintf(b, "  workspace %s\n", d.Workspace)
	}
	if d.Capacity > 0 {
		fmt.Fprintf(b, "  %s, class %s, volume %s (reclaim policy %s)", cost.Bytes(d.Capacity), orNone(d.StorageClass), orNone(d.Volume), orNone(d.ReclaimPolicy))
		if d.MonthlyCost != nil {
			fmt.Fprintf(b, ", %.2f a month", *d.MonthlyCost)
		}
		b.WriteString("\n")
	}
}

// explainRules writes the state rules in order, the one that decided
// marked MATCH.
func explainRules(b *strings.Builder, d *Explanation) {
	b.WriteString("\nRules (docs/spec.md#states, in order; the first that matches decides):\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	for _, r := range d.Rules {
		m := "no"
		switch {
		case r.Matched:
			m = "MATCH"
		case strings.HasPrefix(r.Why, "not reached"):
			m = "-"
		}
		fmt.Fprintf(tw, "  %2d\t%s\t%s\t%s\n", r.Number, r.State, m, r.Why)
	}
	_ = tw.Flush()
}

// explainUse writes what references the claim and the evidence of its
// orphaned-since.
func explainUse(b *strings.Builder, d *Explanation) {
	b.WriteString("\nUse:\n")
	if len(d.Referrers) == 0 {
		b.WriteString("  nothing references the claim\n")
	}
	for _, r := range d.Referrers {
		fmt.Fprintf(b, "  %s %s/%s (%s)", r.Kind, r.Namespace, r.Name, r.Detail)
		if !r.Created.IsZero() {
			fmt.Fprintf(b, ", created %s", r.Created.UTC().Format(time.RFC3339))
		}
		if r.Terminal {
			b.WriteString(", ended")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nOrphaned since:\n")
	fmt.Fprintf(b, "  mark (pvc-janitor.io/orphaned-since): %s\n", orNone(d.Mark))
	cond := "absent"
	if c := d.Condition; c != nil {
		cond = c.Status + " since " + ts(&c.LastTransitionTime)
	}
	fmt.Fprintf(b, "  Unused condition: %s (this run: %s", cond, d.ConditionUse)
	if d.ConditionWhy != "" {
		b.WriteString(": " + d.ConditionWhy)
	}
	b.WriteString(")\n")
	fmt.Fprintf(b, "  counts: %s -> %s\n", orNone(d.Counts), ts(d.OrphanedSince))
}

// explainSnapshots writes the snapshots of the claim's data, newest data
// first, with the role each plays.
func explainSnapshots(b *strings.Builder, d *Explanation) {
	if len(d.Snapshots) == 0 {
		return
	}
	b.WriteString("\nSnapshots (newest data first):\n")
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSOURCE\tJANITOR'S\tINTACT\tCUT\tDATA\tROLE")
	for _, s := range d.Snapshots {
		intact := "yes"
		if !s.Intact {
			intact = "no: " + s.NotIntact
		}
		data := ts(&s.Data)
		if !s.DataKnown {
			data += " (upper bound)"
		}
		role := s.Role
		if s.Stale {
			role += " (labelled stale: left to prune)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%t\t%s\t%s\t%s\t%s\n", s.Name, orNone(s.Source), s.Janitor, intact, ts(&s.Cut), data, role)
	}
	_ = tw.Flush()
}

// writeExplanationsKubectl prints explanations in one of kubectl's kinds: a
// JSONPath template over the document, or name and custom columns with a
// row per explanation.
func writeExplanationsKubectl(w io.Writer, doc any, spec kubeout.Spec, out Output) error {
	if spec.Kind == kubeout.KindJSONPath {
		d, err := kubeout.Document(doc)
		if err != nil {
			return err
		}
		return kubeout.JSONPath(w, spec.Template, d)
	}
	items := []*Explanation{}
	switch d := doc.(type) {
	case *Explanation:
		items = append(items, d)
	case *ExplanationList:
		items = d.Items
	}
	// -o name unsorted prints names only: no documents to build.
	if spec.Kind == kubeout.KindName && out.SortBy == "" {
		return writeExplanationNames(w, items)
	}
	rows := make([]any, 0, len(items))
	for _, e := range items {
		d, err := kubeout.Document(e)
		if err != nil {
			return err
		}
		rows = append(rows, d)
	}
	if out.SortBy != "" {
		idx, err := kubeout.Order(rows, out.SortBy)
		if err != nil {
			return err
		}
		items, rows = permute(items, idx), permute(rows, idx)
	}
	if spec.Kind == kubeout.KindName {
		return writeExplanationNames(w, items)
	}
	return kubeout.Columns(w, spec.Columns, rows, out.NoHeaders)
}

func writeExplanationNames(w io.Writer, items []*Explanation) error {
	for _, e := range items {
		if _, err := fmt.Fprintf(w, "persistentvolumeclaim/%s\n", e.Claim.Name); err != nil {
			return err
		}
	}
	return nil
}
