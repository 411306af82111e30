package config

import (
	"slices"
	"strings"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// Validate checks a completed configuration, for instance one a test built
// directly. Load already calls it. The first problem found is returned as a
// *Error.
func (c *Config) Validate() error {
	return validate(c, func(string) string { return "" })
}

// validate checks c; from names where a setting came from when it was not a
// flag (" (from JANITOR_X)"), so that a conflict with a config file is not a
// riddle. Each option's own checks are in the option table; the checks
// here are of the command and of combinations.
func validate(c *Config, from func(string) string) error {
	if commandBit(c.Command) == 0 && c.Command != CommandVersion {
		return fail("", "unknown command %q", c.Command)
	}
	if len(c.Namespaces) > 0 && c.AllNamespaces {
		return fail("namespace", "--namespace%s and --all-namespaces%s are mutually exclusive", from("namespace"), from("all-namespaces"))
	}
	for _, o := range options() {
		if err := o.validate(c, from(o.name)); err != nil {
			return err
		}
	}
	return combinations(c, from)
}

// validate runs o's checks on its field of c.
func (o option) validate(c *Config, from string) error {
	v := o.field(c)
	if o.choices != nil {
		if s := *v.(*string); !slices.Contains(o.choices, s) {
			return fail(o.name, "--%s: invalid value %q%s: want %s", o.name, s, from, oneOf(o.choices))
		}
	}
	if o.check == nil {
		return nil
	}
	switch p := v.(type) {
	case *string:
		return o.check(o.name, *p, from)
	case *[]string:
		return o.check(o.name, *p, from)
	case *int:
		return o.check(o.name, *p, from)
	case *int64:
		return o.check(o.name, *p, from)
	case *float32:
		return o.check(o.name, *p, from)
	case *float64:
		return o.check(o.name, *p, from)
	case *time.Duration:
		return o.check(o.name, *p, from)
	}
	return nil
}

// combinations checks what no single option can: conflicts and unsafe
// combinations.
func combinations(c *Config, from func(string) string) error {
	if c.MarksOnly && (c.DryRun || c.Yes) {
		// docs/spec.md#marks-only: a plain dry run stays pure.
		other := "dry-run"
		if c.Yes {
			other = "yes"
		}
		return fail("marks-only", "--marks-only%s and --%s%s are mutually exclusive: --marks-only is a dry run that writes only the janitor's marks", from("marks-only"), other, from(other))
	}
	if c.DryRun && c.Yes {
		return fail("yes", "--dry-run%s and --yes%s are mutually exclusive", from("dry-run"), from("yes"))
	}
	if err := fleetCombinations(c, from); err != nil {
		return err
	}
	if c.Rescue && c.Command != CommandGuard {
		return fail("rescue", "--rescue%s is only valid for guard", from("rescue"))
	}
	if c.mutating() && (c.Selector == nil || c.Selector.Empty()) && !c.AllClaims {
		cmd := c.Command
		if c.Command == CommandGuard {
			cmd = "guard --rescue"
		}
		return fail("selector", "%s refuses an empty --selector without --all-claims: a typo must never turn the janitor loose on every claim", cmd)
	}
	if c.Command == CommandRestore && c.RestoreWorkspace != "" && c.WorkspaceLabel == "" {
		return fail("workspace", "--workspace%s needs --workspace-label: without it a claim has no workspace", from("workspace"))
	}
	if c.Command == CommandRestore && c.RestoreWorkspace != "" && c.RestoreFrom != "" {
		return fail("from", "--from%s and --workspace%s are mutually exclusive", from("from"), from("workspace"))
	}
	if c.Command == CommandPrune && c.KeepFor == 0 && c.KeepLast == 0 {
		// It would read every rescue in scope and prune none
		// (docs/spec.md#retention-candidates).
		return fail("keep-for", "prune needs a retention: --keep-for DURATION, --keep-last N or both (with neither it prunes nothing); nothing was read")
	}
	if c.deleting() && c.Superseded == classify.SupersededDiscard && !c.Yes && !c.DryRun {
		return fail("superseded", "--superseded=discard%s deletes superseded claims without a snapshot: %s needs --yes (or --dry-run to preview)", from("superseded"), c.Command)
	}
	return nil
}

// Fleet reports whether the configuration names several clusters (more
// than one --context, or --all-contexts).
func (c *Config) Fleet() bool { return len(c.Contexts) > 1 || c.AllContexts }

// fleetCombinations: restore acts on one claim in one cluster; a fleet of
// deletions is never confirmed at a prompt (one "yes" for many clusters
// is too easy to give): it takes --yes, or --dry-run to preview.
func fleetCombinations(c *Config, from func(string) string) error {
	if c.AllContexts && len(c.Contexts) > 0 {
		return fail("all-contexts", "--context%s and --all-contexts%s are mutually exclusive", from("context"), from("all-contexts"))
	}
	if !c.Fleet() {
		return nil
	}
	if c.Command == CommandRestore {
		return fail("context", "restore acts on one claim in one cluster: give one --context, got %s%s", strings.Join(c.Contexts, ", "), from("context"))
	}
	if (c.deleting() || c.Command == CommandPrune) && !c.Yes && !c.DryRun {
		return fail("yes", "%s over several clusters deletes without a prompt: pass --yes (or --dry-run to preview); nothing was changed", c.Command)
	}
	return nil
}

// oneOf renders a list of choices as "a, b or c".
func oneOf(want []string) string {
	if len(want) == 1 {
		return want[0]
	}
	return strings.Join(want[:len(want)-1], ", ") + " or " + want[len(want)-1]
}
