package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/janitor"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/internal/transfer"
)

// The commands of issue 42 and their report actions. export and import
// take the options of guard and restore (config has no bits of their own):
// the flags they do not use are hidden and refused (hideFlags).
const (
	commandExport = "export"
	commandImport = "import"

	actionExported     = "exported"
	actionWouldExport  = "would-export"
	actionExportFailed = "export-failed"
)

// snapshotGroup is the API group of snapshots and contents.
const snapshotGroup = transfer.SnapshotGroup

// exportUnused are guard's options that export does not take.
var exportUnused = []string{"rescue", "min-claims", "allow-delete-policy", "superseded", "snapshot-class", "snapshot-timeout",
	"snapshot-error-grace", "snapshot-attempts", "snapshot-retry-backoff", "delete-contents", "all-contexts", "cluster-concurrency", "all-claims", "price", "snapshot-price", "concurrency"}

func newExportCommand(s Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   commandExport + " FILE",
		Short: "Write the copies holding each workspace's newest data to a bundle, their contents Retain",
		Long: `export writes, to FILE, a bundle (docs/spec.md#export-and-import) of the
copies that hold the newest data of every workspace in scope:

  - per claim that is gone, its only copy (as guard lists it);
  - per Rescued claim, its rescue.

Each copy's VolumeSnapshotContent is set to Retain first, so that a teardown
keeps the storage snapshot. It never deletes anything, and never changes a
content other than to Retain. janitor import FILE recreates the copies in
another cluster.

  - Without patch on volumesnapshotcontents: exit 2, and nothing is written
    (no content, no file).
  - A copy that is not intact cannot be exported: exit 4, the others are.
  - --dry-run writes nothing and lists what it would export.`,
		Example: `  janitor export bundle.yaml -A -l app=ide --workspace-label workspace-id
  janitor guard --export bundle.yaml -A -l app=ide --workspace-label workspace-id`,
		Args: oneFile,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := refuseHidden(cmd, commandExport); err != nil {
				return err
			}
			return command(cmd, s, config.CommandGuard, oneCluster, func(sess *session) error {
				sess.name = commandExport
				return sess.export(args[0])
			})
		},
	}
	return hideFlags(withFlags(cmd, config.CommandGuard), exportUnused)
}

// withGuardExport gives guard --export FILE: the gate exports every copy
// at risk first, and passes only when each is exported with a Retain
// content (docs/spec.md#guard-export).
func withGuardExport(cmd *cobra.Command, s Streams) *cobra.Command {
	const usage = "export the copies that hold each workspace's newest data to FILE first (as janitor export), and pass only\nwhen every copy at risk is exported with a Retain content"
	cmd.Flags().String("export", "", usage)
	cmd.Annotations[flagSections] += "\n\nExport flags:\n" + strings.TrimRight(flagUsage(cmd.Flags().Lookup("export")), " \n")
	guard := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		file, _ := c.Flags().GetString("export")
		if file == "" {
			return guard(c, args)
		}
		if err := checkFile(file); err != nil {
			return err
		}
		return command(c, s, config.CommandGuard, oneCluster, func(sess *session) error { return sess.guardExport(file) })
	}
	return cmd
}

// export runs janitor export: guard's judging scan, then the copies.
func (sess *session) export(file string) error {
	cfg := sess.cfg
	if err := sess.mayExport(); err != nil {
		return err
	}
	if err := sess.lock(!cfg.DryRun, nil); err != nil {
		return err
	}
	res, err := janitor.Guard(sess.ctx, sess.clients, janitor.GuardOptions{Scan: sess.readOnlyScanOptions()})
	if err != nil {
		return sess.failed(err)
	}
	exp, err := sess.exportCopies(res, file)
	if err != nil {
		return err
	}
	r := sess.newReport(commandExport, cfg.DryRun)
	r.UnusedCondition, r.ServerVersion = res.Scan.UnusedCondition, res.Scan.ServerVersion
	r.Snapshots = exp.entries
	addWorkspaceNotes(r, exp.entries)
	if !cfg.DryRun {
		r.AddNote(fmt.Sprintf("bundle %s: %d copies of %d workspaces", file, len(exp.copies), workspaces(exp.entries, actionExported)))
	}
	return sess.finishNamed(r, failuresError("exports", exp.failures), exportedNames(exp.entries))
}

