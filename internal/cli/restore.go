package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// Actions of a restore's report entry.
const (
	actionRestored      = "restored"
	actionWouldRestore  = "would-restore"
	actionRestoreFailed = "restore-failed"
)

func newRestoreCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   config.CommandRestore + " [NAMESPACE/CLAIM | CLAIM]",
		Short: "Recreate a claim from its rescue (by claim, by workspace, or from a named snapshot)",
		Long: `restore recreates a claim from a rescue (docs/spec.md#restore):

  - CLAIM (NAMESPACE/CLAIM, or -n NS CLAIM): from the newest intact rescue
    of that claim name.
  - --workspace W: from the rescue with the newest data of the workspace;
    with --volume-label, one claim per role, each from its role's newest
    rescue.
  - --from SNAPSHOT: from a named VolumeSnapshot of the namespace.

The new claim has the rescued claim's labels, annotations and spec (from the
template every rescue records), a dataSourceRef to the snapshot and
pvc-janitor.io/restored-from. It never carries a mark of the janitor, and
restore never overwrites or deletes a claim.

Refused, with exit 2 and nothing written, when:
  - a claim of that name exists (restore under another name with --as);
  - the snapshot is not intact;
  - a claim of the workspace is in use or holds newer data, or another
    rescue of it is newer (--allow-older restores anyway).

It waits --restore-timeout for the claim to be Bound: exit 4 if it is not.

  --dry-run  prints what it would create, and creates nothing.
  -o yaml    prints only the claim's manifest (for GitOps), creates nothing.`,
		Example: `  # Bring a reaped claim back from its rescue, under its own name
  janitor restore workspaces/ws-abc

  # The newest copy of a workspace, whatever its claim was called
  janitor restore -n workspaces --workspace abc --workspace-label workspace

  # Every claim of the workspace (home and data), each under its role's label
  janitor restore -n workspaces --workspace abc --workspace-label workspace --volume-label volume

  # An older snapshot, under another name (never over newer data)
  janitor restore -n workspaces --from ws-abc-rescue-1a2b3c4d5e --as ws-abc-old --allow-older

  # Only the claim's manifest, creating nothing
  janitor restore workspaces/ws-abc -o yaml > ws-abc.yaml`,
		Args: atMostOneClaim,
		RunE: func(cmd *cobra.Command, args []string) error {
			return command(cmd, s, config.CommandRestore, oneNamespace(cmd, s), func(sess *session) error {
				req, err := sess.restoreRequest(args)
				if err != nil {
					return err
				}
				return sess.restore(req)
			})
		},
	}
	return withFlags(cmd, config.CommandRestore)
}

// oneNamespace refuses all-namespaces from the environment or the config
// file before anything is read, naming where it came from (-n overrides
// it: config.Load); -A on the command line is refused by restoreRequest.
func oneNamespace(cmd *cobra.Command, s Streams) func(*config.Config) error {
	return func(cfg *config.Config) error {
		if !cfg.AllNamespaces {
			return nil
		}
		if from := config.Origin(cmd.Flags(), s.LookupEnv, cfg, "all-namespaces"); from != "" {
			return exitcode.New(exitcode.Usage, fmt.Errorf("restore works in one namespace: all-namespaces%s is not allowed; -n NAMESPACE overrides it", from))
		}
		return nil
	}
}

// restoreRequest reads what to restore from the argument and the flags.
func (sess *session) restoreRequest(args []string) (restore.Request, error) {
	cfg := sess.cfg
	usage := func(format string, a ...any) (restore.Request, error) {
		return restore.Request{}, exitcode.New(exitcode.Usage, fmt.Errorf(format, a...))
	}
	req := restore.Request{Workspace: cfg.RestoreWorkspace, From: cfg.RestoreFrom, As: cfg.RestoreAs,
		AllowOlder: cfg.AllowOlder, StorageClass: cfg.StorageClass, Size: cfg.Size, WorkspaceLabel: cfg.WorkspaceLabel,
		VolumeLabel: cfg.VolumeLabel}
	ns := ""
	switch {
	case cfg.AllNamespaces:
		return usage("restore works in one namespace: -A is not allowed")
	case len(sess.scope.Namespaces) > 1:
		return usage("restore works in one namespace, got %s", strings.Join(sess.scope.Namespaces, ", "))
	case len(sess.scope.Namespaces) == 1:
		ns = sess.scope.Namespaces[0]
	}
	if len(args) == 1 {
		arg := args[0]
		if n, c, ok := strings.Cut(arg, "/"); ok {
			if len(cfg.Namespaces) > 0 && n != ns {
				return usage("%s names namespace %s, but -n says %s", arg, n, ns)
			}
			ns, arg = n, c
		}
		if arg == "" || ns == "" {
			return usage("restore %q: want NAMESPACE/CLAIM or -n NAMESPACE CLAIM", args[0])
		}
		req.Claim = arg
	}
	req.Namespace = ns
	given := 0
	for _, v := range []string{req.Claim, req.Workspace, req.From} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return usage("restore needs exactly one of a claim (NAMESPACE/CLAIM), --workspace or --from")
	}
	return req, nil
}

