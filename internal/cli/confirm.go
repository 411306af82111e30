package cli

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// confirmer returns the prompt reap uses before deleting, or nil with
// --yes. Without a terminal and without --yes, deleting is refused up front
// (exit 2) before anything is written.
func confirmer(s Streams, yes, dryRun bool, command string) (func(int) (bool, error), error) {
	if yes || dryRun {
		return nil, nil
	}
	if !term.IsTerminal(s.In) {
		return nil, exitcode.New(exitcode.Usage, fmt.Errorf("%s deletes claims: without a terminal to confirm on, pass --yes (or --dry-run); nothing was changed", command))
	}
	return func(n int) (bool, error) {
		fmt.Fprintf(s.ErrOut, "Delete %d rescued claim(s)? Type yes to confirm: ", n)
		line, err := bufio.NewReader(s.In).ReadString('\n')
		if err != nil && line == "" {
			return false, nil
		}
		return strings.TrimSpace(strings.ToLower(line)) == "yes", nil
	}, nil
}
