package cli

import (
	"fmt"

	"github.com/spf13/cobra"

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
without writing anything and exits 3 when any of them is Held, Grace,
Orphaned, Snapshotting, SnapshotFailed, Attached or Superseded, or Rescued by a
snapshot whose content has deletionPolicy Delete (--allow-delete-policy accepts
those). At-risk claims are listed first. Exit 0 means nothing in scope would
be lost. --rescue runs snapshot first (it then needs a selector, like every
mutating command).`,
		Example: `  janitor guard -A -l app=ide --workspace-label workspace-id || echo "do not tear down"`,
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
			var gate error
			if n := len(atRisk); n > 0 {
				gate = exitcode.New(exitcode.DataAtRisk, fmt.Errorf("%d of %d claims in scope hold data a teardown would lose", n, len(res.Decisions)))
			}
			return finish(ctx, s.Out, r, cfg, gate)
		},
	}
}