// guardExport runs guard --export: the gate (with --rescue, after the
// rescue), the export of its copies, and the verdict of a read of its own.
func (sess *session) guardExport(file string) error {
	cfg := sess.cfg
	var validate func(context.Context, *kube.Clients) error
	if cfg.Rescue {
		validate = sess.rescueOptions(nil).Validate
	}
	if err := sess.mayExport(); err != nil {
		return err
	}
	if err := sess.lock(!cfg.DryRun, validate); err != nil {
		return err
	}
	o := janitor.GuardOptions{Scan: sess.readOnlyScanOptions(), AllowDeletePolicy: cfg.AllowDeletePolicy, MinClaims: cfg.MinClaims}
	if cfg.Rescue {
		so := sess.rescueOptions(newProgress(sess.s.ErrOut, zerolog.Ctx(sess.ctx)))
		o.Rescue = &so
	}
	first, err := janitor.Guard(sess.ctx, sess.clients, o)
	if err != nil {
		var re *janitor.RescueError
		if errors.As(err, &re) {
			return exitError(re.Err)
		}
		return sess.failed(err)
	}
	exp, err := sess.exportCopies(first, file)
	if err != nil {
		return err
	}
	// The verdict on what the cluster holds now: the contents exported
	// are Retain.
	o.Rescue = nil
	res := first
	if !cfg.DryRun {
		if res, err = janitor.Guard(sess.ctx, sess.clients, o); err != nil {
			return sess.failed(err)
		}
	}
	var rescued *report.Report
	if first.Rescue != nil {
		rescued = sess.newReport(config.CommandSnapshot, cfg.DryRun)
		_ = addRescue(rescued, first.Rescue) // failed rescues are judged, as SnapshotFailed claims
	}
	// Not a dry run: the export set contents to Retain and wrote the
	// bundle (as guard --rescue's report is not one either).
	r := sess.newReport(config.CommandGuard, cfg.DryRun)
	gate := addGuard(r, res, rescued)
	mergeExported(r, exp.entries)
	addWorkspaceNotes(r, exp.entries)
	var problems []string
	if gate != nil {
		problems = append(problems, gate.Error())
	}
	if n := len(exp.failures); n > 0 {
		problems = append(problems, fmt.Sprintf("%d copies at risk could not be exported", n))
	}
	if !cfg.DryRun {
		r.AddNote(fmt.Sprintf("bundle %s: %d copies of %d workspaces", file, len(exp.copies), workspaces(exp.entries, actionExported)))
	}
	if len(problems) > 0 {
		return sess.finish(r, exitcode.New(exitcode.DataAtRisk, errors.New(strings.Join(problems, "; "))))
	}
	return sess.finish(r, nil)
}

// mayExport checks, before anything is read or written, that this user
// may patch contents (to set them to Retain): without it, exit 2. A dry
// run needs no write permission.
func (sess *session) mayExport() error {
	if sess.cfg.DryRun {
		return nil
	}
	return sess.mayI(sess.ctx, "patch", "volumesnapshotcontents", "", "to set each copy's content to Retain")
}

// exported is what an export did: the bundle's copies, a report entry per
// copy considered, and the copies it could not export.
type exported struct {
	copies   []bundle.Copy
	entries  []*report.SnapshotEntry
	failures []error
}

