package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
)

func newReapCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "reap",
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
			return runPipeline(cmd, s, "reap", false)
		},
	}
}

func newRunCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "scan, snapshot and reap in one run under one lease (what the CronJob runs)",
		Long: `run is the CronJob's command: scan (and mark), rescue every Orphaned claim into
a VolumeSnapshot, then reap the claims whose rescue is ready, all under one
Lease and with one report. Without a terminal it needs --yes to delete
(or --dry-run).`,
		Example: `  janitor run -A -l app=ide --workspace-label workspace-id --yes`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPipeline(cmd, s, "run", true)
		},
	}
}

// runPipeline is reap (withRescue false) and run (true).
func runPipeline(cmd *cobra.Command, s Streams, name string, withRescue bool) error {
	var confirm func(int) (bool, error)
	check := func(cfg *config.Config) error {
		var err error
		confirm, err = confirmer(s, cfg.Yes, cfg.DryRun, name)
		return err
	}
	ctx, sess, release, err := begin(cmd, s, name, writes, check)
	defer release()
	if err != nil {
		return err
	}
	cfg := sess.cfg
	r := sess.newReport(name, cfg.DryRun)
	var res *janitor.ScanResult
	var stepErr error
	if withRescue {
		res, stepErr = sess.snapshot(ctx, r, s.ErrOut)
		if res == nil {
			if err := leaseErr(ctx); err != nil {
				return sess.failed(ctx, name, err)
			}
			return sess.failed(ctx, name, stepErr)
		}
	} else {
		if res, err = sess.scan(ctx, cfg.DryRun); err != nil {
			if lerr := leaseErr(ctx); lerr != nil {
				err = lerr
			}
			return sess.failed(ctx, name, err)
		}
		r.AddDecisions(res.Decisions)
		addMarks(r, res)
		stepErr = failuresError("marks", res.Marks.Errors)
	}
	candidates := map[inventory.Key]bool{}
	discard := cfg.Superseded == rescue.SupersededDiscard
	for i := range res.Decisions {
		d := &res.Decisions[i]
		if reap.Reapable(d, discard, cfg.GracePeriod, res.Now) {
			candidates[d.Claim.Key()] = true
		}
	}
	// Claims rescued by this run's snapshot step.
	for _, e := range r.Claims {
		if e.State == string(classify.Rescued) {
			candidates[inventory.Key{Namespace: e.Namespace, Name: e.Name}] = true
		}
	}
	reapErr := sess.reap(ctx, r, candidates, confirm)
	if err := leaseErr(ctx); err != nil {
		return sess.finish(ctx, s.Out, r, err)
	}
	if reapErr == nil {
		reapErr = stepErr
	}
	return sess.finish(ctx, s.Out, r, reapErr)
}

func (sess *session) reap(ctx context.Context, r *report.Report, candidates map[inventory.Key]bool, confirm func(int) (bool, error)) error {
	cfg := sess.cfg
	if ctx.Err() != nil {
		return nil
	}
	res, err := reap.Reap(ctx, sess.clients, candidates, reap.Options{
		Scope: sess.scope, Policy: sess.policy(), Discard: cfg.Superseded == rescue.SupersededDiscard,
		MaxDeletions: cfg.MaxDeletions, MaxDeletionPercent: cfg.MaxDeletionPercent,
		DryRun: cfg.DryRun, Retry: sess.retry, Confirm: confirm,
	})
	if err != nil {
		return err
	}
	var failed []error
	for _, o := range res.Outcomes {
		e := r.Entry(o.Namespace, o.Name)
		if e == nil {
			continue
		}
		e.Action = o.Action
		if o.State != "" {
			e.State = string(o.State)
		}
		if o.Message != "" {
			e.Reason = o.Message
		}
		if o.Err != nil {
			failed = append(failed, fmt.Errorf("%s/%s: %w", o.Namespace, o.Name, o.Err))
		}
	}
	if res.Blocked != "" {
		r.AddNote(res.Blocked)
		if res.Blocked != "deletion declined at the prompt; nothing was deleted" {
			return exitcode.New(exitcode.Partial, fmt.Errorf("%s", res.Blocked))
		}
	}
	return failuresError("deletions", failed)
}
