package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/endpoint"
	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
)

// valueKind is how an option's value is typed, in the environment and in the
// config file as much as on the command line. It follows from the type of
// the option's Config field.
type valueKind int

const (
	kindString valueKind = iota
	kindBool
	kindInt     // int
	kindInt64   // int64
	kindFloat32 // float32
	kindFloat64 // float64
	kindDuration
	kindList // repeatable, also comma-separated
)

func (k valueKind) String() string {
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

// commandSet is a set of commands (a bit each) that take an option.
type commandSet uint16

const (
	forScan commandSet = 1 << iota
	forSnapshot
	forReap
	forRun
	forGuard
	forRestore
	forPrune
	forExplain
	// global options are the root command's persistent flags: every
	// command takes them (as kubectl's global flags).
	global

	// forPipeline: the commands of the scan-rescue-reap pipeline.
	forPipeline = forScan | forSnapshot | forReap | forRun | forGuard
	// forReading: every command that reads the cluster.
	forReading = forPipeline | forRestore | forPrune | forExplain
	// forRescuing: the commands that may create snapshots (guard --rescue).
	forRescuing = forSnapshot | forRun | forGuard
	// forDeleting: the commands that may delete claims or rescues.
	forDeleting = forReap | forRun | forPrune
	// forRetention: the commands that prune rescues.
	forRetention = forRun | forPrune
	// forMutating: the commands that refuse an empty selector.
	forMutating = forSnapshot | forReap | forRun | forGuard
	// forPriced: the commands whose report carries sizes and money.
	forPriced = forPipeline | forPrune | forExplain
	// forFleet: the commands that run over several clusters at once.
	forFleet = forReading &^ forRestore
)

// Sections of a command's --help, in order.
const (
	groupClassify = "Classification flags"
	groupAct      = "Acting flags"
	groupRescue   = "Rescue flags"
	groupGate     = "Gate flags"
	groupAPI      = "API and lease flags"
	groupPublish  = "Metrics and notification flags"
	groupKeep     = "Retention flags"
	groupRestore  = "Restore flags"
	groupCost     = "Cost flags"
	groupFleet    = "Fleet flags"
)

// FlagGroupAnnotation is the pflag annotation naming a flag's section of
// --help; FlagGroups lists the sections in order.
const FlagGroupAnnotation = "pvc-janitor.io/flag-group"

// FlagGroups returns the sections of a command's --help, in order.
func FlagGroups() []string {
	return []string{groupClassify, groupAct, groupRescue, groupKeep, groupRestore, groupGate, groupCost, groupAPI, groupFleet, groupPublish}
}

// commandBits names the bit of each command.
var commandBits = []struct {
	name string
	bit  commandSet
}{{CommandScan, forScan}, {CommandSnapshot, forSnapshot}, {CommandReap, forReap}, {CommandRun, forRun}, {CommandGuard, forGuard},
	{CommandRestore, forRestore}, {CommandPrune, forPrune}, {CommandExplain, forExplain}}

// option is one setting: its flag, and therefore its environment variable
// (EnvName) and config file key (the name), its Config field, the commands
// that take it, its checks and how a debug log shows it. This table is the
// one place an option is written down.
type option struct {
	name  string
	short string
	def   string // the default, in its flag spelling
	usage string
	// group is the section of --help the flag is listed in.
	group string
	cmds  commandSet
	// field returns a pointer to the option's field of c; its type decides
	// the option's kind.
	field func(c *Config) any
	// choices, when set, are the only values (matched case-insensitively).
	choices []string
	// normalize, when set, rewrites the completed value (choices are
	// lower-cased instead).
	normalize func(string) string
	// check, when set, vets the completed value; from says where it came
	// from when not from a flag.
	check func(name string, v any, from string) error
	// redact, when set, is how a debug log shows the value.
	redact func(string) string
}

// kind is the option's kind, from its field's type.
func (o option) kind() valueKind {
	switch o.field(&Config{}).(type) {
	case *bool:
		return kindBool
	case *int:
		return kindInt
	case *int64:
		return kindInt64
	case *float32:
		return kindFloat32
	case *float64:
		return kindFloat64
	case *time.Duration:
		return kindDuration
	case *[]string:
		return kindList
	}
	return kindString
}

// options lists every setting. It is a function, not a package variable, so
// nothing can change it at run time.
func options() []option {
	return append(globalOptions(), commandOptions()...)
}

func globalOptions() []option {
	return []option{
		{name: "config", cmds: global, field: func(c *Config) any { return &c.ConfigFile },
			usage: "YAML file of settings; keys are flag names (env JANITOR_CONFIG)"},
		{name: "kubeconfig", cmds: global, field: func(c *Config) any { return &c.Kubeconfig },
			usage: "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)"},
		{name: "context", cmds: global, field: func(c *Config) any { return &c.Contexts },
			usage: "kubeconfig context to use (default: the current context); repeatable or comma-separated: one run over several clusters (not restore)"},
		{name: "namespace", short: "n", cmds: global, field: func(c *Config) any { return &c.Namespaces }, check: namespaces,
			usage: "namespace to look at; repeatable or comma-separated (default: the context's namespace)"},
		{name: "all-namespaces", short: "A", cmds: global, field: func(c *Config) any { return &c.AllNamespaces },
			usage: "look at every namespace"},
		{name: "exclude-namespace", cmds: global, field: func(c *Config) any { return &c.ExcludeNamespaces }, check: namespaces,
			usage: "namespace never to look at; repeatable or comma-separated"},
		{name: "selector", short: "l", cmds: global, field: func(c *Config) any { return &c.SelectorString },
			usage: "label selector of workspace claims, e.g. app=ide"},
		{name: "output", short: "o", def: OutputTable, cmds: global, field: func(c *Config) any { return &c.Output },
			check: output, normalize: outputKind,
			usage: "report format: table, wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:PATH,... (as kubectl's)"},
		{name: "no-headers", cmds: global, field: func(c *Config) any { return &c.NoHeaders },
			usage: "with -o table, wide or custom-columns: no header row (as kubectl's)"},
		{name: "sort-by", cmds: global, field: func(c *Config) any { return &c.SortBy }, check: sortBy,
			usage: "sort the report's claims by a field path of their JSON, e.g. .capacity or .orphanedSince (as kubectl's)"},
		{name: "log-format", def: LogFormatAuto, cmds: global, field: func(c *Config) any { return &c.LogFormat },
			choices: []string{LogFormatAuto, LogFormatJSON, LogFormatConsole}, usage: "log format on stderr: auto, json or console"},
		{name: "log-level", def: "info", cmds: global, field: func(c *Config) any { return &c.LogLevel },
			choices: []string{"debug", "info", "warn", "error"}, usage: "log level: debug, info, warn or error"},
	}
}

func commandOptions() []option {
	return append(append(append(append(sharedOptions(), rescueOptions()...), runOptions()...), retentionOptions()...), restoreOptions()...)
}

// retentionOptions prune the janitor's rescues and price what is kept.
func retentionOptions() []option {
	return []option{
		{name: "keep-for", group: groupKeep, def: "0s", cmds: forRetention, field: func(c *Config) any { return &c.KeepFor }, check: nonNegative,
			usage: "prune the janitor's rescues cut longer ago than this (0: no limit by age)"},
		{name: "keep-last", group: groupKeep, def: "0", cmds: forRetention, field: func(c *Config) any { return &c.KeepLast }, check: nonNegative,
			usage: "keep the N newest rescues (by data time) of each workspace and prune the others (0: no limit by count)"},
		{name: "delete-contents", group: groupKeep, cmds: forRescuing | forRetention, field: func(c *Config) any { return &c.DeleteContents },
			usage: "set a Retain VolumeSnapshotContent of the janitor's own snapshot to Delete before deleting the snapshot (needs patch on volumesnapshotcontents)"},
		{name: "price", group: groupCost, cmds: forPriced, field: func(c *Config) any { return &c.Prices }, check: prices,
			usage: "price per GiB-month of a storage class, CLASS=PRICE; repeatable or comma-separated; * for every other class"},
		{name: "snapshot-price", group: groupCost, cmds: forPriced, field: func(c *Config) any { return &c.SnapshotPrice }, check: snapshotPrice,
			usage: "price per GiB-month of snapshots (of their restore size)"},
	}
}

// restoreOptions say what to restore and how.
func restoreOptions() []option {
	return []option{
		{name: "workspace", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.RestoreWorkspace },
			usage: "restore the rescue with the newest data of this workspace (needs --workspace-label)"},
		{name: "volume-label", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.VolumeLabel }, check: labelKey,
			usage: "label whose value names a claim's role in its workspace (home, data): --workspace restores each role's newest rescue, and restore weighs only the same role's claims and rescues (default: a workspace has one role)"},
		{name: "from", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.RestoreFrom },
			usage: "restore from this VolumeSnapshot of the namespace (the janitor's or not)"},
		{name: "as", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.RestoreAs }, check: claimName,
			usage: "name of the new claim (default: the claim the rescue came from)"},
		{name: "allow-older", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.AllowOlder },
			usage: "restore even though a claim of the workspace is in use or holds newer data"},
		{name: "storage-class", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.StorageClass },
			usage: "StorageClass of the new claim (default: the rescued claim's)"},
		{name: "size", group: groupRestore, cmds: forRestore, field: func(c *Config) any { return &c.Size }, check: quantity,
			usage: "least size of the new claim, e.g. 10Gi (default: the rescued claim's, at least the snapshot's restoreSize)"},
		{name: "restore-timeout", group: groupRestore, def: "5m", cmds: forRestore, field: func(c *Config) any { return &c.RestoreTimeout }, check: positive,
			usage: "how long to wait for the new claim to be Bound"},
	}
}

