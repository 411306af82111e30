package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/version"
)

func newVersionCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(s.Out, "janitor %s (commit %s, built %s)\n", version.Version, version.Commit, version.Date)
			return err
		},
	}
}