// exportCopies exports the copies res holds (bundle.Select): it sets each
// copy's content to Retain, reads it back and writes the bundle to file. A
// dry run writes nothing.
func (sess *session) exportCopies(res *janitor.GuardResult, file string) (*exported, error) {
	ctx, c, dry := sess.ctx, sess.clients, sess.cfg.DryRun
	inv := res.Scan.Inventory
	only := make([]*inventory.Snapshot, 0, len(res.OnlyCopies))
	for _, sr := range res.OnlyCopies {
		only = append(only, sr.Snapshot)
	}
	cands := bundle.Select(res.Scan.Decisions, only)
	out := &exported{}
	log := zerolog.Ctx(ctx)
	for i := range cands {
		cand := &cands[i]
		s := cand.Snapshot
		e := snapshotEntry(s, inv.Contents[s.ContentName].DeletionPolicy)
		e.RestoreSize = s.RestoreSize
		e.Reason = cand.Why()
		out.entries = append(out.entries, e)
		fail := func(err error) {
			e.Action = actionExportFailed
			e.Reason = err.Error() + "; " + e.Reason
			out.failures = append(out.failures, fmt.Errorf("%s/%s: %w", s.Namespace, s.Name, err))
		}
		if ok, why := classify.Intact(s, inv.Contents); !ok {
			fail(errors.New("not intact: " + why))
			continue
		}
		if dry {
			e.Action = actionWouldExport
			if e.DeletionPolicy != string(snapv1.VolumeSnapshotContentRetain) {
				e.Reason += "; its content " + s.ContentName + " would be set to Retain"
			}
			continue
		}
		cp, err := transfer.Export(ctx, c, s, inv.Contents[s.ContentName].DeletionPolicy)
		if err != nil {
			fail(err)
			continue
		}
		log.Info().Str("namespace", s.Namespace).Str("snapshot", s.Name).Str("content", s.ContentName).Msg("exported")
		e.Action, e.DeletionPolicy, e.RestoreSize = actionExported, string(snapv1.VolumeSnapshotContentRetain), cp.RestoreSize
		e.Reason += "; content " + s.ContentName + " Retain, handle " + cp.SnapshotHandle
		out.copies = append(out.copies, cp)
	}
	if dry {
		return out, nil
	}
	b, err := bundle.New(bundle.Source{Cluster: c.Cluster, WorkspaceLabel: sess.cfg.WorkspaceLabel}, c.Clock.Latest(), out.copies)
	if err != nil {
		return nil, err
	}
	data, err := bundle.Encode(b)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(file, data); err != nil {
		return nil, fmt.Errorf("write bundle: %w", err)
	}
	return out, nil
}

// mergeExported marks guard's snapshot entries that were exported, and adds
// the exported copies guard does not list (rescues of Rescued claims).
func mergeExported(r *report.Report, entries []*report.SnapshotEntry) {
	byKey := map[inventory.Key]*report.SnapshotEntry{}
	for _, e := range r.Snapshots {
		byKey[inventory.Key{Namespace: e.Namespace, Name: e.Name}] = e
	}
	for _, e := range entries {
		g, ok := byKey[inventory.Key{Namespace: e.Namespace, Name: e.Name}]
		if !ok {
			r.Snapshots = append(r.Snapshots, e)
			continue
		}
		if e.Action == actionExportFailed || g.Action == "" {
			g.Action, g.Reason, g.DeletionPolicy = e.Action, e.Reason, e.DeletionPolicy
		}
	}
}

// addWorkspaceNotes says per workspace what happened to its copies:
// "workspace ns/a: 1 exported".
func addWorkspaceNotes(r *report.Report, entries []*report.SnapshotEntry) {
	counts := map[string]map[string]int{}
	for _, e := range entries {
		k := workspaceOf(e)
		if counts[k] == nil {
			counts[k] = map[string]int{}
		}
		counts[k][e.Action]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		actions := make([]string, 0, len(counts[k]))
		for a, n := range counts[k] {
			actions = append(actions, fmt.Sprintf("%d %s", n, a))
		}
		sort.Strings(actions)
		r.AddNote("workspace " + k + ": " + strings.Join(actions, ", "))
	}
}