// sharedOptions are those of most commands: how claims are classified, the
// acting switches (dry run, confirmation, all claims) and the API limits.
func sharedOptions() []option {
	return []option{
		{name: "all-claims", group: groupAct, cmds: forMutating | forPrune, field: func(c *Config) any { return &c.AllClaims },
			usage: "let mutating commands run without --selector, on every claim in scope"},
		{name: "workspace-label", group: groupClassify, cmds: forReading, field: func(c *Config) any { return &c.WorkspaceLabel }, check: labelKey,
			usage: "label whose value names a claim's workspace (default: each claim is its own workspace)"},
		{name: "min-age", group: groupClassify, def: "10m", cmds: forReading, field: func(c *Config) any { return &c.MinAge }, check: nonNegative,
			usage: "claims younger than this are never orphans"},
		{name: "grace-period", group: groupClassify, def: "30m", cmds: forReading, field: func(c *Config) any { return &c.GracePeriod }, check: nonNegative,
			usage: "how long a claim must have been orphaned before it is rescued"},
		{name: "owner-label", group: groupClassify, cmds: forReading, field: func(c *Config) any { return &c.OwnerLabel }, check: labelKey,
			usage: "label whose value names a claim's owner, for notification routes (default: the claim's namespace)"},
		{name: "notice-period", group: groupClassify, def: "0s", cmds: forReading, field: func(c *Config) any { return &c.NoticePeriod }, check: nonNegative,
			usage: "tell a claim's owner (annotation pvc-janitor.io/reap-after, Event ReapScheduled) once it is orphaned past the grace period, and reap it no earlier than this later (0s: no notice)"},
		{name: "max-snooze", group: groupClassify, def: "720h", cmds: forReading, field: func(c *Config) any { return &c.MaxSnooze }, check: nonNegative,
			usage: "how far past the notice's end an owner's pvc-janitor.io/snooze-until may postpone the reap"},
		{name: "clock-skew", group: groupClassify, def: "2s", cmds: forReading, field: func(c *Config) any { return &c.ClockSkew }, check: clockSkew,
			usage: "margin between the storage, controller manager and API server clocks: a snapshot rescues a claim only when cut this long after its orphaned-since (0s..5m)"},
		{name: "trust-existing-snapshots", group: groupClassify, cmds: forReading, field: func(c *Config) any { return &c.TrustExistingSnapshots },
			usage: "count any ready snapshot of a claim as its rescue, whenever it was taken"},
		{name: "sessions-carry-data", group: groupClassify, cmds: forReading, field: func(c *Config) any { return &c.SessionsCarryData },
			usage: "state that a workspace's newer sessions carry its older data (the platform copies it in by other means): a newer copy of a --workspace-label workspace then holds an older one's data; without it only descent (same claim, a snapshot of it, a claim created from that snapshot) does"},
		{name: "superseded", group: groupClassify, def: classify.SupersededKeep, cmds: forRescuing | forReap | forRun | forExplain, field: func(c *Config) any { return &c.Superseded },
			choices: []string{classify.SupersededKeep, classify.SupersededArchive, classify.SupersededDiscard},
			usage:   "what to do with superseded claims: keep, archive or discard"},
		{name: "dry-run", group: groupAct, cmds: forReading &^ forExplain, field: func(c *Config) any { return &c.DryRun },
			usage: "change nothing; report what would be done"},
		{name: "marks-only", group: groupAct, cmds: forScan | forRun, field: func(c *Config) any { return &c.MarksOnly },
			usage: "a dry run that writes the janitor's mark annotations (pvc-janitor.io/orphaned-since, last-used) and takes its Lease, and nothing else: a preview whose grace periods start without the Unused condition"},
		{name: "yes", group: groupAct, short: "y", cmds: forDeleting, field: func(c *Config) any { return &c.Yes },
			usage: "do not ask for confirmation before deleting"},
		{name: "page-size", group: groupAPI, def: "0", cmds: forReading, field: func(c *Config) any { return &c.PageSize }, check: pageSize,
			usage: "items per list call (1..10000); 0 reads each list as one stream"},
		{name: "api-timeout", group: groupAPI, def: "2m", cmds: forReading, field: func(c *Config) any { return &c.APITimeout }, check: positive,
			usage: "cap on retrying one API call"},
		{name: "request-timeout", group: groupAPI, def: "30s", cmds: forReading, field: func(c *Config) any { return &c.RequestTimeout }, check: positive,
			usage: "how long one request waits for the API server's response (a list: each silence of its stream; at most a quarter of --api-timeout, 15s at least); a server that has not answered yet fails the run after it"},
	}
}

