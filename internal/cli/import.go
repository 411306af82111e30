package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/transfer"
)

// Actions of an import's report entries.
const (
	actionImported        = "imported"
	actionWouldImport     = "would-import"
	actionAlreadyImported = "already-imported"
	actionImportFailed    = "import-failed"
)

// importUnused are restore's options that import does not take.
var importUnused = []string{"workspace", "from", "as", "allow-older", "storage-class", "size", "restore-timeout",
	"min-age", "grace-period", "owner-label", "notice-period", "max-snooze", "clock-skew", "trust-existing-snapshots",
	"sessions-carry-data"}

func newImportCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   commandImport + " FILE",
		Short: "Recreate a bundle's copies as the janitor's rescues, for restore",
		Long: `import reads a bundle written by janitor export
(docs/spec.md#export-and-import) and creates, per copy:

  - a pre-provisioned VolumeSnapshotContent of its storage snapshot
    (deletionPolicy Retain);
  - the VolumeSnapshot bound to it, labelled as the janitor's rescue with
    its workspace and data time.

janitor restore --workspace W then restores from it as in the old cluster.
Each copy goes to its own namespace, or all to -n NAMESPACE.

It never deletes or changes an object that is there, and a second import
changes nothing. It waits --api-timeout for the snapshots to be ready:
one not ready by then exits 4 (this storage may not hold it).

  - A bundle of another version, or one whose checksum does not match
    (edited by hand), is refused: exit 2, nothing written.
  - A copy is refused, with exit 4 and the reason (the others are imported),
    when the cluster has no CSIDriver of its driver, its storage snapshot is
    bound to another snapshot here, or its name is taken.`,
		Example: `  janitor import bundle.yaml --workspace-label workspace-id
  janitor import bundle.yaml -n workspaces-new --dry-run
  janitor restore -n workspaces-new --workspace abc --workspace-label workspace-id`,
		Args: oneFile,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseHidden(cmd, commandImport); err != nil {
				return err
			}
			return command(cmd, s, config.CommandRestore, oneCluster, func(sess *session) error {
				sess.name = commandImport
				return sess.importBundle(args[0])
			})
		},
	}
	return hideFlags(withFlags(cmd, config.CommandRestore), importUnused)
}

// importBundle runs janitor import: read and verify the bundle, check the
// permissions, read the cluster, plan, create, wait, report.
func (sess *session) importBundle(file string) error {
	cfg, ctx, c := sess.cfg, sess.ctx, sess.clients
	data, err := os.ReadFile(file)
	if err != nil {
		return exitcode.New(exitcode.Usage, fmt.Errorf("read bundle: %w", err))
	}
	b, err := bundle.Decode(data)
	if err != nil {
		return exitcode.New(exitcode.Usage, fmt.Errorf("import refused: %w", err))
	}
	o := bundle.Options{WorkspaceLabel: cfg.WorkspaceLabel}
	switch {
	case cfg.AllNamespaces:
		return exitcode.New(exitcode.Usage, errors.New("import goes to each copy's namespace, or to the one -n names: -A is not allowed"))
	case len(cfg.Namespaces) > 1:
		return exitcode.New(exitcode.Usage, fmt.Errorf("import goes to one namespace at most, got %d", len(cfg.Namespaces)))
	case len(cfg.Namespaces) == 1:
		o.Namespace = cfg.Namespaces[0]
	}
	namespaces := targetNamespaces(b, o)
	if !cfg.DryRun {
		if err := sess.mayI(ctx, "create", "volumesnapshotcontents", "", "to import each storage snapshot"); err != nil {
			return err
		}
		for _, ns := range namespaces {
			if err := sess.mayI(ctx, "create", "volumesnapshots", ns, "to import the copies"); err != nil {
				return err
			}
		}
	}
	cluster, err := transfer.ReadTarget(ctx, c, namespaces)
	if err != nil {
		return sess.failed(err)
	}
	steps := bundle.Plan(b, cluster, o)
	r := sess.newReport(commandImport, cfg.DryRun)
	var failures []error
	var created []*report.SnapshotEntry // imported now or before: their readiness is reported
	for i := range steps {
		st := &steps[i]
		e := importEntry(b, st)
		r.Snapshots = append(r.Snapshots, e)
		switch {
		case st.Refused != "":
			e.Action, e.Reason = actionImportFailed, st.Refused+"; "+e.Reason
			failures = append(failures, fmt.Errorf("%s: %s", st.Copy.Key(), st.Refused))
		case st.Unchanged():
			e.Action = actionAlreadyImported
			created = append(created, e) // its readiness is reported too
		case cfg.DryRun:
			e.Action = actionWouldImport
		default:
			if err := transfer.ImportStep(ctx, c, st); err != nil {
				e.Action, e.Reason = actionImportFailed, err.Error()+"; "+e.Reason
				failures = append(failures, fmt.Errorf("%s: %w", st.Copy.Key(), err))
				continue
			}
			zerolog.Ctx(ctx).Info().Str("namespace", st.Target.Namespace).Str("snapshot", st.Target.Name).
				Str("content", st.ContentName).Msg("imported")
			e.Action = actionImported
			created = append(created, e)
		}
	}
	failures = append(failures, waitReady(ctx, c, created, cfg.APITimeout)...)
	addWorkspaceNotes(r, r.Snapshots)
	var names []string
	for _, e := range r.Snapshots {
		if e.Action == actionImported || e.Action == actionWouldImport {
			names = append(names, "volumesnapshot."+snapshotGroup+"/"+e.Name)
		}
	}
	return sess.finishNamed(r, failuresError("imports", failures), names)
}

