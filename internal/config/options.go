package config

import (
	"github.com/spf13/pflag"
)

// kind is how an option's value is typed, in the environment and in the
// config file as much as on the command line.
type kind int

const (
	kindString kind = iota
	kindBool
	kindInt     // int
	kindInt64   // int64
	kindFloat32 // float32
	kindFloat64 // float64
	kindDuration
	kindList // repeatable, also comma-separated
)

func (k kind) String() string {
	switch k {
	case kindBool:
		return "boolean"
	case kindInt, kindInt64:
		return "integer"
	case kindFloat32, kindFloat64:
		return "number"
	case kindDuration:
		return "duration"
	case kindList:
		return "list of strings"
	default:
		return "string"
	}
}

// option is one flag, and therefore one environment variable and one config
// file key: the three names are derived from a single one so they can never
// drift apart.
type option struct {
	name  string
	short string
	kind  kind
	def   string // the default, in its flag spelling
	usage string
}

// options lists every setting. It is a function, not a package variable, so
// nothing can change it at run time.
func options() []option {
	return []option{
		{name: "config", kind: kindString, usage: "YAML file of settings; keys are flag names (env JANITOR_CONFIG)"},
		{name: "kubeconfig", kind: kindString, usage: "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"},
		{name: "context", kind: kindString, usage: "kubeconfig context to use (default: the current context)"},
		{name: "namespace", short: "n", kind: kindList, usage: "namespace to look at; repeatable or comma-separated (default: the context's namespace)"},
		{name: "all-namespaces", short: "A", kind: kindBool, usage: "look at every namespace"},
		{name: "exclude-namespace", kind: kindList, usage: "namespace never to look at; repeatable or comma-separated"},
		{name: "selector", short: "l", kind: kindString, usage: "label selector of workspace claims, e.g. app=ide"},
		{name: "all-claims", kind: kindBool, usage: "let mutating commands run without --selector, on every claim in scope"},
		{name: "workspace-label", kind: kindString, usage: "label whose value names a claim's workspace (default: each claim is its own workspace)"},
		{name: "min-age", kind: kindDuration, def: "10m", usage: "claims younger than this are never orphans"},
		{name: "grace-period", kind: kindDuration, def: "30m", usage: "how long a claim must have been orphaned before it is rescued"},
		{name: "trust-existing-snapshots", kind: kindBool, usage: "count any ready snapshot of a claim as its rescue, whenever it was taken"},
		{name: "superseded", kind: kindString, def: SupersededKeep, usage: "what to do with superseded claims: keep, archive or discard"},
		{name: "dry-run", kind: kindBool, usage: "change nothing; report what would be done"},
		{name: "yes", short: "y", kind: kindBool, usage: "do not ask for confirmation before deleting"},
		{name: "output", short: "o", kind: kindString, def: OutputTable, usage: "report format: table, wide, json or yaml"},
		{name: "log-format", kind: kindString, def: LogFormatAuto, usage: "log format on stderr: auto, json or console"},
		{name: "log-level", kind: kindString, def: "info", usage: "log level: debug, info, warn or error"},
		{name: "page-size", kind: kindInt64, def: "0", usage: "items per list call (1..10000); 0 reads each list as one stream"},
		{name: "api-timeout", kind: kindDuration, def: "2m", usage: "cap on retrying one API call"},
		{name: "snapshot-class", kind: kindString, usage: "VolumeSnapshotClass of rescues (default: the driver's default class)"},
		{name: "snapshot-timeout", kind: kindDuration, def: "10m", usage: "how long to wait for a snapshot to become ready"},
		{name: "snapshot-error-grace", kind: kindDuration, def: "2m", usage: "how long a snapshot error may last before the snapshot is recreated"},
		{name: "snapshot-attempts", kind: kindInt, def: "3", usage: "how many times a failing snapshot is created before the claim is SnapshotFailed"},
		{name: "snapshot-retry-backoff", kind: kindDuration, def: "10m", usage: "wait before a failed claim's next snapshot attempt, doubled per failed run, at most 24h"},
		{name: "concurrency", kind: kindInt, def: "4", usage: "claims worked on at once"},
		{name: "qps", kind: kindFloat32, def: "50", usage: "API requests per second"},
		{name: "burst", kind: kindInt, def: "100", usage: "API request burst"},
		{name: "max-deletions", kind: kindInt, def: "50", usage: "delete nothing when a run would delete more claims than this (0: delete nothing)"},
		{name: "max-deletion-percent", kind: kindFloat64, def: "25", usage: "delete nothing when a run would delete more than this percentage of the claims in scope"},
		{name: "lock-namespace", kind: kindString, def: "default", usage: "namespace of the run's Lease"},
		{name: "lock-duration", kind: kindDuration, def: "60s", usage: "how long the run's Lease lasts without renewal"},
		{name: "allow-delete-policy", kind: kindBool, usage: "guard: accept rescues whose VolumeSnapshotContent has deletionPolicy Delete"},
		{name: "rescue", kind: kindBool, usage: "guard: run snapshot first"},
		{name: "min-claims", kind: kindInt, def: "0", usage: "guard: fail the gate when fewer claims than this are in scope (a mistyped selector cannot pass it)"},
		{name: "metrics-file", kind: kindString, usage: "write the run's Prometheus metrics to this file, atomically (node-exporter textfile collector)"},
		{name: "pushgateway", kind: kindString, usage: "push the run's Prometheus metrics to this Pushgateway URL (credentials become basic auth and are never logged)"},
		{name: "notify-webhook", kind: kindString, usage: "post a Slack-compatible summary to this webhook URL when a run acted or failed (the URL is never logged)"},
	}
}

// Register adds every flag to fs (the root command's persistent flags).
// Durations are registered as text and parsed by Load, so that a bad value
// gets the same message whether it came from a flag, the environment or the
// config file.
func Register(fs *pflag.FlagSet) {
	for _, o := range options() {
		switch o.kind {
		case kindBool:
			fs.BoolP(o.name, o.short, false, o.usage)
		case kindInt:
			fs.IntP(o.name, o.short, mustInt(o.def), o.usage)
		case kindInt64:
			fs.Int64P(o.name, o.short, int64(mustInt(o.def)), o.usage)
		case kindFloat32:
			fs.Float32P(o.name, o.short, float32(mustFloat(o.def)), o.usage)
		case kindFloat64:
			fs.Float64P(o.name, o.short, mustFloat(o.def), o.usage)
		case kindDuration:
			v := &durationText{s: o.def}
			fs.VarP(v, o.name, o.short, o.usage)
			fs.Lookup(o.name).DefValue = o.def
		case kindList:
			fs.StringSliceP(o.name, o.short, nil, o.usage)
		default:
			fs.StringP(o.name, o.short, o.def, o.usage)
		}
	}
}

// durationText is a flag value that keeps a duration as typed; Load parses
// it. Its type shows as "duration" in --help.
type durationText struct{ s string }

func (d *durationText) String() string     { return d.s }
func (d *durationText) Set(s string) error { d.s = s; return nil }
func (d *durationText) Type() string       { return "duration" }