// rescueOptions configure snapshots.
func rescueOptions() []option {
	return []option{
		{name: "snapshot-class", group: groupRescue, cmds: forRescuing, field: func(c *Config) any { return &c.SnapshotClass },
			usage: "VolumeSnapshotClass of rescues (default: the driver's default class)"},
		{name: "snapshot-timeout", group: groupRescue, def: "10m", cmds: forRescuing, field: func(c *Config) any { return &c.SnapshotTimeout }, check: positive,
			usage: "how long to wait for a snapshot to become ready"},
		{name: "snapshot-error-grace", group: groupRescue, def: "2m", cmds: forRescuing, field: func(c *Config) any { return &c.SnapshotErrorGrace }, check: positive,
			usage: "how long a snapshot error may last before the snapshot is recreated"},
		{name: "snapshot-attempts", group: groupRescue, def: "3", cmds: forRescuing, field: func(c *Config) any { return &c.SnapshotAttempts }, check: positive,
			usage: "how many times a failing snapshot is created before the claim is SnapshotFailed"},
		{name: "snapshot-retry-backoff", group: groupRescue, def: "10m", cmds: forRescuing, field: func(c *Config) any { return &c.SnapshotRetryBackoff }, check: positive,
			usage: "wait before a failed claim's next snapshot attempt, doubled per failed run, at most 24h"},
		{name: "all-contexts", group: groupFleet, cmds: forFleet, field: func(c *Config) any { return &c.AllContexts },
			usage: "run over every context of the kubeconfig, one cluster each, with one report"},
		{name: "cluster-concurrency", group: groupFleet, def: "4", cmds: forFleet, field: func(c *Config) any { return &c.ClusterConcurrency }, check: positive,
			usage: "how many clusters are worked on at once with several contexts"},
		{name: "concurrency", group: groupAPI, def: "4", cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.Concurrency }, check: positive,
			usage: "claims worked on at once"},
		{name: "qps", group: groupAPI, def: "50", cmds: forReading, field: func(c *Config) any { return &c.QPS }, check: positive,
			usage: "API requests per second"},
		{name: "burst", group: groupAPI, def: "100", cmds: forReading, field: func(c *Config) any { return &c.Burst }, check: positive,
			usage: "API request burst"},
	}
}