// targetNamespaces are the namespaces the copies go to, sorted.
func targetNamespaces(b *bundle.Bundle, o bundle.Options) []string {
	if o.Namespace != "" {
		return []string{o.Namespace}
	}
	seen := map[string]bool{}
	var out []string
	for i := range b.Copies {
		if ns := b.Copies[i].Namespace; !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

// waitReady waits (transfer.WaitReady) until the imported snapshots are
// ready to use or until timeout has passed, and records it in their
// entries. One not ready by then is an error of its own (exit 4,
// docs/spec.md#import): the storage may not hold its snapshot (another
// storage, a snapshot deleted since the export), and a pipeline must not
// take it for restorable. Its objects stay: importing again waits again.
func waitReady(ctx context.Context, c *kube.Clients, entries []*report.SnapshotEntry, timeout time.Duration) []error {
	keys := make([]inventory.Key, 0, len(entries))
	for _, e := range entries {
		keys = append(keys, inventory.Key{Namespace: e.Namespace, Name: e.Name})
	}
	ready := transfer.WaitReady(ctx, c, keys, time.Now().Add(timeout))
	var notReady []error
	for _, e := range entries {
		r, ok := ready[inventory.Key{Namespace: e.Namespace, Name: e.Name}]
		if !ok {
			why := fmt.Sprintf("not ready within --api-timeout (%s): this cluster's storage may not hold the snapshot; import again to wait again, restore refuses it until it is ready", timeout)
			e.Reason += "; " + why
			notReady = append(notReady, fmt.Errorf("%s/%s: %s", e.Namespace, e.Name, why))
			continue
		}
		e.ReadyToUse = true
		if r.RestoreSize != 0 {
			e.RestoreSize = r.RestoreSize
		}
	}
	return notReady
}

// importEntry is the report entry of a step, before its action.
func importEntry(b *bundle.Bundle, st *bundle.Step) *report.SnapshotEntry {
	cp := st.Copy
	dt := cp.DataTime
	return &report.SnapshotEntry{Namespace: st.Target.Namespace, Name: st.Target.Name, SourceClaim: cp.SourceClaim,
		SourceUID: cp.SourceUID, Workspace: cp.Workspace, DataTime: &dt,
		DeletionPolicy: string(snapv1.VolumeSnapshotContentRetain), RestoreSize: cp.RestoreSize,
		Reason: fmt.Sprintf("%s of claim %s from %s/%s, %s %s, content %s", cp.Origin, cp.SourceClaim, b.Source.Cluster,
			cp.Key(), cp.Driver, cp.SnapshotHandle, st.ContentName)}
}
