package cli

import (
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func newReapCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandReap,
		Short: "Scan, then delete every claim whose data is provably rescued",
		Long: `reap scans, then deletes every Rescued claim (and Superseded ones under
--superseded=discard). Immediately before deleting it re-reads the cluster and
re-classifies; each delete carries Preconditions{UID, ResourceVersion} from that
read, so a claim that changed since (a pod started using it) is skipped, not
deleted. Over --max-deletions or --max-deletion-percent nothing is deleted
(exit 4). On a terminal it asks for confirmation unless --yes; without a
terminal and without --yes it refuses (exit 2). --dry-run deletes nothing.`,
		Example: `  janitor reap -n workspaces -l app=ide --workspace-label workspace-id --dry-run
  janitor reap -A -l app=ide --workspace-label workspace-id --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sess, confirm, err := beginDeleting(cmd, s, config.CommandReap)
			if err != nil {
				return err
			}
			defer sess.close()
			if err := sess.lock(!sess.cfg.DryRun, nil); err != nil {
				return err
			}
			res, err := janitor.Reap(sess.ctx, sess.clients, sess.reapOptions(confirm))
			if err != nil {
				if lerr := sess.leaseErr(); lerr != nil {
					err = lerr
				}
				return sess.failed(err)
			}
			r := sess.newReport(config.CommandReap, sess.cfg.DryRun)
			addScan(r, res.Scan)
			return sess.finishReap(r, addReap(r, res.Step), failuresError("marks", res.Scan.Marks.Errors))
		},
	}
	return withFlags(cmd, config.CommandReap)
}

func newRunCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandRun,
		Short: "scan, snapshot and reap in one run under one lease (what the CronJob runs)",
		Long: `run is the CronJob's command: scan (and mark), rescue every Orphaned claim into
a VolumeSnapshot, then reap the claims whose rescue is ready, all under one
Lease and with one report. Without a terminal it needs --yes to delete
(or --dry-run).`,
		Example: `  janitor run -A -l app=ide --workspace-label workspace-id --yes`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sess, confirm, err := beginDeleting(cmd, s, config.CommandRun)
			if err != nil {
				return err
			}
			defer sess.close()
			if err := sess.lock(!sess.cfg.DryRun, sess.snapshotOptions(nil).Validate); err != nil {
				return err
			}
			prog := newProgress(s.ErrOut, zerolog.Ctx(sess.ctx))
			res, err := janitor.Run(sess.ctx, sess.clients, janitor.RunOptions{
				Snapshot: sess.snapshotOptions(prog), Reap: sess.reapOptions(confirm), Prune: sess.pruneOptions(nil)})
			if err != nil {
				if lerr := sess.leaseErr(); lerr != nil {
					err = lerr
				}
				return sess.failed(exitError(err))
			}
			r := sess.newReport(config.CommandRun, sess.cfg.DryRun)
			stepErr := addSnapshot(r, res.Snapshot)
			reapErr := addReap(r, res.Reap)
			if pruneErr := addRunPrune(r, res); reapErr == nil {
				reapErr = pruneErr
			}
			return sess.finishReap(r, reapErr, stepErr)
		},
	}
	return withFlags(cmd, config.CommandRun)
}

// beginDeleting is begin for the commands that delete claims: without
// --yes they need a terminal to confirm on, checked before anything is read.
func beginDeleting(cmd *cobra.Command, s Streams, name string) (*session, func(int) (bool, error), error) {
	var confirm func(int) (bool, error)
	sess, err := begin(cmd, s, name, func(cfg *config.Config) error {
		var err error
		confirm, err = confirmer(s, cfg.Yes, cfg.DryRun, name)
		return err
	})
	return sess, confirm, err
}

// finishReap ends reap and run: a lost lease is their outcome, else the
// reap's error, else the error of the steps before it.
func (sess *session) finishReap(r *report.Report, reapErr, stepErr error) error {
	if err := sess.leaseErr(); err != nil {
		return sess.finish(r, err)
	}
	if reapErr == nil {
		reapErr = stepErr
	}
	return sess.finish(r, reapErr)
}

// addRunPrune records run's retention step, if it had one.
func addRunPrune(r *report.Report, res *janitor.RunResult) error {
	switch {
	case res.PruneErr != nil:
		r.AddNote("retention: " + res.PruneErr.Error())
		return res.PruneErr
	case res.Prune != nil:
		return addPrune(r, res.Prune)
	}
	return nil
}
