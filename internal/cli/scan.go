package cli

import (
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
)

func newScanCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandScan,
		Short: "Classify every workspace claim in scope and mark orphans on the claim",
		Long: `scan reads the claims in scope and everything that can keep them in use
(pods, workloads, VolumeAttachments) and gives every claim one state
(docs/spec.md#states), then prints the report.

It marks what it saw on the claims, under the run's Lease: the annotation
pvc-janitor.io/orphaned-since (the grace period starts) and the label
pvc-janitor.io/phase. It never snapshots or deletes anything.

  --dry-run     writes nothing: no mark, no Event, no Lease.
  --marks-only  writes the orphaned-since and last-used annotations and the
                Lease, nothing else (docs/spec.md#marks-only).`,
		Example: `  # Read-only first: every claim's state, marking nothing and taking no Lease
  janitor scan -A -l app=ide --workspace-label workspace-id --dry-run

  # Classify and mark the orphans of one namespace (the grace period starts)
  janitor scan -n workspaces -l app=ide --workspace-label workspace-id

  # The report as data, sorted by when each claim was orphaned
  janitor scan -A -l app=ide -o json --sort-by .orphanedSince --dry-run`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return command(cmd, s, config.CommandScan, nil, scan)
		},
	}
	return withFlags(cmd, config.CommandScan)
}

// scan is scan's run on one cluster.
func scan(sess *session) error {
	dryRun := sess.cfg.DryRun
	// docs/spec.md#marks-only: marks are writes, under the Lease.
	if err := sess.lock(!dryRun || sess.cfg.MarksOnly, nil); err != nil {
		return err
	}
	res, err := janitor.Scan(sess.ctx, sess.clients, sess.scanOptions(dryRun))
	if err != nil {
		return sess.failed(err)
	}
	r := sess.newReport(config.CommandScan, dryRun)
	addScan(r, res)
	zerolog.Ctx(sess.ctx).Debug().Int("marked", len(res.Marks.Outcomes)).Msg("scan done")
	return sess.finish(r, failuresError("marks", res.Marks.Errors))
}
