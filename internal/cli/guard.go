package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func newGuardCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "guard",
		Short: "Exit 3 while any claim in scope holds data a teardown would lose",
		Long: `guard is the gate before a cluster teardown. It classifies every claim in scope
without writing anything and exits 3 when anything in scope holds data that a
teardown would lose:
  - claims that are InUse or Young (live data: stop the workspaces first), Held,
    Attached, Grace, Orphaned, Snapshotting, SnapshotFailed or Superseded;
  - Rescued claims whose rescue is not intact, or whose VolumeSnapshotContent
    has deletionPolicy Delete (--allow-delete-policy accepts those);
  - the janitor's own rescues of claims already reaped: the rescue is then the
    only copy, so it must be intact and, without --allow-delete-policy, Retain
    (listed under the report's snapshots);
  - fewer than --min-claims claims in scope (a mistyped selector must not pass).
At-risk entries are listed first. Exit 0 means nothing in scope would be lost.
--rescue runs snapshot first (it then needs a selector, like every mutating
command).`,
		Example: `  janitor guard -A -l app=ide --workspace-label workspace-id --min-claims 1 || echo "do not tear down"`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rescues := func(cfg *config.Config) bool { return cfg.Rescue && !cfg.DryRun }
			ctx, sess, release, err := begin(cmd, s, "guard", rescues, nil)
			defer release()
			if err != nil {
				return err
			}
			cfg := sess.cfg
			var scratch *report.Report
			if cfg.Rescue {
				// Rescue first; failed rescues show up in the judgement
				// below as SnapshotFailed claims, at risk.
				scratch = sess.newReport("snapshot", cfg.DryRun)
				if _, err := sess.snapshot(ctx, scratch, s.ErrOut); err != nil && exitcode.Code(err) != exitcode.Partial {
					return err
				}
			}
			// guard only reads: a CI gate needs no write permission.
			res, err := sess.scan(ctx, true)
			if err != nil {
				return sess.failed(ctx, "guard", err)
			}
			// guard itself only reads; with --rescue the report says what the
			// rescue did (actions, snapshotsCreated) and is not a dry run.
			r := sess.newReport("guard", !cfg.Rescue || cfg.DryRun)
			r.AddDecisions(res.Decisions)
			r.UnusedCondition = res.UnusedCondition
			atRisk := map[*report.ClaimEntry]bool{}
			for i := range res.Decisions {
				d := &res.Decisions[i]
				risky, why := janitor.AtRisk(d, res.Inventory, cfg.AllowDeletePolicy)
				if !risky {
					continue
				}
				e := r.Entry(d.Claim.Namespace, d.Claim.Name)
				e.Action = "at-risk"
				e.Reason = why + "; " + e.Reason
				atRisk[e] = true
			}
			if scratch != nil {
				for _, se := range scratch.Claims {
					if e := r.Entry(se.Namespace, se.Name); e != nil && !atRisk[e] && se.Action != "" {
						e.Action = se.Action
					}
				}
			}
			r.SortAtRiskFirst(func(e *report.ClaimEntry) bool { return atRisk[e] })

			// The rescues of claims already reaped are their only copy.
			live, err := janitor.ClaimUIDs(ctx, sess.clients, res.Inventory, sess.retry)
			if err != nil {
				return sess.failed(ctx, "guard", err)
			}
			snapsAtRisk := 0
			for _, sn := range janitor.OnlyCopies(res.Inventory, func(u types.UID) bool { return live[u] }) {
				risky, why := janitor.SnapshotAtRisk(sn, res.Inventory, cfg.AllowDeletePolicy)
				dt := classify.DataTime(sn, nil)
				e := &report.SnapshotEntry{Namespace: sn.Namespace, Name: sn.Name, SourceClaim: sn.SourceClaim,
					SourceUID: string(sn.SourceUID), Workspace: sn.Workspace, DataTime: &dt, ReadyToUse: sn.ReadyToUse,
					DeletionPolicy: res.Inventory.Contents[sn.ContentName].DeletionPolicy,
					Reason:         "the only copy of claim " + sn.SourceClaim + " (gone)"}
				if risky {
					snapsAtRisk++
					e.Action = "at-risk"
					e.Reason = why + "; " + e.Reason
				}
				r.Snapshots = append(r.Snapshots, e)
			}
			sort.SliceStable(r.Snapshots, func(i, j int) bool {
				return r.Snapshots[i].Action == "at-risk" && r.Snapshots[j].Action != "at-risk"
			})

			var problems []string
			if n := len(atRisk); n > 0 {
				problems = append(problems, fmt.Sprintf("%d of %d claims in scope hold data a teardown would lose", n, len(res.Decisions)))
			}
			if snapsAtRisk > 0 {
				problems = append(problems, fmt.Sprintf("%d rescues of reaped claims (their only copy) could be lost", snapsAtRisk))
			}
			if len(res.Decisions) < cfg.MinClaims {
				msg := fmt.Sprintf("%d claims in scope, fewer than --min-claims %d (a mistyped selector or namespace?)", len(res.Decisions), cfg.MinClaims)
				problems = append(problems, msg)
				r.AddNote(msg)
			}
			var gate error
			if len(problems) > 0 {
				gate = exitcode.New(exitcode.DataAtRisk, errors.New(strings.Join(problems, "; ")))
			}
			return sess.finish(ctx, s.Out, r, gate)
		},
	}
}
