package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// Load resolves the configuration for command (one of "scan", "snapshot",
// "reap", "run", "guard", "version") from the parsed flags, the environment
// (lookupEnv, e.g. os.LookupEnv; nil means os.LookupEnv) and the file named
// by --config / JANITOR_CONFIG, then completes and validates it.
//
// Precedence is flag > environment > config file > default, per setting. An
// environment variable set to the empty string counts as unset (as in
// viper), and so does a config file key whose value is null. Every error is
// a *Error.
func Load(fs *pflag.FlagSet, command string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	switch command {
	case CommandScan, CommandSnapshot, CommandReap, CommandRun, CommandGuard, CommandRestore, CommandPrune, CommandExplain, CommandVersion:
	default:
		return nil, &Error{Err: fmt.Errorf("unknown command %q", command)}
	}
	r, err := newResolver(fs, command, lookupEnv)
	if err != nil {
		return nil, err
	}
	c, err := r.complete(command)
	if err != nil {
		return nil, err
	}
	if err := validate(c, r.from); err != nil {
		return nil, err
	}
	// docs/spec.md#marks-only: a dry run in all but the marks and the
	// Lease, which the commands check MarksOnly for.
	c.DryRun = c.DryRun || c.MarksOnly
	if err := loadRoutes(c.NotifyRoutes, lookupEnv); err != nil {
		return nil, err
	}
	// Each price was checked by the option table; the table is built once.
	if c.PriceTable, err = cost.Parse(c.Prices, c.SnapshotPrice); err != nil {
		return nil, &Error{Flag: "price", Err: err}
	}
	return c, nil
}

// EnvName returns the environment variable that sets flag name, e.g.
// JANITOR_MIN_AGE for min-age.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// resolver layers the sources of one invocation in a fresh viper instance:
// flags are bound (a flag given on the command line beats everything, an
// unchanged one supplies the default), the config file is merged as viper's
// config layer, and environment values are set as overrides, but only for
// flags that were not given, so that a flag still beats the environment.
// The environment is not read through viper's AutomaticEnv because viper can
// only read the process environment, and tests inject theirs.
type resolver struct {
	v  *viper.Viper
	fs *pflag.FlagSet
	// env holds the environment values of options whose flag was not given.
	env map[string]string
	// file holds the config file's values (already type-checked).
	file     map[string]any
	filePath string
	// routes are the config file's notification routes, as decoded.
	routes []Route
}

func newResolver(fs *pflag.FlagSet, command string, lookupEnv func(string) (string, bool)) (*resolver, error) {
	r := &resolver{v: viper.New(), fs: fs, env: map[string]string{}}
	bit := commandBit(command)
	for _, o := range options() {
		f := fs.Lookup(o.name)
		switch {
		case f == nil && o.cmds&(global|bit) != 0:
			return nil, &Error{Flag: o.name, Err: fmt.Errorf("--%s is not registered: config.Register was not called", o.name)}
		case f == nil:
			// An option the command does not take: its environment
			// variable and file key still count, and are checked.
			r.v.SetDefault(o.name, o.defaultValue())
		default:
			if err := r.v.BindPFlag(o.name, f); err != nil {
				return nil, &Error{Flag: o.name, Err: fmt.Errorf("--%s: %w", o.name, err)}
			}
			if f.Changed {
				continue
			}
		}
		if val, ok := lookupEnv(EnvName(o.name)); ok && val != "" {
			r.env[o.name] = val
		}
	}
	// The file's own path comes from the flag or the environment only.
	if val, ok := r.env["config"]; ok {
		r.v.Set("config", val)
	}
	path, err := r.str("config")
	if err != nil {
		return nil, err
	}
	if path != "" {
		file, routes, err := readFile(path)
		if err != nil {
			return nil, err
		}
		r.routes = routes
		r.file, r.filePath = file, path
		layer := make(map[string]any, len(file))
		for k, v := range file {
			layer[k] = v
		}
		if err := r.v.MergeConfigMap(layer); err != nil {
			return nil, &Error{Flag: "config", Err: fmt.Errorf("config file %s: %w", path, err)}
		}
	}
	for name, val := range r.env {
		r.v.Set(name, val)
	}
	return r, nil
}

// readFile reads and type-checks the config file. An unknown key is an
// error, not a warning: a misspelt exclusion must not pass silently.
func readFile(path string) (map[string]any, []Route, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, &Error{Flag: "config", Err: fmt.Errorf("--config: %w", err)}
	}
	m, err := decodeOne(path, data)
	if err != nil {
		return nil, nil, err
	}
	var routes []Route
	if raw, ok := m[KeyNotifyRoutes]; ok {
		delete(m, KeyNotifyRoutes)
		if routes, err = decodeRoutes(path, raw); err != nil {
			return nil, nil, err
		}
	}
	if err := checkFileKeys(path, m); err != nil {
		return nil, nil, err
	}
	return m, routes, nil
}

// checkFileKeys refuses an unknown key and type-checks the others; a null
// value is dropped (the option keeps its default).
func checkFileKeys(path string, m map[string]any) error {
	kinds := map[string]valueKind{}
	var names []string
	for _, o := range options() {
		kinds[o.name] = o.kind()
		names = append(names, o.name)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "config" {
			return &Error{Flag: "config", Err: fmt.Errorf("config file %s: key \"config\" cannot be set in a config file", path)}
		}
		kd, ok := kinds[k]
		if !ok {
			hint := ""
			if s := closest(k, names); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			return &Error{Err: fmt.Errorf("config file %s: unknown key %q%s; keys are flag names", path, k, hint)}
		}
		if m[k] == nil {
			delete(m, k)
			continue
		}
		if !fileTypeOK(kd, m[k]) {
			return &Error{Flag: k, Err: fmt.Errorf("config file %s: key %q: want a %s, got %s", path, k, kindWant(kd), describe(m[k]))}
		}
	}
	return nil
}

// decodeOne decodes the config file's one YAML document, a mapping.
func decodeOne(path string, data []byte) (map[string]any, error) {
	// YAML 1.2 (yaml.v3), not 1.1: the key "yes" and a namespace called
	// "no" must stay strings. Duplicate keys are an error.
	// One document: the settings of any further one (after ---) would be
	// ignored without a word.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var m map[string]any
	if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, &Error{Flag: "config", Err: fmt.Errorf("config file %s: invalid YAML (want a mapping of flag names to values): %s", path, term.OneLine(err.Error()))}
	}
	for {
		var more any
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &Error{Flag: "config", Err: fmt.Errorf("config file %s: invalid YAML (want a mapping of flag names to values): %s", path, term.OneLine(err.Error()))}
		}
		if more != nil {
			return nil, &Error{Flag: "config", Err: fmt.Errorf("config file %s: more than one YAML document (---); put every setting in one mapping", path)}
		}
	}
	return m, nil
}

// fileTypeOK checks a config file value against the option's kind. yaml.v3
// decodes whole numbers as int and others as float64.
func fileTypeOK(k valueKind, v any) bool {
	switch k {
	case kindBool:
		_, ok := v.(bool)
		return ok
	case kindInt, kindInt64:
		_, ok := v.(int)
		return ok
	case kindFloat32, kindFloat64:
		switch v.(type) {
		case int, float64:
			return true
		}
		return false
	case kindDuration:
		switch x := v.(type) {
		case string:
			return true
		case int:
			return x == 0 // a bare 0 is unambiguous; any other number lacks a unit
		}
		return false
	case kindList:
		switch x := v.(type) {
		case string:
			return true
		case []any:
			for _, e := range x {
				if _, ok := e.(string); !ok {
					return false
				}
			}
			return true
		}
		return false
	default:
		_, ok := v.(string)
		return ok
	}
}

func kindWant(k valueKind) string {
	switch k {
	case kindDuration:
		return `duration such as "10m"`
	case kindInt, kindInt64:
		return "whole number"
	}
	return k.String()
}

// describe names a config file value's type for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case int:
		return "number " + strconv.Itoa(x)
	case float64:
		return "number " + strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// from says where a setting's value came from, for error messages: nothing
// for a flag or a default, the variable or the file otherwise.
func (r *resolver) from(name string) string {
	if f := r.fs.Lookup(name); f != nil && f.Changed {
		return ""
	}
	if _, ok := r.env[name]; ok {
		return " (from " + EnvName(name) + ")"
	}
	if _, ok := r.file[name]; ok {
		return " (from config file " + r.filePath + ")"
	}
	return ""
}

// Origin names where option name's value in c came from when it was not
// a flag, as Load's own errors do: " (from JANITOR_X)", " (from config file
// F)", or "" (a flag or a default). fs and lookupEnv are the ones c was
// loaded with. A value that is neither a flag nor in the environment is
// taken to be the file's when there is a file. (Config keeps no record of
// it: configurations are compared whole.)
func Origin(fs *pflag.FlagSet, lookupEnv func(string) (string, bool), c *Config, name string) string {
	if f := fs.Lookup(name); f != nil && f.Changed {
		return ""
	}
	if lookupEnv != nil {
		if v, ok := lookupEnv(EnvName(name)); ok && v != "" {
			return " (from " + EnvName(name) + ")"
		}
	}
	if c.ConfigFile != "" {
		return " (from config file " + c.ConfigFile + ")"
	}
	return ""
}

// rank orders where option name's value came from: 3 a flag, 2 the
// environment, 1 the config file, 0 the default.
func (r *resolver) rank(name string) int {
	switch {
	case r.fs.Lookup(name) != nil && r.fs.Lookup(name).Changed:
		return 3
	case r.env[name] != "":
		return 2
	case r.file[name] != nil:
		return 1
	}
	return 0
}

func (r *resolver) invalid(name, what string, raw any) error {
	return &Error{Flag: name, Err: fmt.Errorf("--%s: invalid %s %q%s", name, what, fmt.Sprint(raw), r.from(name))}
}

func (r *resolver) str(name string) (string, error) {
	switch x := r.v.Get(name).(type) {
	case nil:
		return "", nil
	case string:
		return strings.TrimSpace(x), nil
	default:
		return strings.TrimSpace(fmt.Sprint(x)), nil
	}
}

func (r *resolver) boolean(name string) (bool, error) {
	switch x := r.v.Get(name).(type) {
	case nil:
		return false, nil
	case bool:
		return x, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			return false, r.invalid(name, "boolean", x)
		}
		return b, nil
	default:
		return false, r.invalid(name, "boolean", x)
	}
}

func (r *resolver) integer(name string, bits int) (int64, error) {
	switch x := r.v.Get(name).(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, r.invalid(name, "integer", x)
		}
		return int64(x), nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, bits)
		if err != nil {
			return 0, r.invalid(name, "integer", x)
		}
		return n, nil
	default:
		return 0, r.invalid(name, "integer", x)
	}
}

func (r *resolver) float(name string, bits int) (float64, error) {
	var f float64
	switch x := r.v.Get(name).(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), bits); err != nil {
			return 0, r.invalid(name, "number", x)
		}
	default:
		return 0, r.invalid(name, "number", x)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, r.invalid(name, "number", f)
	}
	return f, nil
}

func (r *resolver) duration(name string) (time.Duration, error) {
	switch x := r.v.Get(name).(type) {
	case int:
		if x == 0 {
			return 0, nil
		}
		return 0, r.invalid(name, "duration", x)
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(x))
		if err != nil {
			return 0, r.invalid(name, "duration", x)
		}
		return d, nil
	default:
		return 0, r.invalid(name, "duration", x)
	}
}

// list accepts a repeated flag, a list in the file, or comma-separated text
// anywhere; it trims, drops empty items and duplicates, and keeps the order.
func (r *resolver) list(name string) ([]string, error) {
	var items []string
	switch x := r.v.Get(name).(type) {
	case nil:
	case []string:
		items = x
	case []any:
		for _, e := range x {
			items = append(items, fmt.Sprint(e))
		}
	case string:
		items = []string{x}
	default:
		return nil, r.invalid(name, "list", x)
	}
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		for _, s := range strings.Split(it, ",") {
			s = strings.TrimSpace(s)
			if s == "" || seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// complete turns every raw value into its typed field.
func (r *resolver) complete(command string) (*Config, error) {
	c := &Config{Command: command}
	for _, o := range options() {
		if err := r.set(o, o.field(c)); err != nil {
			return nil, err
		}
		if o.choices != nil {
			p := o.field(c).(*string)
			*p = strings.ToLower(*p)
		}
		if o.normalize != nil {
			p := o.field(c).(*string)
			*p = o.normalize(*p)
		}
	}
	c.ConfigFile = r.filePath
	c.NotifyRoutes = r.routes
	// -n and -A are one setting, the scope, given two ways: the one from
	// the higher source wins (flags over the environment over the file, as
	// kubectl's flags beat its kubeconfig's namespace), so that -n narrows
	// a file's all-namespaces: true. Both from one source is an error
	// (validate).
	if len(c.Namespaces) > 0 && c.AllNamespaces {
		switch ns, all := r.rank("namespace"), r.rank("all-namespaces"); {
		case ns > all:
			c.AllNamespaces = false
		case all > ns:
			c.Namespaces = nil
		}
	}
	if len(c.Contexts) == 1 {
		c.Context = c.Contexts[0]
	}
	c.Selector = labels.Everything()
	if c.SelectorString != "" {
		sel, perr := labels.Parse(c.SelectorString)
		if perr != nil {
			return nil, &Error{Flag: "selector", Err: fmt.Errorf("--selector: invalid selector %q%s: %s", c.SelectorString, r.from("selector"), term.OneLine(perr.Error()))}
		}
		c.Selector = sel
	}
	return c, nil
}

// set resolves option o into its field, dst.
func (r *resolver) set(o option, dst any) error {
	var err error
	switch p := dst.(type) {
	case *string:
		*p, err = r.str(o.name)
	case *bool:
		*p, err = r.boolean(o.name)
	case *int:
		var n int64
		n, err = r.integer(o.name, strconv.IntSize)
		*p = int(n)
	case *int64:
		*p, err = r.integer(o.name, 64)
	case *float32:
		var f float64
		f, err = r.float(o.name, 32)
		*p = float32(f)
	case *float64:
		*p, err = r.float(o.name, 64)
	case *time.Duration:
		*p, err = r.duration(o.name)
	case *[]string:
		*p, err = r.list(o.name)
	}
	return err
}

// closest returns the candidate nearest to s by edit distance, if it is near
// enough to be a plausible misspelling.
func closest(s string, candidates []string) string {
	best, bestD := "", 4
	for _, c := range candidates {
		if d := distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func mustInt(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic("config: bad default " + s)
	}
	return n
}

func mustFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic("config: bad default " + s)
	}
	return f
}
