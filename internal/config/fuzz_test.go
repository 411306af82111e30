package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
)

// Fuzz targets for everything an operator types: the config file, the
// command line, the environment and the selector. Whatever the input, Load
// never panics, and either returns a configuration that validates (with a
// selector that means on the API server what it meant here, and never an
// empty one for a mutating command without --all-claims) or a single-line
// *Error that matches ErrUsage (exit 2, nothing changed). Seed corpora are
// in testdata/fuzz/<FuzzName>/; `go test` runs them as regression tests,
// `go test -fuzz '^FuzzLoadFile$' -fuzztime 5s ./internal/config/` explores.

// fuzzCommands are every command Load knows (TestFuzzCoversEveryCommand).
var fuzzCommands = []string{CommandScan, CommandSnapshot, CommandReap, CommandRun, CommandGuard, CommandRestore, CommandPrune,
	CommandExplain, CommandVersion}

func noEnv(string) (string, bool) { return "", false }

// checkLoad asserts the contract of Load on one input.
func checkLoad(t *testing.T, command string, c *Config, err error) {
	t.Helper()
	if err != nil {
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrUsage) {
			t.Fatalf("error %q (%T) is not a *Error matching ErrUsage", err, err)
		}
		msg := err.Error()
		if msg == "" || strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("error is not one non-empty line: %q", msg)
		}
		return
	}
	if c == nil {
		t.Fatal("no error and no configuration")
	}
	if c.Command != command {
		t.Fatalf("command %q, want %q", c.Command, command)
	}
	if verr := c.Validate(); verr != nil {
		t.Fatalf("Load accepted a configuration that does not validate: %v", verr)
	}
	if c.Selector == nil {
		t.Fatal("nil selector")
	}
	if c.mutating() && c.Selector.Empty() && !c.AllClaims {
		t.Fatalf("%s accepted with an empty selector %q and no --all-claims", command, c.SelectorString)
	}
	// The selector is sent to the API server as Selector.String(): it must
	// parse there to the very same selector, or the server would select
	// other claims than the ones validated here.
	again, perr := labels.Parse(c.Selector.String())
	if perr != nil {
		t.Fatalf("selector %q (from %q) does not parse again: %v", c.Selector.String(), c.SelectorString, perr)
	}
	if again.String() != c.Selector.String() {
		t.Fatalf("selector %q (from %q) re-parses as %q", c.Selector.String(), c.SelectorString, again.String())
	}
	if c.MinAge < 0 || c.GracePeriod < 0 || c.APITimeout <= 0 || c.PageSize < 0 || c.Concurrency < 1 {
		t.Fatalf("out-of-range values accepted: %+v", c)
	}
	if c.DryRun && c.Yes {
		t.Fatal("--dry-run and --yes accepted together")
	}
}

func newFlags(t *testing.T, args []string) (*pflag.FlagSet, bool) {
	t.Helper()
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	Register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, false // pflag's own error: the CLI maps it to exit 2
	}
	// --config names a file to read: a fuzzed path could be /dev/zero.
	if fs.Lookup("config").Changed {
		return nil, false
	}
	return fs, true
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// FuzzLoadFile: arbitrary config file content.
func FuzzLoadFile(f *testing.F) {
	f.Add("selector: app=ide\nall-namespaces: true\nexclude-namespace: [kube-system]\n")
	f.Add("min-age: 10m\ngrace-period: 30m\npage-size: 500\n")
	f.Add("{not yaml")
	f.Add("- a\n- b\n")
	f.Add("min-agee: 1m\n")
	f.Add("a: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n")
	f.Add("qps: .nan\nmax-deletion-percent: .inf\n")
	f.Add("page-size: 0x10\nconcurrency: 1e3\n")
	f.Add("namespace: no\nyes: true\n")
	f.Add("selector: !!binary aGVsbG8=\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content string) {
		path := filepath.Join(dir, "janitor.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, command := range fuzzCommands {
			fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
			Register(fs)
			if err := fs.Parse([]string{"--config", path}); err != nil {
				t.Fatal(err)
			}
			c, err := Load(fs, command, noEnv)
			checkLoad(t, command, c, err)
		}
	})
}

// FuzzLoadFlags: an arbitrary command line (one argument per line) for any
// command.
func FuzzLoadFlags(f *testing.F) {
	f.Add(uint8(0), "-n\nws\n-l\napp=ide\n--min-age\n10m")
	f.Add(uint8(3), "--yes\n-l\napp=ide\n--dry-run")
	f.Add(uint8(0), "-A\n-n\nx")
	f.Add(uint8(1), "-l\n \n--page-size\n0")
	f.Add(uint8(3), "--all-claims\n--superseded\ndiscard\n--yes")
	f.Add(uint8(4), "--rescue\n-l\napp in (a,b)\n--max-deletion-percent\nNaN")
	f.Add(uint8(2), "-l\n!app,env notin (prod)\n--workspace-label\nexample.com/ws")
	f.Add(uint8(0), "--exclude-namespace\na,,b,a\n--lock-namespace\nUPPER")
	f.Add(uint8(6), "--keep-last\n3\n--keep-for\n-1h\n--delete-contents\n--yes")
	f.Add(uint8(5), "--from\nws-rescue\n--as\nNot_A_Name\n--allow-older")
	f.Add(uint8(7), "-n\nws\n--keep-last\n1\n-o\njson")
	f.Fuzz(func(t *testing.T, cmd uint8, argv string) {
		command := fuzzCommands[int(cmd)%len(fuzzCommands)]
		fs, ok := newFlags(t, strings.Split(argv, "\n"))
		if !ok {
			return
		}
		c, err := Load(fs, command, noEnv)
		checkLoad(t, command, c, err)
	})
}

// FuzzLoadEnv: arbitrary JANITOR_* environment (one NAME=value per line;
// the prefix is added when missing).
func FuzzLoadEnv(f *testing.F) {
	f.Add(uint8(3), "SELECTOR=app=ide\nYES=true\nMIN_AGE=1h")
	f.Add(uint8(0), "ALL_NAMESPACES=maybe")
	f.Add(uint8(0), "QPS=1e400\nBURST=-1")
	f.Add(uint8(3), "SELECTOR=   \nALL_CLAIMS=false\nYES=1")
	f.Add(uint8(0), "NAMESPACE=a,b\nALL_NAMESPACES=TRUE")
	f.Add(uint8(1), "SNAPSHOT_TIMEOUT=0\nGRACE_PERIOD=-0s")
	f.Add(uint8(6), "KEEP_LAST=-1\nDELETE_CONTENTS=yes")
	f.Add(uint8(5), "FROM=\nAS=ws\nALLOW_OLDER=true")
	f.Fuzz(func(t *testing.T, cmd uint8, text string) {
		command := fuzzCommands[int(cmd)%len(fuzzCommands)]
		env := map[string]string{}
		for _, line := range strings.Split(text, "\n") {
			k, v, _ := strings.Cut(line, "=")
			if !strings.HasPrefix(k, EnvPrefix) {
				k = EnvPrefix + k
			}
			env[k] = v
		}
		delete(env, EnvName("config")) // a fuzzed path could be /dev/zero
		fs, ok := newFlags(t, nil)
		if !ok {
			t.Fatal("no flags")
		}
		c, err := Load(fs, command, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		checkLoad(t, command, c, err)
	})
}

// FuzzSelector: any --selector, for a mutating command (where an empty one
// must be refused) and a read-only one.
func FuzzSelector(f *testing.F) {
	for _, s := range []string{"app=ide", "", " ", "a in (b", "!a", "a,b!=c", "x notin (a,b),y", "a=(b", "a==b", "k8s.io/x=y",
		"a in ()", "a=b,,c", "=", "a=b c", "!a,!b,c in (d)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sel string) {
		for _, command := range fuzzCommands {
			fs, ok := newFlags(t, []string{"--selector", sel})
			if !ok {
				return
			}
			c, err := Load(fs, command, noEnv)
			checkLoad(t, command, c, err)
		}
	})
}

// TestFuzzCoversEveryCommand: the fuzzers load for every command that has
// options of its own (commandBits) and for version; a command added there
// and not to fuzzCommands would go unfuzzed.
func TestFuzzCoversEveryCommand(t *testing.T) {
	want := []string{CommandVersion}
	for _, cb := range commandBits {
		want = append(want, cb.name)
	}
	for _, c := range want {
		if !slices.Contains(fuzzCommands, c) {
			t.Errorf("the fuzzers do not load %q", c)
		}
	}
}

// TestConfigFileOfSeveralDocumentsIsRejected: YAML allows several
// documents in one file; the janitor reads the first. A setting in any
// other document (an exclusion, say) would be ignored without a word,
// which is what strict keys are there to prevent.
func TestConfigFileOfSeveralDocumentsIsRejected(t *testing.T) {
	for _, content := range []string{
		"min-age: 1m\n---\nexclude-namespace: [kube-system]\n",
		"---\n---\nexclude-namespace: [kube-system]\n",
	} {
		path := filepath.Join(t.TempDir(), "janitor.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		fs, _ := newFlags(t, nil)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		c, err := Load(fs, CommandScan, noEnv)
		if err == nil {
			t.Errorf("%q: accepted; exclude-namespace = %v: the second document was silently ignored", content, c.ExcludeNamespaces)
		}
	}
}
