package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// confirmer returns the prompt a deleting command uses before deleting, or
// nil with --yes or --dry-run (cfg). Without a terminal and without --yes,
// deleting is refused up front (exit 2) before anything is written.
func confirmer(s Streams, cfg *config.Config, command string) (func(int) (bool, error), error) {
	if cfg.Yes || cfg.DryRun {
		return nil, nil
	}
	if !term.IsTerminal(s.In) {
		return nil, exitcode.New(exitcode.Usage, fmt.Errorf("%s deletes %s: without a terminal to confirm on, pass --yes (or --dry-run); nothing was changed", command, what(command)))
	}
	return func(n int) (bool, error) {
		fmt.Fprintf(s.ErrOut, "Delete %d %s? Type yes to confirm: ", n, prompt(command))
		line, err := bufio.NewReader(s.In).ReadString('\n')
		if err != nil && line == "" {
			return false, nil
		}
		return strings.TrimSpace(strings.ToLower(line)) == "yes", nil
	}, nil
}

// what a deleting command deletes, for its messages.
func what(command string) string {
	if command == config.CommandPrune {
		return "rescues"
	}
	return "claims"
}

func prompt(command string) string {
	if command == config.CommandPrune {
		return "rescue(s) of the janitor's"
	}
	return "rescued claim(s)"
}
