// Package config resolves the janitor's typed configuration (docs/spec.md#configuration) from,
// in order of precedence, the command line flags, the environment
// (JANITOR_ + the flag name upper-cased, '-' -> '_'), a YAML config file
// (--config or JANITOR_CONFIG; keys are the flag names exactly) and the
// defaults. It then completes it (every string becomes a typed value: a
// labels.Selector, a time.Duration, …) and validates it, so that the rest of
// the program never sees a raw flag.
//
// Every error it returns is a *Error, which matches ErrUsage: the CLI maps
// all of them to exit code 2 (usage or configuration error).
package config

import (
	"errors"
	"net/url"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/cost"
)

// Commands that Load knows.
const (
	CommandScan     = "scan"
	CommandSnapshot = "snapshot"
	CommandReap     = "reap"
	CommandRun      = "run"
	CommandGuard    = "guard"
	CommandRestore  = "restore"
	CommandPrune    = "prune"
	CommandExplain  = "explain"
	CommandVersion  = "version"
)

// Values of --output: the report's formats (report.Format*: config
// imports nothing that reads the cluster or acts, so the names are
// repeated here, and TestOutputFormatsAreTheReports checks they agree).
const (
	OutputTable = "table"
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// Values of --log-format.
const (
	LogFormatAuto    = "auto"
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// EnvPrefix starts the name of every environment variable the janitor reads.
const EnvPrefix = "JANITOR_"

// Config is the resolved, completed and validated configuration of one
// command invocation.
type Config struct {
	// Command is the command the configuration was loaded for.
	Command string
	// ConfigFile is the file the configuration was read from, if any.
	ConfigFile string

	// Kubeconfig and Context select the cluster as kubectl would; empty
	// means kubectl's own resolution. Context is the one context given
	// (empty with none or several); Contexts are all the --context values,
	// AllContexts is --all-contexts: with several, the run covers a fleet
	// (internal/fleet resolves them against the kubeconfig).
	Kubeconfig  string
	Context     string
	Contexts    []string
	AllContexts bool
	// ClusterConcurrency bounds how many clusters a fleet run works on at
	// once.
	ClusterConcurrency int

	// Namespaces to look at. Empty with AllNamespaces false means the
	// kubeconfig context's namespace, which the caller resolves.
	Namespaces []string
	// AllNamespaces looks at every namespace.
	AllNamespaces bool
	// ExcludeNamespaces are never looked at, even when listed in Namespaces.
	ExcludeNamespaces []string

	// Selector selects workspace claims; labels.Everything() when empty.
	Selector labels.Selector
	// SelectorString is Selector as given, for logs and reports.
	SelectorString string
	// AllClaims lets mutating commands run with an empty selector.
	AllClaims bool
	// WorkspaceLabel is the label key whose value names a claim's
	// workspace; empty: every claim is its own workspace.
	WorkspaceLabel string
	// VolumeLabel is the label key whose value names a claim's role in its
	// workspace (home, data); empty: a workspace has one role
	// (docs/spec.md#restore-roles).
	VolumeLabel string

	// MinAge: claims younger than this are never orphans.
	MinAge time.Duration
	// GracePeriod: how long a claim must have been orphaned to be rescued.
	GracePeriod time.Duration
	// OwnerLabel names the claim label whose value is its owner (the
	// namespace when empty or unset on a claim); NotifyRoutes are the
	// config file's notification routes, loaded (docs/usage.md#notification-routes).
	OwnerLabel   string
	NotifyRoutes []Route
	// NotifyRetryTime bounds the routes' notifications of a run, retries
	// included.
	NotifyRetryTime time.Duration
	// NoticePeriod and MaxSnooze: the owner's notice before a reap
	// (docs/spec.md#notice); 0 NoticePeriod: none.
	NoticePeriod time.Duration
	MaxSnooze    time.Duration
	// TrustExistingSnapshots counts any ready snapshot as a rescue.
	TrustExistingSnapshots bool
	// SessionsCarryData is the operator's statement that a workspace's
	// newer sessions carry its older data (docs/spec.md#rule-sessions-carry-data).
	SessionsCarryData bool
	// ClockSkew is the margin between the storage system's, the controller
	// manager's and the API server's clocks (docs/spec.md#rule-clock-skew).
	ClockSkew time.Duration
	// Superseded is one of rescue.SupersededKeep, SupersededArchive and
	// SupersededDiscard (the rescue defines the policies).
	Superseded string

	// DryRun changes nothing.
	DryRun bool
	// MarksOnly is a dry run that writes the janitor's mark annotations
	// and takes its Lease (docs/spec.md#marks-only); Load sets DryRun
	// with it.
	MarksOnly bool
	// Yes skips the confirmation before deleting.
	Yes bool

	// Output is one of OutputTable, OutputWide, OutputJSON, OutputYAML, or
	// one of kubectl's that kubeout parses (name, jsonpath=…,
	// custom-columns=…).
	Output string
	// NoHeaders drops the header row of a table (--no-headers); SortBy
	// orders the report's claims by a field path (--sort-by).
	NoHeaders bool
	SortBy    string
	// LogFormat is one of LogFormatAuto, LogFormatJSON, LogFormatConsole.
	LogFormat string
	// LogLevel is one of debug, info, warn, error.
	LogLevel string

	// PageSize is the limit of each list call.
	PageSize int64
	// APITimeout caps the retries of one API call.
	APITimeout time.Duration
	// RequestTimeout caps one request's wait for the API server's
	// response (kubectl's --request-timeout); before the server has
	// answered once, a request it leaves unanswered that long ends the run.
	RequestTimeout time.Duration

	// SnapshotClass names the VolumeSnapshotClass of rescues; empty: the
	// default class of the PV's CSI driver.
	SnapshotClass string
	// SnapshotTimeout bounds the wait for readyToUse.
	SnapshotTimeout time.Duration
	// SnapshotErrorGrace is how long a snapshot error may last before the
	// snapshot is deleted and recreated.
	SnapshotErrorGrace time.Duration
	// SnapshotAttempts bounds how often a snapshot is created.
	SnapshotAttempts int
	// SnapshotRetryBackoff is how long after a run whose attempts failed
	// the next run may try again; doubled per failed run, at most 24h.
	SnapshotRetryBackoff time.Duration

	// Concurrency is how many claims are worked on at once.
	Concurrency int
	// QPS and Burst set the client's rate limit.
	QPS   float32
	Burst int

	// MaxDeletions and MaxDeletionPercent are the blast radius (docs/spec.md#reap):
	// over either, a run deletes nothing. MaxDeletions 0 deletes nothing.
	MaxDeletions       int
	MaxDeletionPercent float64

	// LockNamespace and LockDuration configure the run's Lease.
	LockNamespace string
	LockDuration  time.Duration

	// AllowDeletePolicy makes guard accept rescues whose content has
	// deletionPolicy Delete.
	AllowDeletePolicy bool
	// Rescue makes guard run snapshot first.
	Rescue bool
	// MinClaims fails the guard when fewer claims are in scope.
	MinClaims int

	// MetricsFile receives the run's metrics in the Prometheus text format.
	MetricsFile string
	// Pushgateway is a Pushgateway URL the metrics are pushed to; it may
	// carry credentials, so it is never logged as given.
	Pushgateway string
	// NotifyWebhook receives a Slack-compatible summary when a run acted or
	// failed. It is a secret: never logged.
	NotifyWebhook string

	// KeepFor and KeepLast are the retention of the janitor's rescues
	// (docs/spec.md#retention); zero both: prune does nothing.
	KeepFor  time.Duration
	KeepLast int
	// DeleteContents lets the janitor set a Retain VolumeSnapshotContent
	// of its own snapshot to Delete before deleting the snapshot.
	DeleteContents bool

	// Prices (--price CLASS=PRICE per GiB-month, * for the rest) and
	// SnapshotPrice put money in the report; none given, no money.
	Prices        []string
	SnapshotPrice string
	// PriceTable is Prices and SnapshotPrice parsed, once, by Load.
	PriceTable cost.Prices

	// Restore (docs/spec.md#restore): by workspace, from a named snapshot, under
	// another name, beside newer data, with another class or a least size.
	RestoreWorkspace string
	RestoreFrom      string
	RestoreAs        string
	AllowOlder       bool
	StorageClass     string
	Size             string
	RestoreTimeout   time.Duration
}

// ErrUsage is matched (errors.Is) by every error of this package: a usage or
// configuration error, which the CLI reports with exit code 2 having changed
// nothing.
var ErrUsage = errors.New("usage or configuration error")

// Error is a usage or configuration error. Its message is one lower-case line
// that names the flag (or config file key, or environment variable) at
// fault, e.g. `--min-age: invalid duration "10x"`. It matches ErrUsage, and
// unwraps to its cause (for instance fs.ErrNotExist for a missing config
// file).
type Error struct {
	// Flag is the name of the flag at fault, without dashes; empty when the
	// error is about the command or several flags.
	Flag string
	// Err is the whole message, possibly wrapping a cause.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every Error match ErrUsage.
func (e *Error) Is(target error) bool { return target == ErrUsage }

// mutating reports whether the command may change the cluster.
func (c *Config) mutating() bool {
	switch c.Command {
	case CommandSnapshot, CommandReap, CommandRun:
		return true
	case CommandGuard:
		return c.Rescue
	}
	return false
}

// deleting reports whether the command may delete claims.
func (c *Config) deleting() bool {
	return c.Command == CommandReap || c.Command == CommandRun
}

// Redacted returns the configuration as flag name -> value for a debug log.
// Nothing in it is secret: the kubeconfig is a path, never its content; the
// Pushgateway's credentials and the webhook are left out.
func (c *Config) Redacted() map[string]any {
	m := map[string]any{"command": c.Command}
	for _, o := range options() {
		var v any
		switch p := o.field(c).(type) {
		case *string:
			v = *p
			if o.redact != nil {
				v = o.redact(*p)
			}
		case *bool:
			v = *p
		case *int:
			v = *p
		case *int64:
			v = *p
		case *float32:
			v = *p
		case *float64:
			v = *p
		case *time.Duration:
			v = p.String()
		case *[]string:
			v = *p
		}
		m[o.name] = v
	}
	return m
}

// redactURL drops the userinfo (credentials) of a URL for logging.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	u.User = nil
	return u.String()
}

// redactSecret shows only whether a secret is set.
func redactSecret(v string) string {
	if v == "" {
		return ""
	}
	return "<redacted>"
}