// runOptions bound and report a run.
func runOptions() []option {
	return []option{
		{name: "max-deletions", group: groupAct, def: "50", cmds: forDeleting, field: func(c *Config) any { return &c.MaxDeletions }, check: nonNegative,
			usage: "delete nothing when a run would delete more claims (prune: rescues) than this (0: delete nothing)"},
		{name: "max-deletion-percent", group: groupAct, def: "25", cmds: forDeleting, field: func(c *Config) any { return &c.MaxDeletionPercent }, check: percent,
			usage: "delete nothing when a run would delete more than this percentage of the claims (prune: the janitor's rescues) in scope"},
		{name: "lock-namespace", group: groupAPI, def: "default", cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.LockNamespace }, check: namespaces,
			usage: "namespace of the run's Lease"},
		{name: "lock-duration", group: groupAPI, def: "60s", cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.LockDuration }, check: positive,
			usage: "how long the run's Lease lasts without renewal"},
		{name: "allow-delete-policy", group: groupGate, cmds: forGuard, field: func(c *Config) any { return &c.AllowDeletePolicy },
			usage: "accept rescues whose VolumeSnapshotContent has deletionPolicy Delete"},
		{name: "rescue", group: groupGate, cmds: forGuard, field: func(c *Config) any { return &c.Rescue },
			usage: "run snapshot first"},
		{name: "min-claims", group: groupGate, def: "1", cmds: forGuard, field: func(c *Config) any { return &c.MinClaims }, check: nonNegative,
			usage: "fail the gate when fewer claims than this are in scope (a mistyped selector cannot pass it)"},
		{name: "metrics-file", group: groupPublish, cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.MetricsFile },
			usage: "write the run's Prometheus metrics to this file, atomically (node-exporter textfile collector)"},
		{name: "pushgateway", group: groupPublish, cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.Pushgateway }, redact: redactURL,
			check: parsedBy(endpoint.ValidatePushgateway),
			usage: "push the run's Prometheus metrics to this Pushgateway URL (credentials become basic auth and are never logged)"},
		{name: "notify-webhook", group: groupPublish, cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.NotifyWebhook }, redact: redactSecret,
			check: parsedBy(endpoint.ValidateWebhook),
			usage: "post a Slack-compatible summary to this webhook URL when a run acted or failed (the URL is never logged)"},
		{name: "notify-retry-time", group: groupPublish, def: "20s", cmds: forPipeline | forPrune, field: func(c *Config) any { return &c.NotifyRetryTime }, check: nonNegative,
			usage: "how long the notifications of the config file's notify-routes may take, retries included, in all"},
	}
}

