package cli

import (
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

func newScanCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "scan",
		Short: "Classify every workspace claim in scope and mark orphans on the claim",
		Long: `scan reads the claims in scope and everything that can keep them in use, gives
every claim one state (see the README), records orphaned-since and the phase on
the claim (pvc-janitor.io/orphaned-since, pvc-janitor.io/phase) and prints the
report. --dry-run writes nothing.`,
		Example: `  janitor scan -n workspaces -l app=ide --workspace-label workspace-id
  janitor scan -A -l app=ide -o json --dry-run`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, sess, release, err := begin(cmd, s, "scan", writes, nil)
			defer release()
			if err != nil {
				return err
			}
			cfg := sess.cfg
			res, err := sess.scan(ctx, cfg.DryRun)
			if err != nil {
				return sess.failed(ctx, "scan", err)
			}
			r := sess.newReport("scan", cfg.DryRun)
			r.AddDecisions(res.Decisions)
			addMarks(r, res)
			zerolog.Ctx(ctx).Debug().Int("marked", len(res.Marks.Outcomes)).Msg("scan done")
			return sess.finish(ctx, s.Out, r, failuresError("marks", res.Marks.Errors))
		},
	}
}
