package config

import (
	"reflect"
	"testing"
)

// TestFleetOptions: --context is a list (flags, environment, file), one
// context is Context as before, and the fleet's combinations are refused.
func TestFleetOptions(t *testing.T) {
	for _, tc := range []loadCase{
		{name: "one context", args: []string{"--context", "west"}, check: func(t *testing.T, c *Config) {
			if c.Context != "west" || c.Fleet() {
				t.Errorf("Context %q, Fleet %v", c.Context, c.Fleet())
			}
		}},
		{name: "repeated and comma-separated", args: []string{"--context", "west,east", "--context", "north"}, check: func(t *testing.T, c *Config) {
			if !reflect.DeepEqual(c.Contexts, []string{"west", "east", "north"}) || c.Context != "" || !c.Fleet() || c.ClusterConcurrency != 4 {
				t.Errorf("Contexts %v, Context %q, concurrency %d", c.Contexts, c.Context, c.ClusterConcurrency)
			}
		}},
		{name: "environment", env: map[string]string{"JANITOR_CONTEXT": "west, east", "JANITOR_CLUSTER_CONCURRENCY": "2"}, check: func(t *testing.T, c *Config) {
			if !reflect.DeepEqual(c.Contexts, []string{"west", "east"}) || c.ClusterConcurrency != 2 {
				t.Errorf("Contexts %v, concurrency %d", c.Contexts, c.ClusterConcurrency)
			}
		}},
		{name: "file", file: "context: [west, east]\nall-contexts: false\n", check: func(t *testing.T, c *Config) {
			if !reflect.DeepEqual(c.Contexts, []string{"west", "east"}) {
				t.Errorf("Contexts %v", c.Contexts)
			}
		}},
		{name: "all and named", args: []string{"--context", "west", "--all-contexts"}, wantErr: "--context and --all-contexts are mutually exclusive"},
		{name: "zero concurrency", args: []string{"--all-contexts", "--cluster-concurrency", "0"}, wantErr: "--cluster-concurrency: must be greater than 0"},
		{name: "restore", command: CommandRestore, args: []string{"--context", "west,east"}, wantErr: "restore acts on one claim in one cluster"},
		{name: "restore all", command: CommandRestore, env: map[string]string{"JANITOR_ALL_CONTEXTS": "true"}, wantErr: "restore acts on one claim in one cluster"},
		{name: "reap without yes", command: CommandReap, args: []string{"--all-contexts", "-l", "a=b"}, wantErr: "reap over several clusters deletes without a prompt"},
		{name: "prune without yes", command: CommandPrune, args: []string{"--context", "a,b"}, wantErr: "prune over several clusters"},
		{name: "run with yes", command: CommandRun, args: []string{"--context", "a,b", "-l", "a=b", "--yes"}},
		{name: "reap dry run", command: CommandReap, args: []string{"--context", "a,b", "-l", "a=b", "--dry-run"}},
		{name: "reap one context", command: CommandReap, args: []string{"--context", "a", "-l", "a=b"}},
	} {
		t.Run(tc.name, func(t *testing.T) { _, _ = tc.run(t) })
	}
}
