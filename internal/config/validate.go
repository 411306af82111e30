package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// Validate checks a completed configuration, for instance one a test built
// directly. Load already calls it. The first problem found is returned as a
// *Error.
func (c *Config) Validate() error {
	return validate(c, func(string) string { return "" })
}

// validate checks c; from names where a setting came from when it was not a
// flag (" (from JANITOR_X)"), so that a conflict with a config file is not a
// riddle.
func validate(c *Config, from func(string) string) error {
	fail := func(flag, format string, args ...any) error {
		return &Error{Flag: flag, Err: fmt.Errorf(format, args...)}
	}
	switch c.Command {
	case CommandScan, CommandSnapshot, CommandReap, CommandRun, CommandGuard, CommandVersion:
	default:
		return fail("", "unknown command %q", c.Command)
	}

	// Scope.
	if len(c.Namespaces) > 0 && c.AllNamespaces {
		return fail("namespace", "--namespace%s and --all-namespaces%s are mutually exclusive", from("namespace"), from("all-namespaces"))
	}
	for _, f := range []struct {
		flag string
		nss  []string
	}{{"namespace", c.Namespaces}, {"exclude-namespace", c.ExcludeNamespaces}, {"lock-namespace", []string{c.LockNamespace}}} {
		for _, ns := range f.nss {
			if errs := content.IsDNS1123Label(ns); len(errs) > 0 {
				return fail(f.flag, "--%s: invalid namespace %q%s: %s", f.flag, ns, from(f.flag), strings.Join(errs, "; "))
			}
		}
	}
	if c.WorkspaceLabel != "" {
		if errs := content.IsLabelKey(c.WorkspaceLabel); len(errs) > 0 {
			return fail("workspace-label", "--workspace-label: invalid label key %q%s: %s", c.WorkspaceLabel, from("workspace-label"), strings.Join(errs, "; "))
		}
	}

	// Durations: min-age and grace-period may be 0 (no minimum, no grace);
	// the others bound waits, where 0 would mean "give up at once".
	for _, d := range []struct {
		flag string
		v    time.Duration
		zero bool
	}{
		{"min-age", c.MinAge, true},
		{"grace-period", c.GracePeriod, true},
		{"api-timeout", c.APITimeout, false},
		{"snapshot-timeout", c.SnapshotTimeout, false},
		{"snapshot-error-grace", c.SnapshotErrorGrace, false},
		{"snapshot-retry-backoff", c.SnapshotRetryBackoff, false},
		{"lock-duration", c.LockDuration, false},
	} {
		if d.zero && d.v < 0 {
			return fail(d.flag, "--%s: must not be negative, got %s%s", d.flag, d.v, from(d.flag))
		}
		if !d.zero && d.v <= 0 {
			return fail(d.flag, "--%s: must be greater than 0, got %s%s", d.flag, d.v, from(d.flag))
		}
	}

	// Counts.
	if c.PageSize < 0 || c.PageSize > 10000 {
		return fail("page-size", "--page-size: must be 0 (one streamed list) or between 1 and 10000, got %d%s", c.PageSize, from("page-size"))
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"snapshot-attempts", c.SnapshotAttempts}, {"concurrency", c.Concurrency}, {"burst", c.Burst}} {
		if n.v <= 0 {
			return fail(n.flag, "--%s: must be greater than 0, got %d%s", n.flag, n.v, from(n.flag))
		}
	}
	if !(c.QPS > 0) {
		return fail("qps", "--qps: must be greater than 0, got %g%s", c.QPS, from("qps"))
	}
	if c.MaxDeletions < 0 {
		return fail("max-deletions", "--max-deletions: must not be negative, got %d%s", c.MaxDeletions, from("max-deletions"))
	}
	if c.MinClaims < 0 {
		return fail("min-claims", "--min-claims: must not be negative, got %d%s", c.MinClaims, from("min-claims"))
	}
	if !(c.MaxDeletionPercent > 0 && c.MaxDeletionPercent <= 100) {
		return fail("max-deletion-percent", "--max-deletion-percent: must be greater than 0 and at most 100, got %g%s", c.MaxDeletionPercent, from("max-deletion-percent"))
	}

	// Choices.
	for _, e := range []struct {
		flag, v string
		want    []string
	}{
		{"superseded", c.Superseded, []string{SupersededKeep, SupersededArchive, SupersededDiscard}},
		{"output", c.Output, []string{OutputTable, OutputWide, OutputJSON, OutputYAML}},
		{"log-format", c.LogFormat, []string{LogFormatAuto, LogFormatJSON, LogFormatConsole}},
		{"log-level", c.LogLevel, []string{"debug", "info", "warn", "error"}},
	} {
		if !slices.Contains(e.want, e.v) {
			return fail(e.flag, "--%s: invalid value %q%s: want %s", e.flag, e.v, from(e.flag), oneOf(e.want))
		}
	}

	// Combinations.
	if c.DryRun && c.Yes {
		return fail("yes", "--dry-run%s and --yes%s are mutually exclusive", from("dry-run"), from("yes"))
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
	if c.deleting() && c.Superseded == SupersededDiscard && !c.Yes && !c.DryRun {
		return fail("superseded", "--superseded=discard%s deletes superseded claims without a snapshot: %s needs --yes (or --dry-run to preview)", from("superseded"), c.Command)
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
