package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/fleet"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
)

func newExplainCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandExplain + " NAMESPACE/CLAIM | CLAIM",
		Short: "Show why a claim is in its state: the whole evidence chain, read-only",
		Long: `explain reads the claim's namespace as a scan would (writing nothing) and shows
every rule of docs/spec.md#states in order, matched or not and why; what references the
claim; the janitor's mark and the Unused condition side by side and which one
dates the orphan period; every snapshot of the claim or its workspace with its
cut and data times, whether it is intact and what it is to this claim; the
workspace's other claims; and the next action with the earliest time it can
happen. -o json (or yaml) gives the same as data.`,
		Example: `  janitor explain workspaces/ws-abc --workspace-label workspace-id
  kubectl janitor explain -n workspaces ws-abc -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return command(cmd, s, config.CommandExplain, nil, func(sess *session) error {
				k, err := sess.claimArg(args[0])
				if err != nil {
					return err
				}
				return sess.explain(k)
			})
		},
	}
	return withFlags(cmd, config.CommandExplain)
}

// claimArg reads NAMESPACE/CLAIM, or CLAIM in the one namespace of -n (or
// the context's).
func (sess *session) claimArg(arg string) (inventory.Key, error) {
	ns := ""
	if len(sess.scope.Namespaces) == 1 && !sess.cfg.AllNamespaces {
		ns = sess.scope.Namespaces[0]
	}
	name := arg
	if n, c, ok := strings.Cut(arg, "/"); ok {
		if len(sess.cfg.Namespaces) > 0 && n != ns {
			return inventory.Key{}, exitcode.New(exitcode.Usage, fmt.Errorf("%s names namespace %s, but -n says %s", arg, n, ns))
		}
		ns, name = n, c
	}
	if ns == "" || name == "" {
		return inventory.Key{}, exitcode.New(exitcode.Usage, fmt.Errorf("%q: want NAMESPACE/CLAIM or -n NAMESPACE CLAIM", arg))
	}
	return inventory.Key{Namespace: ns, Name: name}, nil
}

// explanation is explain's document: the evidence chain and the claim's
// size, class and volume.
type explanation struct {
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

// explain reads the claim's namespace (a dry-run scan: nothing is written)
// and prints the claim's evidence chain.
func (sess *session) explain(k inventory.Key) error {
	o := sess.scanOptions(true)
	o.Scope.Namespaces = []string{k.Namespace}
	res, err := janitor.Scan(sess.ctx, sess.clients, o)
	if err != nil {
		return sess.failed(err)
	}
	e, ok := classify.Explain(res.Inventory, o.Policy, res.Now, k)
	if !ok {
		sel := sess.cfg.SelectorString
		if sel == "" {
			sel = "<none>"
		}
		return exitcode.New(exitcode.Usage, &notFoundError{fmt.Errorf("claim %s not found in scope (selector %s)", k, sel)})
	}
	doc := explanation{Kind: "Explanation", APIVersion: "pvc-janitor.io/v1", Explanation: e}
	if sess.fleet != nil {
		doc.Cluster = sess.fleet.context
	}
	for i := range res.Inventory.Claims {
		if cl := &res.Inventory.Claims[i]; cl.Key() == k {
			doc.Capacity, doc.StorageClass, doc.Volume = cl.Capacity, cl.StorageClass, cl.VolumeName
			doc.ReclaimPolicy = res.Inventory.PVs[cl.VolumeName].ReclaimPolicy
		}
	}
	if m, ok := sess.cfg.PriceTable.Claim(doc.StorageClass, doc.Capacity); ok {
		doc.MonthlyCost = &m
	}
	if sess.fleet != nil {
		sess.fleet.explained = &doc
		return nil
	}
	return printExplanation(sess.s.Out, sess.cfg.Output, &doc)
}

// printExplanation prints one explanation in format.
func printExplanation(w io.Writer, format string, doc any) error {
	switch format {
	case config.OutputJSON, config.OutputYAML:
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if format == config.OutputYAML {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			b = append(b, '\n')
		}
		_, err = w.Write(b)
		return err
	}
	d, ok := doc.(*explanation)
	if !ok {
		return fmt.Errorf("no table for %T", doc)
	}
	return writeExplanation(w, d)
}

// notFoundError: the claim is not in this cluster's scope.
type notFoundError struct{ error }

func (e *notFoundError) Unwrap() error { return e.error }

// explanationList is explain's document over a fleet: the claim's
// explanation in each cluster that has it, and the error of each that
// could not be read.
type explanationList struct {
	Kind       string         `json:"kind"`
	APIVersion string         `json:"apiVersion"`
	Items      []*explanation `json:"items"`
	Errors     []clusterError `json:"errors,omitempty"`
}

type clusterError struct {
	Cluster  string `json:"cluster"`
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error"`
}

