package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
)

// NewCommand builds a fresh command tree (no package-level state), so that
// every test gets its own.
func NewCommand(s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "janitor",
		Short: "Find, rescue and reap orphaned workspace PersistentVolumeClaims",
		Long: `janitor finds workspace PersistentVolumeClaims that nothing uses, rescues
them into CSI VolumeSnapshots and deletes them only once the rescue is
provably durable.

It never overwrites newer data, never deletes a claim in use or without an
intact rescue, and never writes a label or annotation outside
pvc-janitor.io/.

Start read-only (scan --dry-run, explain), then preview (run --marks-only),
then act (run --yes).

Exit codes:
  0        ok
  1        runtime error (a read failed, the server is unreachable, the Lease
           was lost)
  2        usage or configuration error; nothing was changed
  3        guard: data in scope would be lost
  4        partial failure, or the blast radius was exceeded
  5        the Lease is held by another run
  130/143  interrupted (SIGINT/SIGTERM)`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	config.RegisterGlobal(root.PersistentFlags())
	root.SetFlagErrorFunc(flagError)
	root.SetUsageFunc(usage)
	root.AddCommand(newScanCommand(s), newSnapshotCommand(s), newReapCommand(s), newRunCommand(s), withGuardExport(newGuardCommand(s), s),
		newRestoreCommand(s), newPruneCommand(s), newExplainCommand(s), newVersionCommand(s))
	root.AddCommand(newExportCommand(s), newImportCommand(s))
	// An unknown command is a usage error, not a runtime one.
	root.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(cmd, args)
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	root.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only in its own check
	strictHelpAndCompletion(root)
	return root
}

// strictHelpAndCompletion makes cobra's help and completion commands exit 2
// on what they cannot do (`help nonexistent`, `completion tcsh`), where
// cobra prints a line or the usage and exits 0.
func strictHelpAndCompletion(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Run = nil
			c.RunE = func(c *cobra.Command, args []string) error {
				cmd, rest, err := root.Find(args)
				if err != nil || cmd == nil || len(rest) > 0 || (len(args) > 0 && cmd == root) {
					return unknownCommand(root, args)
				}
				cmd.InitDefaultHelpFlag()
				cmd.InitDefaultVersionFlag()
				return cmd.Help()
			}
		case "completion":
			shells := []string{}
			for _, sh := range c.Commands() {
				shells = append(shells, sh.Name())
			}
			c.Args = func(_ *cobra.Command, args []string) error {
				if len(args) > 0 {
					return exitcode.New(exitcode.Usage, fmt.Errorf("completion: unknown shell %q: want one of %s", args[0], strings.Join(shells, ", ")))
				}
				return nil
			}
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	}
}

// flagError makes every flag error a usage error (exit 2). A flag that
// another command takes says which: `--rescue is only valid for guard`.
func flagError(cmd *cobra.Command, err error) error {
	if !cmd.HasParent() && cmd.Flags().NArg() > 0 {
		// `janitor frobnicate --flag`: the command is what is wrong.
		return unknownCommand(cmd, cmd.Flags().Args())
	}
	msg := err.Error()
	name := ""
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: '"):
		name = config.LongName(msg[len("unknown shorthand flag: '") : len("unknown shorthand flag: '")+1])
	}
	if only := config.OnlyFor(name); name != "" && only != "" {
		return exitcode.New(exitcode.Usage, fmt.Errorf("--%s is only valid for %s", name, only))
	}
	return exitcode.New(exitcode.Usage, err)
}

// unknownCommand is the usage error of a command root does not have, with
// cobra's suggestions (a name within two edits, or one it starts).
func unknownCommand(root *cobra.Command, args []string) error {
	msg := "unknown command " + strings.Join(args, " ")
	if len(args) > 0 {
		if s := root.Root().SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
	}
	return exitcode.New(exitcode.Usage, errors.New(msg+"; see janitor --help"))
}

