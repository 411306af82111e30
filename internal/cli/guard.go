package cli

import (
	"errors"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

func newGuardCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandGuard,
		Short: "Exit 3 while any claim in scope holds data a teardown would lose",
		Long: `guard is the gate before a cluster teardown. It classifies every claim in
scope, writes nothing, and exits 3 while anything in scope holds data a
teardown would lose:

  - claims that are ` + atRiskStates() + `;
  - Rescued claims whose rescue is not intact, or whose VolumeSnapshotContent
    has deletionPolicy Delete (--allow-delete-policy accepts those);
  - the janitor's own rescues of claims already reaped (the only copy): not
    intact, or Delete without --allow-delete-policy; listed under snapshots;
  - fewer than --min-claims claims in scope (a mistyped selector must not
    pass).

At-risk entries come first. Exit 0: nothing in scope would be lost.

--rescue runs snapshot first; it then needs a selector, like every command
that writes.`,
		Example: `  # The gate before a teardown: exit 3 while anything in scope would be lost
  janitor guard -A -l app=ide --workspace-label workspace-id || echo "do not tear down"

  # Rescue the orphans first, then judge (writes snapshots, takes the Lease)
  janitor guard --rescue -A -l app=ide --workspace-label workspace-id`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return command(cmd, s, config.CommandGuard, nil, (*session).guard)
		},
	}
	return withFlags(cmd, config.CommandGuard)
}

// guard runs the gate; with --rescue it rescues first under the lease.
func (sess *session) guard() error {
	cfg := sess.cfg
	o := janitor.GuardOptions{Scan: sess.readOnlyScanOptions(), AllowDeletePolicy: cfg.AllowDeletePolicy, MinClaims: cfg.MinClaims}
	if cfg.Rescue {
		if err := sess.lock(!cfg.DryRun, sess.rescueOptions(nil).Validate); err != nil {
			return err
		}
		so := sess.rescueOptions(newProgress(sess.s.ErrOut, zerolog.Ctx(sess.ctx)))
		o.Rescue = &so
	}
	res, err := janitor.Guard(sess.ctx, sess.clients, o)
	if err != nil {
		var re *janitor.RescueError
		if errors.As(err, &re) {
			// The rescue's own failure: reported as it is, like snapshot's.
			return exitError(re.Err)
		}
		return sess.failed(err)
	}
	var rescued *report.Report
	if res.Rescue != nil {
		rescued = sess.newReport(config.CommandSnapshot, cfg.DryRun)
		_ = addRescue(rescued, res.Rescue) // failed rescues are judged below, as SnapshotFailed claims
	}
	// guard itself only reads; with --rescue the report says what the
	// rescue did (actions, snapshotsCreated) and is not a dry run.
	r := sess.newReport(config.CommandGuard, !cfg.Rescue || cfg.DryRun)
	return sess.finish(r, addGuard(r, res, rescued))
}

// atRiskStates lists the states whose claims a teardown would lose
// (classify.StateRules' Teardown), for guard's help: "InUse, Young or Held".
func atRiskStates() string {
	var names []string
	for _, r := range classify.StateRules {
		if r.Teardown != "" {
			names = append(names, string(r.State))
		}
	}
	var b strings.Builder
	width := len("  - claims that are ")
	for i, n := range names {
		sep := ", "
		switch {
		case i == 0:
			sep = ""
		case i == len(names)-1:
			sep = " or "
		}
		if width+len(sep)+len(n) > 78 { // wrap, indented under the item
			sep = strings.TrimRight(sep, " ") + "\n    "
			width = 4
		} else {
			width += len(sep)
		}
		b.WriteString(sep + n)
		width += len(n)
	}
	return b.String()
}