// Register adds every flag to fs, as one flat set (for tools and tests
// that load any command's configuration from one flag set).
func Register(fs *pflag.FlagSet) {
	for _, o := range options() {
		register(fs, o)
	}
}

// RegisterGlobal adds the flags every command takes (kubeconfig, scope,
// output, logging, config file) to fs: the root command's persistent flags.
func RegisterGlobal(fs *pflag.FlagSet) {
	for _, o := range options() {
		if o.cmds&global != 0 {
			register(fs, o)
		}
	}
}

// RegisterCommand adds the flags of command's own options to fs: only
// those it uses.
func RegisterCommand(fs *pflag.FlagSet, command string) {
	bit := commandBit(command)
	for _, o := range options() {
		if o.cmds&global == 0 && o.cmds&bit != 0 {
			register(fs, o)
		}
	}
}

// OnlyFor says which commands take the option named name (a flag name, or
// a one-letter shorthand): "guard", "reap and run". It is empty for a name
// that is no option.
func OnlyFor(name string) string {
	for _, o := range options() {
		if o.name != name && (o.short == "" || o.short != name) {
			continue
		}
		var names []string
		for _, cb := range commandBits {
			if o.cmds&cb.bit != 0 {
				names = append(names, cb.name)
			}
		}
		if len(names) == 0 {
			return "every command"
		}
		return oneOf(names)
	}
	return ""
}

