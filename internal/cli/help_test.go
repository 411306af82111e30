package cli_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestHelpExamples (issue 39 item 13): every example of the pipeline
// commands says what it does in a comment line before it, run shows a dry
// run, and every example command line is one the janitor accepts: its
// flags parse and its configuration loads (no cluster needed), so the
// examples cannot drift from the flags.
func TestHelpExamples(t *testing.T) {
	root := cli.NewCommand(cli.Streams{})
	for _, name := range []string{config.CommandScan, config.CommandSnapshot, config.CommandReap, config.CommandRun,
		config.CommandGuard, config.CommandRestore, config.CommandPrune, config.CommandExplain} {
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd.Name() != name {
			t.Fatalf("no command %s: %v", name, err)
		}
		lines := strings.Split(cmd.Example, "\n")
		commented, examples := false, 0
		for _, line := range lines {
			line = strings.TrimSpace(line)
			switch {
			case line == "":
				commented = false
			case strings.HasPrefix(line, "#"):
				commented = true
			default:
				examples++
				if !commented {
					t.Errorf("%s: example %q has no comment line before it", name, line)
				}
				checkExample(t, line)
			}
		}
		if examples == 0 {
			t.Errorf("%s has no example", name)
		}
		if name == config.CommandRun && !strings.Contains(cmd.Example, "--dry-run") {
			t.Errorf("run has no --dry-run example:\n%s", cmd.Example)
		}
	}
}

// checkExample loads the configuration of one example line, as the command
// would before connecting: janitor or kubectl janitor, then the command and
// its flags; a pipe, || or redirection ends it.
func checkExample(t *testing.T, line string) {
	t.Helper()
	words := strings.Fields(line)
	if len(words) > 1 && words[0] == "kubectl" {
		words = words[1:]
	}
	if len(words) < 2 || words[0] != "janitor" {
		t.Errorf("example %q does not run janitor", line)
		return
	}
	var args []string
	for _, w := range words[1:] {
		if w == "|" || w == "||" || w == ">" {
			break
		}
		args = append(args, w)
	}
	root := cli.NewCommand(cli.Streams{})
	cmd, rest, err := root.Find(args)
	if err != nil {
		t.Errorf("example %q: %v", line, err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("example %q: %v", line, err)
		return
	}
	if _, err := config.Load(cmd.Flags(), cmd.Name(), func(string) (string, bool) { return "", false }); err != nil {
		t.Errorf("example %q: %v", line, err)
	}
}

// TestUnknownCommandsAndTopics (item 13): an unknown command gets cobra's
// "did you mean", and help on an unknown topic or completion for an unknown
// shell is a usage error (exit 2), not a page of usage and exit 0.
func TestUnknownCommandsAndTopics(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"scna"}, 2, "unknown command scna; did you mean scan?"},
		{[]string{"prnue", "--dry-run"}, 2, "did you mean prune?"},
		{[]string{"help", "nonexistent"}, 2, "unknown command nonexistent"},
		{[]string{"help", "scna"}, 2, "did you mean scan?"},
		{[]string{"completion", "tcsh"}, 2, `unknown shell "tcsh": want one of bash, fish, powershell, zsh`},
		{[]string{"help", "scan"}, 0, ""},
		{[]string{"completion", "bash"}, 0, ""},
	} {
		code, out, stderr := runBare(t, tc.args)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("janitor %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
		if tc.code == 0 && out == "" {
			t.Errorf("janitor %s: no output", strings.Join(tc.args, " "))
		}
		if tc.code != 0 && strings.Count(stderr, "\n") != 1 {
			t.Errorf("janitor %s: stderr is not one line: %q", strings.Join(tc.args, " "), stderr)
		}
	}
}

// longPending are the commands whose Long is still one dense paragraph
// (issue 39 item 13; none now that restore, export and import are
// rewritten). The check below fails once one of them passes, so that the
// entry goes.
var longPending = map[string]bool{}

// TestHelpLongIsShortParagraphs (issue 39 item 13): every command's Long is
// written as kubectl's are, in short paragraphs and lists, never a wall of
// text: no paragraph longer than 4 lines (a list item, a line indented by
// two spaces, starts a paragraph of its own; deeper lines continue it), no
// line wider than 80 columns, and it says what the command never does or
// writes nothing.
func TestHelpLongIsShortParagraphs(t *testing.T) {
	root := cli.NewCommand(cli.Streams{})
	cmds := append([]*cobra.Command{root}, root.Commands()...)
	checked := 0
	for _, cmd := range cmds {
		name := cmd.Name()
		if name == "completion" || name == "help" || cmd.Long == "" {
			continue // cobra's own, or a Short alone (version)
		}
		checked++
		problems := longProblems(cmd.Long)
		if longPending[name] {
			if len(problems) == 0 {
				t.Errorf("%s's Long passes now: take it out of longPending", name)
			}
			continue
		}
		for _, p := range problems {
			t.Errorf("%s --help: %s", name, p)
		}
		if !strings.Contains(cmd.Long, "never") && !strings.Contains(cmd.Long, "nothing") {
			t.Errorf("%s --help does not say what it never does (or that it writes nothing)", name)
		}
	}
	if checked < 9 {
		t.Errorf("checked %d commands' Long, want every command's (at least 9)", checked)
	}
}

// longProblems returns what makes a help text a wall: paragraphs of more
// than 4 lines, lines of more than 80 columns.
func longProblems(long string) []string {
	var out []string
	para, start := 0, ""
	prevIndent := 0
	for _, line := range strings.Split(long, "\n") {
		if len(line) > 80 {
			out = append(out, fmt.Sprintf("line of %d columns: %q", len(line), line))
		}
		trimmed := strings.TrimLeft(line, " ")
		indent := len(line) - len(trimmed)
		switch {
		case trimmed == "":
			para = 0
			continue
		case para == 0, indent == 2, indent == 0 && prevIndent > 0:
			para, start = 0, line
		}
		para++
		prevIndent = indent
		if para == 5 {
			out = append(out, fmt.Sprintf("a paragraph of more than 4 lines, from %q", start))
		}
	}
	return out
}