// workspaces counts the workspaces of the entries with action.
func workspaces(entries []*report.SnapshotEntry, action string) int {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Action == action {
			seen[workspaceOf(e)] = true
		}
	}
	return len(seen)
}

// workspaceOf names an entry's workspace: namespace/workspace, or
// namespace/claim for a copy without one (its claim's own workspace).
func workspaceOf(e *report.SnapshotEntry) string {
	w := e.Workspace
	if w == "" {
		w = e.SourceClaim
	}
	return e.Namespace + "/" + w
}

// exportedNames are what export -o name prints: the snapshots exported
// (or, in a dry run, to be).
func exportedNames(entries []*report.SnapshotEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Action == actionExported || e.Action == actionWouldExport {
			out = append(out, "volumesnapshot."+snapshotGroup+"/"+e.Name)
		}
	}
	return out
}

// finishNamed is finish, with -o name printing names (the report package
// names only its own commands' objects).
func (sess *session) finishNamed(r *report.Report, err error, names []string) error {
	if sess.cfg.Output != kubeout.KindName || sess.fleet != nil {
		return sess.finish(r, err)
	}
	out := sess.s.Out
	sess.s.Out = io.Discard
	err = sess.finish(r, err)
	sess.s.Out = out
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
	return err
}

// mayI asks the API server whether this user may verb resource (of the
// snapshot group) in namespace ns ("" for all or cluster-scoped).
// Denied, it is exit 2 naming the permission and why it is needed.
func (sess *session) mayI(ctx context.Context, verb, resource, ns, why string) error {
	ok, err := transfer.MayI(ctx, sess.clients, verb, resource, ns)
	if err != nil || ok {
		return err
	}
	where := "cluster-wide"
	if ns != "" {
		where = "in namespace " + ns
	}
	return exitcode.New(exitcode.Usage, fmt.Errorf("%s needs %s on %s.%s %s %s: not allowed, nothing was written",
		sess.name, verb, resource, snapshotGroup, where, why))
}

// writeAtomic writes data to path through a temporary file in its folder
// and a rename: a reader never sees half a bundle. The file is 0600.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// oneFile takes the bundle's path, the one argument.
func oneFile(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return exitcode.New(exitcode.Usage, fmt.Errorf("%s takes one argument, the bundle's FILE, got %d", cmd.Name(), len(args)))
	}
	return checkFile(args[0])
}

// checkFile refuses "" and "-": stdout is the report.
func checkFile(file string) error {
	if file == "" || file == "-" {
		return exitcode.New(exitcode.Usage, fmt.Errorf("the bundle's FILE must be a path, got %q (stdout is the report)", file))
	}
	return nil
}

// oneCluster refuses several contexts: a bundle is of one cluster.
func oneCluster(cfg *config.Config) error {
	if cfg.Fleet() {
		return exitcode.New(exitcode.Usage, errors.New("a bundle is of one cluster: give at most one --context"))
	}
	return nil
}

// hideFlags hides the flags of the borrowed command's options that cmd does
// not use, and lists the others in --help (groupFlags).
func hideFlags(cmd *cobra.Command, names []string) *cobra.Command {
	for _, n := range names {
		if cmd.Flags().Lookup(n) != nil {
			_ = cmd.Flags().MarkHidden(n)
		}
	}
	return groupFlags(cmd)
}

// refuseHidden makes a hidden flag given on the command line a usage error.
func refuseHidden(cmd *cobra.Command, name string) error {
	var bad string
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Hidden && bad == "" {
			bad = f.Name
		}
	})
	if bad != "" {
		return exitcode.New(exitcode.Usage, fmt.Errorf("--%s is not valid for %s", bad, name))
	}
	return nil
}

// flagUsage is one flag's line of --help.
func flagUsage(f *pflag.Flag) string {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.AddFlag(f)
	return fs.FlagUsages()
}