// LongName returns the option whose shorthand is short, else short.
func LongName(short string) string {
	for _, o := range options() {
		if o.short == short {
			return o.name
		}
	}
	return short
}

func commandBit(command string) commandSet {
	for _, cb := range commandBits {
		if cb.name == command {
			return cb.bit
		}
	}
	return 0
}

// register adds o's flag to fs. Durations are registered as text and
// parsed by Load, so that a bad value gets the same message whether it
// came from a flag, the environment or the config file.
func register(fs *pflag.FlagSet, o option) {
	switch o.kind() {
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
	if o.group != "" {
		_ = fs.SetAnnotation(o.name, FlagGroupAnnotation, []string{o.group})
	}
}

// defaultValue is o's default as the resolver reads an unbound option.
func (o option) defaultValue() any {
	switch o.kind() {
	case kindBool:
		return false
	case kindList:
		return nil
	}
	return o.def
}

// durationText is a flag value that keeps a duration as typed; Load parses
// it. Its type shows as "duration" in --help.
type durationText struct{ s string }

func (d *durationText) String() string     { return d.s }
func (d *durationText) Set(s string) error { d.s = s; return nil }
func (d *durationText) Type() string       { return "duration" }

// Checks of the option table. Each names the flag, the value and, when it
// did not come from a flag, where it came from.

func nonNegative(name string, v any, from string) error {
	switch x := v.(type) {
	case time.Duration:
		if x < 0 {
			return fail(name, "--%s: must not be negative, got %s%s", name, x, from)
		}
	case int:
		if x < 0 {
			return fail(name, "--%s: must not be negative, got %d%s", name, x, from)
		}
	}
	return nil
}

// positive: a duration that bounds a wait, where 0 would mean "give up at
// once", or a count or rate.
func positive(name string, v any, from string) error {
	switch x := v.(type) {
	case time.Duration:
		if x <= 0 {
			return fail(name, "--%s: must be greater than 0, got %s%s", name, x, from)
		}
	case int:
		if x <= 0 {
			return fail(name, "--%s: must be greater than 0, got %d%s", name, x, from)
		}
	case float32:
		if !(x > 0) {
			return fail(name, "--%s: must be greater than 0, got %g%s", name, x, from)
		}
	}
	return nil
}

// MaxClockSkew bounds --clock-skew: a rescue waits twice the skew past
// orphaned-since before its create, and clocks further apart than minutes
// are broken, not skewed.
const MaxClockSkew = 5 * time.Minute

func clockSkew(name string, v any, from string) error {
	if d := v.(time.Duration); d < 0 || d > MaxClockSkew {
		return fail(name, "--%s: must be between 0s and %s, got %s%s", name, MaxClockSkew, d, from)
	}
	return nil
}

func pageSize(name string, v any, from string) error {
	if n := v.(int64); n < 0 || n > 10000 {
		return fail(name, "--%s: must be 0 (one streamed list) or between 1 and 10000, got %d%s", name, n, from)
	}
	return nil
}

func percent(name string, v any, from string) error {
	if p := v.(float64); !(p > 0 && p <= 100) {
		return fail(name, "--%s: must be greater than 0 and at most 100, got %g%s", name, p, from)
	}
	return nil
}

func namespaces(name string, v any, from string) error {
	nss, ok := v.([]string)
	if !ok {
		nss = []string{v.(string)}
	}
	for _, ns := range nss {
		if errs := content.IsDNS1123Label(ns); len(errs) > 0 {
			return fail(name, "--%s: invalid namespace %q%s: %s", name, ns, from, strings.Join(errs, "; "))
		}
	}
	return nil
}

func labelKey(name string, v any, from string) error {
	if k := v.(string); k != "" {
		if errs := content.IsLabelKey(k); len(errs) > 0 {
			return fail(name, "--%s: invalid label key %q%s: %s", name, k, from, strings.Join(errs, "; "))
		}
	}
	return nil
}

// parsedBy checks a URL as the package that uses it parses it; its
// message names no secret.
func parsedBy(parse func(string) error) func(name string, v any, from string) error {
	return func(name string, v any, from string) error {
		raw := v.(string)
		if raw == "" {
			return nil
		}
		if err := parse(raw); err != nil {
			return &Error{Flag: name, Err: fmt.Errorf("--%s: %w%s", name, err, from)}
		}
		return nil
	}
}

// output checks --output: one of the report's formats, or one of kubectl's
// that kubeout parses, with kubectl's messages.
func output(name string, v any, from string) error {
	o := v.(string)
	if slices.Contains([]string{OutputTable, OutputWide, OutputJSON, OutputYAML}, o) {
		return nil
	}
	_, ok, err := kubeout.Parse(o)
	if !ok {
		return fail(name, "unable to match a printer suitable for the output format %q%s, allowed formats are: custom-columns,json,jsonpath,name,table,wide,yaml", o, from)
	}
	if err != nil {
		return &Error{Flag: name, Err: fmt.Errorf("%w%s", err, from)}
	}
	return nil
}

// outputKind lower-cases --output's kind, never a template or column spec.
func outputKind(o string) string {
	kind, arg, has := strings.Cut(o, "=")
	if !has {
		return strings.ToLower(o)
	}
	return strings.ToLower(kind) + "=" + arg
}

// sortBy checks --sort-by as kubectl does.
func sortBy(name string, v any, from string) error {
	if p := v.(string); p != "" {
		if err := kubeout.CheckSortBy(p); err != nil {
			return &Error{Flag: name, Err: fmt.Errorf("%w%s", err, from)}
		}
	}
	return nil
}

func fail(flag, format string, args ...any) error {
	return &Error{Flag: flag, Err: fmt.Errorf(format, args...)}
}

// prices checks --price as the cost package parses it.
func prices(name string, v any, from string) error {
	if _, err := cost.Parse(v.([]string), ""); err != nil {
		return &Error{Flag: name, Err: fmt.Errorf("%w%s", err, from)}
	}
	return nil
}

func snapshotPrice(name string, v any, from string) error {
	if _, err := cost.Parse(nil, v.(string)); err != nil {
		return &Error{Flag: name, Err: fmt.Errorf("%w%s", err, from)}
	}
	return nil
}

// claimName checks a name a claim can have (a DNS subdomain).
func claimName(name string, v any, from string) error {
	if s := v.(string); s != "" {
		if errs := content.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fail(name, "--%s: invalid claim name %q%s: %s", name, s, from, strings.Join(errs, "; "))
		}
	}
	return nil
}

// quantity checks a size such as 10Gi.
func quantity(name string, v any, from string) error {
	if s := v.(string); s != "" {
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 {
			return fail(name, "--%s: invalid size %q%s: want a positive quantity such as 10Gi", name, s, from)
		}
	}
	return nil
}