// usage writes a command's usage as cobra's default template does, with
// the command's own flags in sections (see withFlags) and the inherited ones
// under "Global flags" after them, as kubectl lists a command's options and
// then points to its global ones. It is Go, not a text/template: a template
// that calls methods makes the linker keep every exported method of every
// type in the binary (reflect's MethodByName), which cost 20 MB of binary
// and 9 MiB of a scan's resident memory.
func usage(c *cobra.Command) error {
	var b strings.Builder
	b.WriteString("Usage:")
	if c.Runnable() {
		b.WriteString("\n  " + c.UseLine())
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\n  " + c.CommandPath() + " [command]")
	}
	if len(c.Aliases) > 0 {
		b.WriteString("\n\nAliases:\n  " + c.NameAndAliases())
	}
	if c.HasExample() {
		b.WriteString("\n\nExamples:\n" + c.Example)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\n\nCommands:")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(&b, "\n  %-*s %s", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.HasAvailableLocalFlags() {
		if sections, ok := c.Annotations[flagSections]; ok && sections != "" {
			b.WriteString(sections)
		} else {
			b.WriteString("\n\nFlags:\n" + strings.TrimRightFunc(c.LocalFlags().FlagUsages(), unicode.IsSpace))
		}
	}
	if c.HasAvailableInheritedFlags() {
		b.WriteString("\n\nGlobal flags (every command takes them):\n" + strings.TrimRightFunc(c.InheritedFlags().FlagUsages(), unicode.IsSpace))
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\n\nUse \"" + c.CommandPath() + " [command] --help\" for more information about a command.")
	}
	b.WriteString("\n")
	_, err := io.WriteString(c.OutOrStderr(), b.String())
	return err
}

// flagSections is the annotation that holds a command's own flags as
// --help lists them, in sections.
const flagSections = "flag-sections"

// withFlags registers the flags of command name's own options on cmd (only
// those it uses: any other is a usage error) and lists them in --help by
// section (classification, acting, rescue, …).
func withFlags(cmd *cobra.Command, name string) *cobra.Command {
	config.RegisterCommand(cmd.Flags(), name)
	cmd.InitDefaultHelpFlag()
	return groupFlags(cmd)
}

// groupFlags records cmd's visible flags for --help, one section per
// configuration group (hidden flags are left out).
func groupFlags(cmd *cobra.Command) *cobra.Command {
	const other = "Other flags"
	sections := map[string]*pflag.FlagSet{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		g := other
		if v := f.Annotations[config.FlagGroupAnnotation]; len(v) > 0 {
			g = v[0]
		}
		if sections[g] == nil {
			sections[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
		}
		sections[g].AddFlag(f)
	})
	var b strings.Builder
	for _, g := range append(config.FlagGroups(), other) {
		if fs := sections[g]; fs != nil {
			fmt.Fprintf(&b, "\n\n%s:\n%s", g, strings.TrimRight(fs.FlagUsages(), " \n"))
		}
	}
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[flagSections] = b.String()
	return cmd
}

// load resolves the configuration of a command, mapping every error to the
// usage exit code.
func load(cmd *cobra.Command, name string, s Streams) (*config.Config, error) {
	cfg, err := config.Load(cmd.Flags(), name, s.LookupEnv)
	if err != nil {
		return nil, exitcode.New(exitcode.Usage, err)
	}
	return cfg, nil
}

// oneClaim and atMostOneClaim take a claim argument, NAMESPACE/CLAIM or
// CLAIM with -n (explain; restore, which may name its copy by flags
// instead): any other count is a usage error.
func oneClaim(cmd *cobra.Command, args []string) error { return claimArgs(cmd, args, 1, 1) }

func atMostOneClaim(cmd *cobra.Command, args []string) error { return claimArgs(cmd, args, 0, 1) }

func claimArgs(cmd *cobra.Command, args []string, lo, hi int) error {
	switch {
	case len(args) < lo:
		return exitcode.New(exitcode.Usage, errors.New(cmd.Name()+" needs a claim: NAMESPACE/CLAIM, or CLAIM with -n"))
	case len(args) > hi:
		n := "one claim"
		if lo == 0 {
			n = "at most one claim"
		}
		return exitcode.New(exitcode.Usage, fmt.Errorf("%s takes %s (NAMESPACE/CLAIM, or CLAIM with -n), got %d arguments: %s",
			cmd.Name(), n, len(args), strings.Join(args, " ")))
	}
	for _, arg := range args {
		if err := claimArg(arg); err != nil {
			return exitcode.New(exitcode.Usage, fmt.Errorf("%s %s: %w", cmd.Name(), arg, err))
		}
	}
	return nil
}

// claimArg checks a claim argument's form before anything is sent: one
// slash at most, a namespace name before it and a claim name after, as the
// API server would check them (kubectl too refuses a/b/c at once).
func claimArg(arg string) error {
	ns, name, cut := strings.Cut(arg, "/")
	if !cut {
		ns, name = "", arg
	}
	if strings.Contains(name, "/") {
		return errors.New("want NAMESPACE/CLAIM or CLAIM, not more than one /")
	}
	if cut {
		if errs := content.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("invalid namespace %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	if errs := content.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("invalid claim name %q: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// noArgs rejects positional arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return exitcode.New(exitcode.Usage, errors.New(cmd.Name()+" takes no arguments, got "+strings.Join(args, " ")))
	}
	return nil
}