// writeExplanations prints explain over a fleet: each cluster that has the
// claim, under a heading (or as an item of -o json/yaml), then the others'
// errors. A cluster without the claim is no failure when another has it
// (a claim lives in one cluster); when none has it, it is exit 2.
func writeExplanations(w io.Writer, format string, results []fleet.Result[*clusterRun]) error {
	doc := explanationList{Kind: "ExplanationList", APIVersion: "pvc-janitor.io/v1", Items: []*explanation{}}
	var codes []int
	var failed []string
	found := false
	for _, res := range results {
		if res.Value != nil && res.Value.explained != nil {
			found = true
			doc.Items = append(doc.Items, res.Value.explained)
		}
	}
	for _, res := range results {
		if res.Err == nil {
			continue
		}
		var notFound *notFoundError
		code := exitcode.Code(res.Err)
		if errors.As(res.Err, &notFound) && found {
			code = exitcode.OK
		}
		codes = append(codes, code)
		doc.Errors = append(doc.Errors, clusterError{Cluster: res.Context, ExitCode: code, Error: res.Err.Error()})
		if code != exitcode.OK {
			failed = append(failed, res.Context+": "+res.Err.Error())
		}
	}
	var err error
	if code := fleet.ExitCode(codes); code != exitcode.OK {
		err = exitcode.New(code, fmt.Errorf("%d of %d clusters did not end well (exit %d, the most serious): %s",
			len(failed), len(results), code, strings.Join(failed, "; ")))
	}
	if format == config.OutputJSON || format == config.OutputYAML {
		if perr := printExplanation(w, format, doc); perr != nil && err == nil {
			err = perr
		}
		return err
	}
	for i, e := range doc.Items {
		if i > 0 {
			_, _ = io.WriteString(w, "\n")
		}
		_, _ = fmt.Fprintf(w, "Cluster %s:\n", e.Cluster)
		if perr := writeExplanation(w, e); perr != nil && err == nil {
			err = perr
		}
	}
	for _, e := range doc.Errors {
		_, _ = fmt.Fprintf(w, "\nCluster %s: %s\n", e.Cluster, e.Error)
	}
	return err
}

// writeExplanation prints the evidence chain for a person.
func writeExplanation(w io.Writer, d *explanation) error {
	ts := func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Claim %s: %s\n  %s\n", d.Claim, d.State, d.Reason)
	if d.Workspace != "" {
		fmt.Fprintf(&b, "  workspace %s\n", d.Workspace)
	}
	if d.Capacity > 0 {
		fmt.Fprintf(&b, "  %s, class %s, volume %s (reclaim policy %s)", cost.Bytes(d.Capacity), none(d.StorageClass), none(d.Volume), none(d.ReclaimPolicy))
		if d.MonthlyCost != nil {
			fmt.Fprintf(&b, ", %.2f a month", *d.MonthlyCost)
		}
		b.WriteString("\n")
	}
	b.WriteString("\nRules (docs/spec.md#states, in order; the first that matches decides):\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
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
	b.WriteString("\nUse:\n")
	if len(d.Referrers) == 0 {
		b.WriteString("  nothing references the claim\n")
	}
	for _, r := range d.Referrers {
		fmt.Fprintf(&b, "  %s %s/%s (%s)", r.Kind, r.Namespace, r.Name, r.Detail)
		if !r.Created.IsZero() {
			fmt.Fprintf(&b, ", created %s", r.Created.UTC().Format(time.RFC3339))
		}
		if r.Terminal {
			b.WriteString(", ended")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nOrphaned since:\n")
	fmt.Fprintf(&b, "  mark (pvc-janitor.io/orphaned-since): %s\n", none(d.Mark))
	cond := "absent"
	if c := d.Condition; c != nil {
		cond = c.Status + " since " + ts(&c.LastTransitionTime)
	}
	fmt.Fprintf(&b, "  Unused condition: %s (this run: %s", cond, d.ConditionUse)
	if d.ConditionWhy != "" {
		b.WriteString(": " + d.ConditionWhy)
	}
	b.WriteString(")\n")
	fmt.Fprintf(&b, "  counts: %s -> %s\n", none(d.Counts), ts(d.OrphanedSince))
	if len(d.Snapshots) > 0 {
		b.WriteString("\nSnapshots (newest data first):\n")
		tw = tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
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
			fmt.Fprintf(tw, "  %s\t%s\t%t\t%s\t%s\t%s\t%s\n", s.Name, none(s.Source), s.Janitor, intact, ts(&s.Cut), data, role)
		}
		_ = tw.Flush()
	}
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

func none(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
