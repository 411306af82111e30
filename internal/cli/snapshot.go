package cli

import (
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
)

func newSnapshotCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandSnapshot,
		Short: "Scan, then rescue every Orphaned claim into a VolumeSnapshot",
		Long: `snapshot scans (and marks), then rescues every Orphaned claim (and every
Superseded one under --superseded=archive) into a VolumeSnapshot, and waits
until each is intact: ready, no error, bound to its content (at most
--snapshot-timeout).

Just before each create it re-reads the claim's namespace: a claim used again
or superseded since the scan is skipped.

A snapshot whose status.error lasts --snapshot-error-grace is recreated, at
most --snapshot-attempts times; the claim then records the failure and when
the next run may retry (--snapshot-retry-backoff, doubled per failed run, at
most 24h).

It never deletes a claim, and never gives a Superseded claim an ordinary
snapshot (it could be restored over the user's newer work). --dry-run
creates nothing. Exit 4 when a rescue failed.`,
		Example: `  # What would be rescued, creating nothing
  janitor snapshot -n workspaces -l app=ide --workspace-label workspace-id --dry-run

  # Rescue every orphan of one namespace and wait until each is intact
  janitor snapshot -n workspaces -l app=ide --workspace-label workspace-id

  # Archive superseded claims too, with a class whose contents are Retain
  janitor snapshot -A -l app=ide --superseded archive --snapshot-class csi-retain`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return command(cmd, s, config.CommandSnapshot, nil, snapshot)
		},
	}
	return withFlags(cmd, config.CommandSnapshot)
}

// snapshot is snapshot's run on one cluster.
func snapshot(sess *session) error {
	if err := sess.lock(!sess.cfg.DryRun, sess.rescueOptions(nil).Validate); err != nil {
		return err
	}
	prog := newProgress(sess.s.ErrOut, zerolog.Ctx(sess.ctx))
	res, err := janitor.Rescue(sess.ctx, sess.clients, sess.rescueOptions(prog))
	if err != nil {
		return sess.failed(exitError(err))
	}
	r := sess.newReport(config.CommandSnapshot, sess.cfg.DryRun)
	return sess.finish(r, addRescue(r, res))
}
