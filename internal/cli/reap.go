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
--superseded=discard).

Right before deleting it re-reads and re-classifies the claims; each delete
carries the UID and resourceVersion of that read, so a claim that changed
since (a pod started using it) is skipped, never deleted.

  - More than --max-deletions or --max-deletion-percent: nothing is deleted
    (exit 4).
  - On a terminal it asks first, unless --yes. Without a terminal, or over
    several clusters (--context a,b, --all-contexts), it needs --yes or
    --dry-run (exit 2).
  - --dry-run deletes nothing; -o name lists the claims it would delete.`,
		Example: `  # The claims reap would delete, one per line, deleting nothing
  janitor reap -n workspaces -l app=ide --workspace-label workspace-id --dry-run -o name

  # Delete every rescued claim, without the prompt (a script, a CronJob)
  janitor reap -A -l app=ide --workspace-label workspace-id --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			confirm, check := confirmation(s, config.CommandReap)
			return command(cmd, s, config.CommandReap, check, func(sess *session) error { return reapOn(sess, *confirm) })
		},
	}
	return withFlags(cmd, config.CommandReap)
}

// reapOn is reap's run on one cluster.
func reapOn(sess *session, confirm func(int) (bool, error)) error {
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
}

func newRunCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandRun,
		Short: "scan, snapshot and reap in one run under one lease (what the CronJob runs)",
		Long: `run is the CronJob's command: scan (and mark), rescue every Orphaned claim
into a VolumeSnapshot, reap the claims whose rescue is intact and, with
--keep-for or --keep-last, prune; under one Lease, with one report.

It deletes only what reap would, and prunes only what prune would.

  - Without a terminal, or over several clusters (--context a,b,
    --all-contexts), it needs --yes to delete (exit 2 otherwise).
  - --dry-run writes nothing and reports what it would do.
  - --marks-only writes only the marks and the Lease: the chart's preview,
    whose grace periods start on every Kubernetes minor
    (docs/spec.md#marks-only).`,
		Example: `  # Preview a whole run: what it would mark, rescue, reap and prune, changing nothing
  janitor run -A -l app=ide --workspace-label workspace-id --dry-run

  # The chart's preview: writes only the marks and the Lease, so grace periods start
  janitor run -A -l app=ide --workspace-label workspace-id --marks-only

  # What the chart's CronJob runs once it acts
  janitor run -A -l app=ide --workspace-label workspace-id --yes

  # With retention: prune rescues older than 30 days after the reap
  janitor run -A -l app=ide --workspace-label workspace-id --keep-for 720h --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			confirm, check := confirmation(s, config.CommandRun)
			return command(cmd, s, config.CommandRun, check, func(sess *session) error { return runOn(sess, *confirm) })
		},
	}
	return withFlags(cmd, config.CommandRun)
}

// runOn is run's run on one cluster.
func runOn(sess *session, confirm func(int) (bool, error)) error {
	// docs/spec.md#marks-only: marks are writes, under the Lease.
	if err := sess.lock(!sess.cfg.DryRun || sess.cfg.MarksOnly, sess.rescueOptions(nil).Validate); err != nil {
		return err
	}
	prog := newProgress(sess.s.ErrOut, zerolog.Ctx(sess.ctx))
	res, err := janitor.Run(sess.ctx, sess.clients, janitor.RunOptions{
		Rescue: sess.rescueOptions(prog), Reap: sess.reapOptions(confirm), Prune: sess.pruneOptions(nil)})
	if err != nil {
		if lerr := sess.leaseErr(); lerr != nil {
			err = lerr
		}
		return sess.failed(exitError(err))
	}
	r := sess.newReport(config.CommandRun, sess.cfg.DryRun)
	stepErr := addRescue(r, res.Rescue)
	reapErr := addReap(r, res.Reap)
	if pruneErr := addRunPrune(r, res); reapErr == nil {
		reapErr = pruneErr
	}
	return sess.finishReap(r, reapErr, stepErr)
}

// confirmation is the check of the commands that delete: without --yes
// they need a terminal to confirm on, checked before anything is read. The
// prompt it makes lands in *confirm (nil with --yes or --dry-run, which a
// fleet always has: config refuses a fleet of deletions without them).
func confirmation(s Streams, name string) (*func(int) (bool, error), func(*config.Config) error) {
	confirm := new(func(int) (bool, error))
	return confirm, func(cfg *config.Config) error {
		var err error
		*confirm, err = confirmer(s, cfg, name)
		return err
	}
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
