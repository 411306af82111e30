// Package term holds the two facts about text that several layers need: is
// a stream an interactive terminal, and how a message is kept on one line.
package term

import (
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// IsTerminal reports whether v (a reader or a writer) is an interactive
// terminal.
func IsTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// OneLine keeps a message on one line, its runs of white space made one
// space: operators grep logs line by line, and a table cell has one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