// restoreOptions are restore's options: the policy every command
// classifies by (session.policy, the notice and the snooze included).
func (sess *session) restoreOptions() restore.Options {
	cfg := sess.cfg
	return restore.Options{Policy: sess.policy(), DryRun: cfg.DryRun, Manifest: cfg.Output == config.OutputYAML,
		Timeout: cfg.RestoreTimeout, PageSize: cfg.PageSize}
}

// restore runs the restore and reports it: the manifests alone under -o
// yaml, else one report entry per claim (one per role with --workspace
// and --volume-label, docs/spec.md#restore-roles).
func (sess *session) restore(req restore.Request) error {
	cfg := sess.cfg
	manifest := cfg.Output == config.OutputYAML
	outs, err := restore.DoAll(sess.ctx, sess.clients, req, sess.restoreOptions())
	var refusal *restore.Refusal
	var readErr *kube.ReadError
	created := false
	for _, out := range outs {
		created = created || out.Created
	}
	switch {
	case errors.As(err, &refusal) && !created:
		return exitcode.New(exitcode.Usage, fmt.Errorf("restore refused: %s", refusal.Reason))
	case errors.As(err, &readErr) || len(outs) == 0 || err != nil && !created:
		return sess.failed(err)
	}
	if manifest && err == nil {
		for i, out := range outs {
			if i > 0 {
				if _, err := sess.s.Out.Write([]byte("---\n")); err != nil {
					return err
				}
			}
			if err := writeManifest(sess, out); err != nil {
				return err
			}
		}
		return nil
	}
	r := sess.newReport(config.CommandRestore, cfg.DryRun)
	for i, out := range outs {
		var e error
		if i == len(outs)-1 {
			e = err // the claim whose creation or wait failed
		}
		addRestore(r, req, out, e)
	}
	var perr *restore.ProvisionError
	if errors.As(err, &perr) || err != nil && created {
		// A claim did not bind, or one role's claim was created and
		// another's was not: exit 4, each entry says which.
		err = exitcode.New(exitcode.Partial, err)
	}
	return sess.finish(r, err)
}

// writeManifest prints the claim alone, as kubectl apply takes it.
func writeManifest(sess *session, out *restore.Outcome) error {
	b, err := json.Marshal(out.Plan.Claim)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	y, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	_, err = sess.s.Out.Write(y)
	return err
}

// addRestore records the restore as the report's one entry.
func addRestore(r *report.Report, req restore.Request, out *restore.Outcome, err error) {
	p := out.Plan
	e := &report.ClaimEntry{Namespace: req.Namespace, Name: p.Claim.Name, Workspace: p.Snapshot.Workspace,
		Snapshot: &report.SnapshotRef{Name: p.Snapshot.Name, ReadyToUse: p.Snapshot.ReadyToUse}}
	reasons := []string{fmt.Sprintf("from snapshot %s (data time %s)", p.Snapshot.Name, p.DataTime.UTC().Format("2006-01-02T15:04:05Z"))}
	switch {
	case err != nil:
		e.Action = actionRestoreFailed
		reasons = append(reasons, err.Error())
	case out.Created:
		e.Action = actionRestored
		reasons = append(reasons, out.Message)
	default:
		e.Action = actionWouldRestore
	}
	e.Reason = strings.Join(append(reasons, p.Notes...), "; ")
	r.Claims = append(r.Claims, e)
}
