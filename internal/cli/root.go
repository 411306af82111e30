package cli

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"

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
them into CSI VolumeSnapshots without ever overwriting newer data, and deletes
them only once the rescue is provably durable.

Exit codes: 0 ok, 1 runtime error, 2 usage or configuration error, 3 guard
found data at risk, 4 partial failure or blast radius exceeded, 5 lock held
by another run, 130/143 interrupted.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	config.Register(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return exitcode.New(exitcode.Usage, err)
	})
	root.AddCommand(newScanCommand(s), newSnapshotCommand(s), newReapCommand(s), newRunCommand(s), newGuardCommand(s), newVersionCommand(s))
	// An unknown command is a usage error, not a runtime one.
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return exitcode.New(exitcode.Usage, errors.New("unknown command "+strings.Join(args, " ")+"; see janitor --help"))
		}
		return nil
	}
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
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

// noArgs rejects positional arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return exitcode.New(exitcode.Usage, errors.New(cmd.Name()+" takes no arguments, got "+strings.Join(args, " ")))
	}
	return nil
}
