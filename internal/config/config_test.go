package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// loadCase is one invocation: command line, environment and config file.
type loadCase struct {
	name    string
	command string // default "scan"
	args    []string
	env     map[string]string
	// file, when not empty, is written to a temporary file passed with
	// --config (or JANITOR_CONFIG when fileViaEnv).
	file       string
	fileViaEnv bool
	// wantErr is a substring of the error ("$FILE" stands for the file's
	// path); exact makes it the whole message.
	wantErr string
	exact   bool
	check   func(t *testing.T, c *Config)
}

func (tc loadCase) run(t *testing.T) (*Config, error) {
	t.Helper()
	env := map[string]string{}
	for k, v := range tc.env {
		env[k] = v
	}
	args := append([]string(nil), tc.args...)
	path := ""
	if tc.file != "" {
		path = filepath.Join(t.TempDir(), "janitor.yaml")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		if tc.fileViaEnv {
			env["JANITOR_CONFIG"] = path
		} else {
			args = append(args, "--config", path)
		}
	}
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	Register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	cmd := tc.command
	if cmd == "" {
		cmd = CommandScan
	}
	c, err := Load(fs, cmd, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil && path != "" && !strings.Contains(err.Error(), path) && strings.Contains(tc.wantErr, "$FILE") {
		t.Errorf("error does not name the file %s: %v", path, err)
	}
	if tc.wantErr != "" {
		tc.wantErr = strings.ReplaceAll(tc.wantErr, "$FILE", path)
	}
	if tc.wantErr == "" && err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if tc.wantErr != "" {
		switch {
		case err == nil:
			t.Fatalf("want error %q, got none", tc.wantErr)
		case tc.exact && err.Error() != tc.wantErr:
			t.Fatalf("error\n got %q\nwant %q", err, tc.wantErr)
		case !strings.Contains(err.Error(), tc.wantErr):
			t.Fatalf("error %q does not contain %q", err, tc.wantErr)
		}
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrUsage) {
			t.Errorf("error %v is not a *config.Error matching ErrUsage", err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
	if tc.check != nil && c != nil {
		tc.check(t, c)
	}
	return c, err
}

func TestLoad(t *testing.T) {
	eq := func(t *testing.T, what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	cases := []loadCase{
		{
			name: "defaults when nothing is given",
			check: func(t *testing.T, c *Config) {
				eq(t, "Command", c.Command, "scan")
				eq(t, "Namespaces", len(c.Namespaces), 0)
				eq(t, "AllNamespaces", c.AllNamespaces, false)
				eq(t, "Selector.Empty", c.Selector.Empty(), true)
				eq(t, "MinAge", c.MinAge, 10*time.Minute)
				eq(t, "GracePeriod", c.GracePeriod, 30*time.Minute)
				eq(t, "ClockSkew", c.ClockSkew, 2*time.Second)
				eq(t, "Superseded", c.Superseded, "keep")
				eq(t, "Output", c.Output, "table")
				eq(t, "LogFormat", c.LogFormat, "auto")
				eq(t, "LogLevel", c.LogLevel, "info")
				eq(t, "PageSize", c.PageSize, int64(0))
				eq(t, "APITimeout", c.APITimeout, 2*time.Minute)
				eq(t, "SnapshotTimeout", c.SnapshotTimeout, 10*time.Minute)
				eq(t, "SnapshotErrorGrace", c.SnapshotErrorGrace, 2*time.Minute)
				eq(t, "SnapshotAttempts", c.SnapshotAttempts, 3)
				eq(t, "SnapshotRetryBackoff", c.SnapshotRetryBackoff, 10*time.Minute)
				eq(t, "Concurrency", c.Concurrency, 4)
				eq(t, "QPS", c.QPS, float32(50))
				eq(t, "Burst", c.Burst, 100)
				eq(t, "MaxDeletions", c.MaxDeletions, 50)
				eq(t, "MaxDeletionPercent", c.MaxDeletionPercent, 25.0)
				eq(t, "LockNamespace", c.LockNamespace, "default")
				eq(t, "LockDuration", c.LockDuration, 60*time.Second)
				eq(t, "DryRun", c.DryRun, false)
				eq(t, "ConfigFile", c.ConfigFile, "")
			},
		},
		{
			name: "JANITOR_MIN_AGE", env: map[string]string{"JANITOR_MIN_AGE": "1h"},
			check: func(t *testing.T, c *Config) { eq(t, "MinAge", c.MinAge, time.Hour) },
		},
		{
			name: "JANITOR_NAMESPACE with commas", env: map[string]string{"JANITOR_NAMESPACE": "a, b,,c,a"},
			check: func(t *testing.T, c *Config) { eq(t, "Namespaces", c.Namespaces, []string{"a", "b", "c"}) },
		},
		{
			name: "--namespace repeated and comma-separated", args: []string{"-n", "a,b", "--namespace", "c"},
			check: func(t *testing.T, c *Config) { eq(t, "Namespaces", c.Namespaces, []string{"a", "b", "c"}) },
		},
		{
			name: "empty environment value counts as unset", env: map[string]string{"JANITOR_OUTPUT": ""},
			check: func(t *testing.T, c *Config) { eq(t, "Output", c.Output, "table") },
		},
		{
			name: "file via JANITOR_CONFIG", fileViaEnv: true, file: "output: json\nnamespace: [ws]\n",
			check: func(t *testing.T, c *Config) {
				eq(t, "Output", c.Output, "json")
				eq(t, "Namespaces", c.Namespaces, []string{"ws"})
				if c.ConfigFile == "" {
					t.Error("ConfigFile not recorded")
				}
			},
		},
		{name: "notification routes", env: map[string]string{"TEAM_A_HOOK": "https://hooks.example.com/a"},
			args: []string{"--owner-label", "owner"},
			file: "notify-routes:\n  - name: team-a\n    namespaces: [team-a]\n    selector: tier=gold\n    webhook-env: TEAM_A_HOOK\n    format: template\n    template: '{{.Owner}}'\n",
			check: func(t *testing.T, c *Config) {
				if len(c.NotifyRoutes) != 1 || c.NotifyRoutes[0].Webhook != "https://hooks.example.com/a" || c.NotifyRoutes[0].Tmpl == nil ||
					!c.NotifyRoutes[0].Sel.Matches(labelSet{"tier": "gold"}) {
					t.Errorf("routes %+v", c.NotifyRoutes)
				}
				eq(t, "LabelKeys", strings.Join(c.LabelKeys(), ","), "owner,tier")
			}},
		{name: "route: unknown field", file: "notify-routes:\n  - name: x\n    webhook: https://h\n",
			wantErr: `notify-routes: want a list of routes`},
		{name: "route: webhook variable unset", file: "notify-routes:\n  - name: x\n    webhook-env: NOPE_HOOK\n",
			wantErr: `notify-routes: route "x": environment variable NOPE_HOOK (the webhook's URL) is not set`, exact: true},
		{name: "route: bad selector", env: map[string]string{"H": "https://h.example.com"}, file: "notify-routes:\n  - name: x\n    webhook-env: H\n    selector: 'a in ('\n",
			wantErr: `notify-routes: route "x": selector:`},
		{name: "route: template without its format", env: map[string]string{"H": "https://h.example.com"},
			file: "notify-routes:\n  - name: x\n    webhook-env: H\n    template: '{{.Owner}}'\n", wantErr: `a template needs format: template`},
		{name: "route: broken template", env: map[string]string{"H": "https://h.example.com"},
			file: "notify-routes:\n  - name: x\n    webhook-env: H\n    format: template\n    template: '{{.Owner'\n", wantErr: `route "x": template:`},
		{name: "duplicate key in file", file: "output: json\nmin-age: 1m\noutput: yaml\n",
			wantErr: `config file $FILE: invalid YAML (want a mapping of flag names to values): yaml: unmarshal errors: line 3: mapping key "output" already defined at line 1`,
			exact:   true},
		{
			name: "file with every type", command: CommandRun,
			file: `kubeconfig: /k
context: kind-dev
all-namespaces: true
exclude-namespace: kube-system,kube-public
selector: app=ide,tier!=test
workspace-label: example.com/workspace
min-age: 0
grace-period: 1h
trust-existing-snapshots: true
superseded: archive
yes: true
output: yaml
log-format: json
log-level: debug
page-size: 100
api-timeout: 30s
snapshot-class: ~
snapshot-timeout: 5m
snapshot-error-grace: 1m
snapshot-attempts: 5
snapshot-retry-backoff: 1h
concurrency: 8
qps: 12.5
burst: 20
max-deletions: 0
max-deletion-percent: 100
lock-namespace: ops
lock-duration: 2m
allow-delete-policy: true
`,
			check: func(t *testing.T, c *Config) {
				eq(t, "Kubeconfig", c.Kubeconfig, "/k")
				eq(t, "Context", c.Context, "kind-dev")
				eq(t, "AllNamespaces", c.AllNamespaces, true)
				eq(t, "ExcludeNamespaces", c.ExcludeNamespaces, []string{"kube-system", "kube-public"})
				eq(t, "Selector", c.Selector.String(), "app=ide,tier!=test")
				eq(t, "WorkspaceLabel", c.WorkspaceLabel, "example.com/workspace")
				eq(t, "MinAge", c.MinAge, time.Duration(0))
				eq(t, "GracePeriod", c.GracePeriod, time.Hour)
				eq(t, "TrustExistingSnapshots", c.TrustExistingSnapshots, true)
				eq(t, "Superseded", c.Superseded, "archive")
				eq(t, "Yes", c.Yes, true)
				eq(t, "Output", c.Output, "yaml")
				eq(t, "LogFormat", c.LogFormat, "json")
				eq(t, "LogLevel", c.LogLevel, "debug")
				eq(t, "PageSize", c.PageSize, int64(100))
				eq(t, "APITimeout", c.APITimeout, 30*time.Second)
				eq(t, "SnapshotClass", c.SnapshotClass, "")
				eq(t, "SnapshotTimeout", c.SnapshotTimeout, 5*time.Minute)
				eq(t, "SnapshotErrorGrace", c.SnapshotErrorGrace, time.Minute)
				eq(t, "SnapshotAttempts", c.SnapshotAttempts, 5)
				eq(t, "SnapshotRetryBackoff", c.SnapshotRetryBackoff, time.Hour)
				eq(t, "Concurrency", c.Concurrency, 8)
				eq(t, "QPS", c.QPS, float32(12.5))
				eq(t, "Burst", c.Burst, 20)
				eq(t, "MaxDeletions", c.MaxDeletions, 0)
				eq(t, "MaxDeletionPercent", c.MaxDeletionPercent, 100.0)
				eq(t, "LockNamespace", c.LockNamespace, "ops")
				eq(t, "LockDuration", c.LockDuration, 2*time.Minute)
				eq(t, "AllowDeletePolicy", c.AllowDeletePolicy, true)
			},
		},

		// The config file.
		{name: "unknown key in file", file: "exclude-namespaces: [kube-system]\n",
			wantErr: `config file $FILE: unknown key "exclude-namespaces" (did you mean "exclude-namespace"?); keys are flag names`, exact: true},
		{name: "key is case-sensitive", file: "Output: json\n", wantErr: `unknown key "Output"`},
		{name: "wrong type in file: number for a duration", file: "min-age: 600\n",
			wantErr: `config file $FILE: key "min-age": want a duration such as "10m", got number 600`, exact: true},
		{name: "wrong type in file: string for an integer", file: "page-size: \"lots\"\n", wantErr: `key "page-size": want a whole number, got string "lots"`},
		{name: "wrong type in file: fraction for an integer", file: "concurrency: 2.5\n", wantErr: `key "concurrency": want a whole number`},
		{name: "wrong type in file: number in a list", file: "namespace: [ws, 1]\n", wantErr: `key "namespace": want a list of strings, got a list`},
		{name: "YAML 1.2: no is a string, not a boolean", file: "namespace: [no]\n",
			check: func(t *testing.T, c *Config) { eq(t, "Namespaces", c.Namespaces, []string{"no"}) }},
		{name: "YAML 1.2: yes is not a boolean value", file: "dry-run: yes\n", wantErr: `key "dry-run": want a boolean, got string "yes"`},
		{name: "wrong type in file: mapping for a string", file: "selector: {app: ide}\n", wantErr: `key "selector": want a string, got a mapping`},
		{name: "wrong type in file: string for a boolean", file: "dry-run: \"maybe\"\n", wantErr: `key "dry-run": want a boolean`},
		{name: "malformed YAML", file: "namespace: [a\n", wantErr: "config file $FILE: invalid YAML"},
		{name: "file that is not a mapping", file: "- a\n- b\n", wantErr: "config file $FILE: invalid YAML"},
		{name: "config key in file", file: "config: other.yaml\n", wantErr: `key "config" cannot be set in a config file`},
		{name: "empty file is fine", file: "# nothing\n",
			check: func(t *testing.T, c *Config) { eq(t, "Output", c.Output, "table") }},
		{name: "invalid duration text in file names the file", file: "grace-period: soon\n",
			wantErr: `--grace-period: invalid duration "soon" (from config file $FILE)`, exact: true},

		// Values from flags and the environment.
		{name: "invalid duration flag", args: []string{"--min-age", "10x"}, wantErr: `--min-age: invalid duration "10x"`, exact: true},
		{name: "invalid duration env", env: map[string]string{"JANITOR_MIN_AGE": "10x"},
			wantErr: `--min-age: invalid duration "10x" (from JANITOR_MIN_AGE)`, exact: true},
		{name: "invalid boolean env", env: map[string]string{"JANITOR_DRY_RUN": "yess"}, wantErr: `--dry-run: invalid boolean "yess" (from JANITOR_DRY_RUN)`, exact: true},
		{name: "invalid integer env", env: map[string]string{"JANITOR_PAGE_SIZE": "abc"}, wantErr: `--page-size: invalid integer "abc"`},
		{name: "invalid number env", env: map[string]string{"JANITOR_QPS": "NaN"}, wantErr: `--qps: invalid number "NaN"`},
		{name: "boolean env", env: map[string]string{"JANITOR_ALL_NAMESPACES": "true"},
			check: func(t *testing.T, c *Config) { eq(t, "AllNamespaces", c.AllNamespaces, true) }},

		// Scope.
		{name: "namespace and all-namespaces", args: []string{"-n", "a", "-A"},
			wantErr: "--namespace and --all-namespaces are mutually exclusive", exact: true},
		// Flags over the file (kubectl's precedence): -n narrows a file's
		// all-namespaces, -A widens a file's namespaces; one source
		// giving both is an error.
		{name: "namespace flag narrows all-namespaces from file", args: []string{"-n", "a"}, file: "all-namespaces: true\n",
			check: func(t *testing.T, c *Config) {
				eq(t, "Namespaces", c.Namespaces, []string{"a"})
				eq(t, "AllNamespaces", c.AllNamespaces, false)
			}},
		{name: "namespace env narrows all-namespaces from file", env: map[string]string{"JANITOR_NAMESPACE": "a,b"}, file: "all-namespaces: true\n",
			check: func(t *testing.T, c *Config) {
				eq(t, "Namespaces", c.Namespaces, []string{"a", "b"})
				eq(t, "AllNamespaces", c.AllNamespaces, false)
			}},
		{name: "all-namespaces flag widens namespace from file", args: []string{"-A"}, file: "namespace: [a]\n",
			check: func(t *testing.T, c *Config) {
				eq(t, "Namespaces", len(c.Namespaces), 0)
				eq(t, "AllNamespaces", c.AllNamespaces, true)
			}},
		{name: "namespace and all-namespaces in one file", file: "namespace: [a]\nall-namespaces: true\n",
			wantErr: "--namespace (from config file $FILE) and --all-namespaces (from config file $FILE) are mutually exclusive", exact: true},
		{name: "invalid namespace", args: []string{"-n", "Team_A"}, wantErr: `--namespace: invalid namespace "Team_A"`},
		{name: "invalid excluded namespace", args: []string{"--exclude-namespace", "kube system"}, wantErr: `--exclude-namespace: invalid namespace "kube system"`},
		{name: "invalid lock namespace", args: []string{"--lock-namespace", "-x"}, wantErr: `--lock-namespace: invalid namespace "-x"`},
		{name: "selector parse error", args: []string{"-l", "app in (ide"}, wantErr: `--selector: invalid selector "app in (ide":`},
		{name: "selector parsed", args: []string{"-l", "app=ide"},
			check: func(t *testing.T, c *Config) {
				eq(t, "SelectorString", c.SelectorString, "app=ide")
				eq(t, "Selector", c.Selector.String(), "app=ide")
			}},
		{name: "invalid workspace label", args: []string{"--workspace-label", "bad key!"}, wantErr: `--workspace-label: invalid label key "bad key!"`},

		// Durations and counts.
		{name: "zero min-age and grace-period are allowed", args: []string{"--min-age", "0", "--grace-period", "0s"},
			check: func(t *testing.T, c *Config) { eq(t, "GracePeriod", c.GracePeriod, time.Duration(0)) }},
		{name: "negative min-age", args: []string{"--min-age", "-1m"}, wantErr: "--min-age: must not be negative, got -1m0s", exact: true},
		{name: "zero api-timeout", args: []string{"--api-timeout", "0"}, wantErr: "--api-timeout: must be greater than 0, got 0s", exact: true},
		{name: "zero snapshot-timeout", args: []string{"--snapshot-timeout", "0s"}, wantErr: "--snapshot-timeout: must be greater than 0"},
		{name: "zero snapshot-retry-backoff", env: map[string]string{"JANITOR_SNAPSHOT_RETRY_BACKOFF": "0s"}, wantErr: "--snapshot-retry-backoff: must be greater than 0, got 0s (from JANITOR_SNAPSHOT_RETRY_BACKOFF)", exact: true},
		{name: "JANITOR_SNAPSHOT_RETRY_BACKOFF", env: map[string]string{"JANITOR_SNAPSHOT_RETRY_BACKOFF": "30m"},
			check: func(t *testing.T, c *Config) { eq(t, "SnapshotRetryBackoff", c.SnapshotRetryBackoff, 30*time.Minute) }},
		{name: "snapshot-retry-backoff flag", args: []string{"--snapshot-retry-backoff", "2h"},
			check: func(t *testing.T, c *Config) { eq(t, "SnapshotRetryBackoff", c.SnapshotRetryBackoff, 2*time.Hour) }},
		{name: "zero lock-duration", env: map[string]string{"JANITOR_LOCK_DURATION": "0s"}, wantErr: "--lock-duration: must be greater than 0, got 0s (from JANITOR_LOCK_DURATION)", exact: true},
		{name: "page-size -1", args: []string{"--page-size", "-1"}, wantErr: "--page-size: must be 0 (one streamed list) or between 1 and 10000, got -1", exact: true},
		{name: "page-size 10001", args: []string{"--page-size", "10001"}, wantErr: "--page-size: must be 0 (one streamed list) or between 1 and 10000"},
		{name: "page-size 0 streams", args: []string{"--page-size", "0"},
			check: func(t *testing.T, c *Config) { eq(t, "PageSize", c.PageSize, int64(0)) }},
		{name: "page-size 10000", args: []string{"--page-size", "10000"},
			check: func(t *testing.T, c *Config) { eq(t, "PageSize", c.PageSize, int64(10000)) }},
		{name: "concurrency 0", args: []string{"--concurrency", "0"}, wantErr: "--concurrency: must be greater than 0, got 0", exact: true},
		{name: "snapshot-attempts 0", args: []string{"--snapshot-attempts", "0"}, wantErr: "--snapshot-attempts: must be greater than 0"},
		{name: "burst 0", args: []string{"--burst", "0"}, wantErr: "--burst: must be greater than 0"},
		{name: "qps 0", args: []string{"--qps", "0"}, wantErr: "--qps: must be greater than 0"},
		{name: "max-deletions 0 means delete nothing", args: []string{"--max-deletions", "0"},
			check: func(t *testing.T, c *Config) { eq(t, "MaxDeletions", c.MaxDeletions, 0) }},
		{name: "max-deletions negative", args: []string{"--max-deletions", "-1"}, wantErr: "--max-deletions: must not be negative"},
		{name: "min-claims", args: []string{"--min-claims", "3"},
			check: func(t *testing.T, c *Config) { eq(t, "MinClaims", c.MinClaims, 3) }},
		{name: "min-claims negative", args: []string{"--min-claims", "-1"}, wantErr: "--min-claims: must not be negative"},
		// issue 23: an empty scope fails the gate unless asked otherwise.
		{name: "guard min-claims defaults to 1", command: "guard",
			check: func(t *testing.T, c *Config) { eq(t, "MinClaims", c.MinClaims, 1) }},
		{name: "guard min-claims 0 lets an empty scope pass", command: "guard", args: []string{"--min-claims", "0"},
			check: func(t *testing.T, c *Config) { eq(t, "MinClaims", c.MinClaims, 0) }},
		// docs/spec.md#rule-clock-skew: 0s..5m.
		{name: "clock-skew 0s", args: []string{"--clock-skew", "0s"},
			check: func(t *testing.T, c *Config) { eq(t, "ClockSkew", c.ClockSkew, time.Duration(0)) }},
		{name: "clock-skew 5m", args: []string{"--clock-skew", "5m"},
			check: func(t *testing.T, c *Config) { eq(t, "ClockSkew", c.ClockSkew, 5*time.Minute) }},
		{name: "clock-skew from the environment", env: map[string]string{"JANITOR_CLOCK_SKEW": "500ms"},
			check: func(t *testing.T, c *Config) { eq(t, "ClockSkew", c.ClockSkew, 500*time.Millisecond) }},
		{name: "clock-skew from the file", file: "clock-skew: 10s\n",
			check: func(t *testing.T, c *Config) { eq(t, "ClockSkew", c.ClockSkew, 10*time.Second) }},
		{name: "clock-skew over 5m", args: []string{"--clock-skew", "5m1s"}, wantErr: "--clock-skew: must be between 0s and 5m0s, got 5m1s", exact: true},
		{name: "clock-skew negative", args: []string{"--clock-skew", "-1s"}, wantErr: "--clock-skew: must be between 0s and 5m0s, got -1s", exact: true},
		{name: "clock-skew over 5m from the environment", env: map[string]string{"JANITOR_CLOCK_SKEW": "1h"},
			wantErr: "--clock-skew: must be between 0s and 5m0s, got 1h0m0s (from JANITOR_CLOCK_SKEW)", exact: true},
		{name: "clock-skew not a duration", args: []string{"--clock-skew", "2"}, wantErr: `--clock-skew: invalid duration "2"`},
		{name: "max-deletion-percent 0", args: []string{"--max-deletion-percent", "0"}, wantErr: "--max-deletion-percent: must be greater than 0 and at most 100, got 0", exact: true},
		{name: "max-deletion-percent 101", args: []string{"--max-deletion-percent", "101"}, wantErr: "--max-deletion-percent: must be greater than 0 and at most 100"},

		// Choices.
		{name: "bad output", args: []string{"-o", "xml"}, wantErr: `unable to match a printer suitable for the output format "xml", allowed formats are: custom-columns,json,jsonpath,name,table,wide,yaml`, exact: true},
		{name: "output jsonpath keeps its template's case", args: []string{"-o", "JSONPath={.claims[*].Name}"},
			check: func(t *testing.T, c *Config) { eq(t, "Output", c.Output, "jsonpath={.claims[*].Name}") }},
		{name: "output name, custom columns, no headers, sort by", args: []string{"-o=custom-columns=NAME:.name,STATE:.state", "--no-headers", "--sort-by", ".capacity"},
			check: func(t *testing.T, c *Config) {
				eq(t, "Output", c.Output, "custom-columns=NAME:.name,STATE:.state")
				eq(t, "NoHeaders", c.NoHeaders, true)
				eq(t, "SortBy", c.SortBy, ".capacity")
			}},
		{name: "bad jsonpath", args: []string{"-o", "jsonpath={.claims[*}"}, wantErr: `error parsing jsonpath {.claims[*}, unterminated array`, exact: true},
		{name: "bad custom columns", args: []string{"-o", "custom-columns=NAME"}, wantErr: `unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>`, exact: true},
		{name: "bad sort by", args: []string{"--sort-by", "{.a[}"}, wantErr: `error parsing jsonpath {.a[}`},
		{name: "output is case-insensitive", args: []string{"-o", "JSON"},
			check: func(t *testing.T, c *Config) { eq(t, "Output", c.Output, "json") }},
		{name: "bad log format", args: []string{"--log-format", "text"}, wantErr: `--log-format: invalid value "text": want auto, json or console`, exact: true},
		{name: "bad log level", args: []string{"--log-level", "trace"}, wantErr: `--log-level: invalid value "trace"`},
		{name: "bad superseded", args: []string{"--superseded", "delete"}, wantErr: `--superseded: invalid value "delete": want keep, archive or discard`, exact: true},

		// Combinations.
		{name: "dry-run and yes", args: []string{"--dry-run", "-y"}, wantErr: "--dry-run and --yes are mutually exclusive", exact: true},
		{name: "yes from env and dry-run flag", args: []string{"--dry-run"}, env: map[string]string{"JANITOR_YES": "1"},
			wantErr: "--dry-run and --yes (from JANITOR_YES) are mutually exclusive", exact: true},
		{name: "snapshot without selector", command: CommandSnapshot,
			wantErr: "snapshot refuses an empty --selector without --all-claims: a typo must never turn the janitor loose on every claim", exact: true},
		{name: "reap without selector", command: CommandReap, wantErr: "reap refuses an empty --selector without --all-claims"},
		{name: "run with a blank selector", command: CommandRun, args: []string{"-l", "  "}, wantErr: "run refuses an empty --selector without --all-claims"},
		{name: "guard --rescue without selector", command: CommandGuard, args: []string{"--rescue"}, wantErr: "guard --rescue refuses an empty --selector without --all-claims"},
		{name: "guard without selector only reads", command: CommandGuard},
		{name: "scan without selector only reads", command: CommandScan},
		{name: "snapshot with --all-claims", command: CommandSnapshot, args: []string{"--all-claims"},
			check: func(t *testing.T, c *Config) { eq(t, "Selector.Empty", c.Selector.Empty(), true) }},
		{name: "snapshot with selector from env", command: CommandSnapshot, env: map[string]string{"JANITOR_SELECTOR": "app=ide"}},
		{name: "rescue outside guard", command: CommandScan, args: []string{"--rescue"}, wantErr: "--rescue is only valid for guard", exact: true},
		{name: "discard on reap needs --yes", command: CommandReap, args: []string{"-l", "app=ide", "--superseded", "discard"},
			wantErr: "--superseded=discard deletes superseded claims without a snapshot: reap needs --yes (or --dry-run to preview)", exact: true},
		{name: "discard on run needs --yes", command: CommandRun, args: []string{"-l", "app=ide", "--superseded", "discard"}, wantErr: "run needs --yes"},
		{name: "discard on reap with --yes", command: CommandReap, args: []string{"-l", "app=ide", "--superseded", "discard", "--yes"}},
		{name: "discard on reap with --dry-run", command: CommandReap, args: []string{"-l", "app=ide", "--superseded", "discard", "--dry-run"}},
		{name: "discard on snapshot deletes nothing", command: CommandSnapshot, args: []string{"-l", "app=ide", "--superseded", "discard"}},
		{name: "unknown command", command: "nuke", wantErr: `unknown command "nuke"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t) })
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := loadCase{args: []string{"--config", path}, wantErr: "--config: open " + path}.run(t)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v does not wrap fs.ErrNotExist", err)
	}
}

// TestPrecedence checks flag > environment > file > default for a string, a
// duration, a list and a boolean.
func TestPrecedence(t *testing.T) {
	type layer struct{ flag, env, file string }
	opts := []struct {
		name   string
		layers layer // the value each layer sets (flag and env as typed, file as YAML)
		get    func(*Config) any
		def    any
		want   [3]any // when flag, env, file are given; env and file; file only
	}{
		{name: "context", layers: layer{"from-flag", "from-env", "from-file"},
			get: func(c *Config) any { return c.Context }, def: "",
			want: [3]any{"from-flag", "from-env", "from-file"}},
		{name: "min-age", layers: layer{"3m", "2m", "1m"},
			get: func(c *Config) any { return c.MinAge }, def: 10 * time.Minute,
			want: [3]any{3 * time.Minute, 2 * time.Minute, time.Minute}},
		{name: "exclude-namespace", layers: layer{"f1,f2", "e1, e2", "[c1, c2]"},
			get: func(c *Config) any { return c.ExcludeNamespaces }, def: []string(nil),
			want: [3]any{[]string{"f1", "f2"}, []string{"e1", "e2"}, []string{"c1", "c2"}}},
		{name: "trust-existing-snapshots", layers: layer{"true", "false", "true"},
			get: func(c *Config) any { return c.TrustExistingSnapshots }, def: false,
			want: [3]any{true, false, true}},
	}
	for _, o := range opts {
		env := EnvName(o.name)
		steps := []struct {
			label string
			tc    loadCase
			want  any
		}{
			{"flag beats env and file", loadCase{args: []string{"--" + o.name + "=" + o.layers.flag}, env: map[string]string{env: o.layers.env}, file: o.name + ": " + o.layers.file + "\n"}, o.want[0]},
			{"env beats file", loadCase{env: map[string]string{env: o.layers.env}, file: o.name + ": " + o.layers.file + "\n"}, o.want[1]},
			{"file beats default", loadCase{file: o.name + ": " + o.layers.file + "\n"}, o.want[2]},
			{"default", loadCase{}, o.def},
		}
		for _, s := range steps {
			t.Run(o.name+"/"+s.label, func(t *testing.T) {
				c, _ := s.tc.run(t)
				if got := o.get(c); !reflect.DeepEqual(got, s.want) {
					t.Errorf("%s = %#v, want %#v", o.name, got, s.want)
				}
			})
		}
	}
}

func TestRegister(t *testing.T) {
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	Register(fs)
	for _, o := range options() {
		f := fs.Lookup(o.name)
		if f == nil {
			t.Fatalf("--%s not registered", o.name)
		}
		if f.Usage == "" {
			t.Errorf("--%s has no usage", o.name)
		}
	}
	for short, long := range map[string]string{"n": "namespace", "A": "all-namespaces", "l": "selector", "y": "yes", "o": "output"} {
		if f := fs.ShorthandLookup(short); f == nil || f.Name != long {
			t.Errorf("-%s is not --%s", short, long)
		}
	}
	if got := fs.Lookup("min-age").Value.Type(); got != "duration" {
		t.Errorf("--min-age type = %q, want duration", got)
	}
	if got := EnvName("max-deletion-percent"); got != "JANITOR_MAX_DELETION_PERCENT" {
		t.Errorf("EnvName = %q", got)
	}
}

func TestLoadWithoutRegister(t *testing.T) {
	_, err := Load(pflag.NewFlagSet("x", pflag.ContinueOnError), CommandScan, func(string) (string, bool) { return "", false })
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "config.Register") {
		t.Errorf("got %v", err)
	}
}

func TestValidateDirect(t *testing.T) {
	c, _ := loadCase{}.run(t)
	c.Command = CommandSnapshot
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "snapshot refuses") {
		t.Errorf("Validate() = %v", err)
	}
	c.Selector = nil
	c.AllClaims = true
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v", err)
	}
}

func TestRedacted(t *testing.T) {
	c, _ := loadCase{args: []string{"--kubeconfig", "/home/op/.kube/config", "-l", "app=ide", "--min-age", "5m"}}.run(t)
	m := c.Redacted()
	if m["kubeconfig"] != "/home/op/.kube/config" || m["selector"] != "app=ide" || m["min-age"] != "5m0s" {
		t.Errorf("Redacted() = %v", m)
	}
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	Register(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := m[f.Name]; !ok {
			t.Errorf("Redacted() lacks %q", f.Name)
		}
	})
}

// labelSet is labels.Set without importing it twice in the table.
type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }
