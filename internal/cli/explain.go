package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/fleet"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func newExplainCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandExplain + " NAMESPACE/CLAIM | CLAIM",
		Short: "Show why a claim is in its state: the whole evidence chain, read-only",
		Long: `explain shows why one claim is in its state. It reads the claim's
namespace as a scan would and writes nothing: no mark, no Lease.

It shows:
  - every rule of docs/spec.md#states in order, matched or not, and why;
  - what references the claim;
  - the janitor's mark and the Unused condition side by side, and which one
    dates the orphan period;
  - every snapshot of the claim or its workspace: cut and data times, whether
    it is intact, and what it is to this claim;
  - the workspace's other claims;
  - the next action, and the earliest time it can happen.

-o json (or yaml) gives the same as data.`,
		Example: `  # Why the claim is in its state, and what happens to it next
  janitor explain workspaces/ws-abc --workspace-label workspace-id

  # The same as data, through kubectl
  kubectl janitor explain -n workspaces ws-abc -o json`,
		Args: oneClaim,
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

// explain reads the claim's namespace (a dry-run scan: nothing is written)
// and prints the claim's evidence chain.
func (sess *session) explain(k inventory.Key) error {
	o := sess.readOnlyScanOptions()
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
	doc := report.Explanation{Kind: "Explanation", APIVersion: "pvc-janitor.io/v1", Explanation: e}
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
	return report.WriteExplanations(sess.s.Out, &doc, outputOf(sess.cfg))
}

// notFoundError: the claim is not in this cluster's scope.
type notFoundError struct{ error }

func (e *notFoundError) Unwrap() error { return e.error }

// writeExplanations prints explain over a fleet: each cluster that has the
// claim, under a heading (or as an item of -o json/yaml), then the others'
// errors. A cluster without the claim is no failure when another has it
// (a claim lives in one cluster); when none has it, it is exit 2.
func writeExplanations(w io.Writer, out report.Output, results []fleet.Result[*clusterRun]) error {
	doc := report.ExplanationList{Kind: "ExplanationList", APIVersion: "pvc-janitor.io/v1", Items: []*report.Explanation{}}
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
		doc.Errors = append(doc.Errors, report.ClusterError{Cluster: res.Context, ExitCode: code, Error: res.Err.Error()})
		if code != exitcode.OK {
			failed = append(failed, res.Context+": "+res.Err.Error())
		}
	}
	var err error
	if code := fleet.ExitCode(codes); code != exitcode.OK {
		err = exitcode.New(code, fmt.Errorf("%d of %d clusters did not end well (exit %d, the most serious): %s",
			len(failed), len(results), code, strings.Join(failed, "; ")))
	}
	if perr := report.WriteExplanations(w, &doc, out); perr != nil && err == nil {
		err = perr
	}
	return err
}
