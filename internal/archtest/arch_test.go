package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The module's path, and the packages these tests judge: every production
// package (their test files are not judged: a test may import what it
// checks against, and the cluster tests import test/).
const module = "github.com/pvc-janitor/pvc-janitor"

var patterns = []string{"./cmd/...", "./internal/..."}

// pkg is the part of `go list -json` these tests read.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

// rel is a package's path inside the module (internal/kube).
func (p *pkg) rel() string { return strings.TrimPrefix(p.ImportPath, module+"/") }

var listed struct {
	once sync.Once
	root string
	pkgs []*pkg
	err  error
}

// packages lists the production packages once per test binary, with the
// go command the test runs under (no new dependency; one `go list`).
func packages(t *testing.T) (root string, pkgs []*pkg) {
	t.Helper()
	listed.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			listed.err = err
			return
		}
		listed.root = filepath.Dir(strings.TrimSpace(string(out)))
		cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles,Imports"}, patterns...)...)
		cmd.Dir = listed.root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		if err != nil {
			listed.err = &listError{err, stderr.String()}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			p := &pkg{}
			if err := dec.Decode(p); err == io.EOF {
				break
			} else if err != nil {
				listed.err = err
				return
			}
			listed.pkgs = append(listed.pkgs, p)
		}
	})
	if listed.err != nil {
		t.Fatalf("go list: %v", listed.err)
	}
	return listed.root, listed.pkgs
}

type listError struct {
	err    error
	stderr string
}

func (e *listError) Error() string { return e.err.Error() + ": " + e.stderr }

// row is one row of docs/architecture.md's may-import table.
type row struct {
	line    int
	any     bool            // "any": every package under internal/
	imports map[string]bool // module-relative paths
}

var backticked = regexp.MustCompile("`([^`]*)`")

// mayImport reads the may-import table of docs/architecture.md (the table
// whose header is "| package | what it is | may import (internal) |"):
// for each package (module-relative), what it may import of the module.
// A cell names packages relative to internal/ in backticks; a
// parenthesized remark is prose and ignored; "none" is nothing; "any" is
// every package under internal/.
func mayImport(t *testing.T, root string) map[string]row {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table := map[string]row{}
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "| package | what it is | may import (internal) |") {
			in = true
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		if len(cells) != 3 {
			t.Fatalf("docs/architecture.md:%d: a row of the may-import table has %d cells, not 3", n, len(cells))
		}
		r := row{line: n, imports: map[string]bool{}}
		cell := strings.TrimSpace(unparen(cells[2]))
		switch {
		case cell == "none":
		case strings.HasPrefix(cell, "any"):
			r.any = true
		default:
			for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
				r.imports["internal/"+m[1]] = true
			}
			if len(r.imports) == 0 {
				t.Fatalf("docs/architecture.md:%d: may-import cell %q names no package (backticked names, none, or any)", n, cell)
			}
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			table[m[1]] = r
		}
	}
	if len(table) == 0 {
		t.Fatal("docs/architecture.md: no may-import table")
	}
	return table
}

// unparen drops the parenthesized remarks of s, nested ones included.
func unparen(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestImportsFollowTheTable: every production package has a row in
// docs/architecture.md's may-import table, imports of the module only what
// its row allows, and imports everything its row names (the table says
// what is true, not what once was).
func TestImportsFollowTheTable(t *testing.T) {
	root, pkgs := packages(t)
	table := mayImport(t, root)
	seen := map[string]bool{}
	for _, p := range pkgs {
		name := p.rel()
		seen[name] = true
		r, ok := table[name]
		if !ok {
			t.Errorf("%s has no row in docs/architecture.md's may-import table: add one", name)
			continue
		}
		got := map[string]bool{}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			got[dep] = true
			if r.any && strings.HasPrefix(dep, "internal/") || r.imports[dep] {
				continue
			}
			t.Errorf("%s imports %s, which docs/architecture.md:%d does not allow: remove the import, or change the table and say why", name, dep, r.line)
		}
		for dep := range r.imports {
			if !got[dep] {
				t.Errorf("docs/architecture.md:%d lets %s import %s, which it does not: drop it from the row", r.line, name, dep)
			}
		}
	}
	for name, r := range table {
		if !seen[name] {
			t.Errorf("docs/architecture.md:%d has a row for %s, which is no package", r.line, name)
		}
	}
}

// Who calls the API server (docs/architecture.md, "Rules that keep it this
// way"). kube builds the clients and makes the run's read (kube.Read),
// kube/wire sends the streamed GETs kube builds; the packages that act call
// it themselves for what they write and for the reads just before (the
// object about to change, the fresh re-read); janitor's guard lists the
// owners of any kind; transfer, below export and import, reviews access,
// reads CSI drivers, contents and snapshots and creates the imported
// copies. Nothing else does: not cli, and classify, retention and the
// other pure packages cannot.
var (
	apiReaders = []string{"internal/janitor", "internal/kube", "internal/kube/wire",
		"internal/lock", "internal/mark", "internal/prune", "internal/reap", "internal/rescue", "internal/restore", "internal/transfer"}
	apiWriters = []string{"internal/kube", "internal/lock", "internal/mark",
		"internal/prune", "internal/reap", "internal/rescue", "internal/restore", "internal/transfer"}
)

// The verbs of client-go's clients (typed, metadata, REST), as called:
// a context first. RESTClient() is counted wherever it is called.
var (
	readVerbs  = map[string]bool{"Get": true, "List": true, "Watch": true, "Stream": true, "DoRaw": true}
	writeVerbs = map[string]bool{"Create": true, "Update": true, "UpdateStatus": true, "Patch": true,
		"Delete": true, "DeleteCollection": true}
)

// apiCalls finds a package's calls of the API server in its production
// files, by their shape: a verb whose first argument is a context (ctx,
// or a field or variable named so), a rest.Request's Do(ctx), or a
// RESTClient() call. It reads syntax only, so that it needs no type
// checking of client-go; the shape is the one every call site uses.
func apiCalls(t *testing.T, fset *token.FileSet, p *pkg) (reads, writes []string) {
	t.Helper()
	// One call chain (RESTClient().Get()…Do(ctx)) is one call: it is
	// found once per position.
	seen := map[token.Pos]bool{}
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			verb := sel.Sel.Name
			if seen[call.Pos()] {
				return true
			}
			where := fset.Position(call.Pos()).String()
			seen[call.Pos()] = true
			switch {
			case verb == "RESTClient" && len(call.Args) == 0:
				reads = append(reads, where)
			case len(call.Args) == 0 || !isContext(call.Args[0]):
				delete(seen, call.Pos())
			case readVerbs[verb] || verb == "Do" && len(call.Args) == 1:
				reads = append(reads, where)
			case writeVerbs[verb]:
				writes = append(writes, where)
			default:
				delete(seen, call.Pos())
			}
			return true
		})
	}
	return reads, writes
}

// isContext reports whether e names a context by the project's names (ctx,
// wctx, s.wctx).
func isContext(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.HasSuffix(strings.ToLower(e.Name), "ctx")
	case *ast.SelectorExpr:
		return strings.HasSuffix(strings.ToLower(e.Sel.Name), "ctx")
	}
	return false
}

// TestWhoCallsTheAPIServer: exactly the packages the rule names call the
// API server, for reads and for writes.
func TestWhoCallsTheAPIServer(t *testing.T) {
	_, pkgs := packages(t)
	fset := token.NewFileSet()
	var readers, writers []string
	for _, p := range pkgs {
		reads, writes := apiCalls(t, fset, p)
		name := p.rel()
		if len(reads) > 0 {
			readers = append(readers, name)
			if !slices.Contains(apiReaders, name) {
				t.Errorf("%s reads from the API server, which docs/architecture.md does not allow it (%s): read through kube, or change the rule and say why",
					name, strings.Join(reads, ", "))
			}
		}
		if len(writes) > 0 {
			writers = append(writers, name)
			if !slices.Contains(apiWriters, name) {
				t.Errorf("%s writes to the API server, which docs/architecture.md does not allow it (%s)", name, strings.Join(writes, ", "))
			}
		}
		if name != "internal/kube" && len(reads)+len(writes) > 0 {
			t.Logf("%s: %d reads, %d writes", name, len(reads), len(writes))
		}
	}
	for _, want := range apiReaders {
		if !slices.Contains(readers, want) {
			t.Errorf("%s no longer reads from the API server: drop it from apiReaders and from docs/architecture.md's rule", want)
		}
	}
	for _, want := range apiWriters {
		if !slices.Contains(writers, want) {
			t.Errorf("%s no longer writes to the API server: drop it from apiWriters and from docs/architecture.md's rule", want)
		}
	}
}

// onlyIn names, for a package (outside the module, but for the loop
// tests' API stub), the only production packages that may import it: flags
// and the command line are cli's (and the option table's, config), the
// terminal is term's, the logger is not the classifier's, a REST config
// is kube's (and the API stub's, whose clients connect to it); the API
// stub is the tests' only (none).
var onlyIn = map[string][]string{
	module + "/internal/apistub":       nil,
	"github.com/spf13/cobra":           {"internal/cli"},
	"github.com/spf13/pflag":           {"internal/cli", "internal/config"},
	"github.com/spf13/viper":           {"internal/config"},
	"github.com/mattn/go-isatty":       {"internal/term"},
	"golang.org/x/term":                {"internal/term"},
	"k8s.io/client-go/rest":            {"internal/kube", "internal/kube/wire", "internal/apistub"},
	"k8s.io/client-go/metadata":        {"internal/kube"},
	"k8s.io/client-go/tools/clientcmd": {"internal/kube", "internal/fleet"},
}

// pure are the packages docs/architecture.md calls pure: no client, no
// clock, no logger (the caller passes the API server's time in).
var pure = []string{"internal/classify", "internal/retention", "internal/inventory", "internal/cost",
	"internal/bundle", "internal/kubeout", "internal/msgtmpl", "internal/endpoint"}

// clockCalls are the time package's functions that read the host's clock
// or wait on it.
var clockCalls = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}

// TestFlagsTerminalsClocksAndExit: the command line, the terminal and the
// process exit stay in cli (os.Exit only in cli.Main), and the pure
// packages take no client, clock or logger.
func TestFlagsTerminalsClocksAndExit(t *testing.T) {
	_, pkgs := packages(t)
	fset := token.NewFileSet()
	for _, p := range pkgs {
		name := p.rel()
		for _, imp := range p.Imports {
			if allowed, ok := onlyIn[imp]; ok && !slices.Contains(allowed, name) {
				t.Errorf("%s imports %s, which only %v may (docs/architecture.md)", name, imp, allowed)
			}
			if slices.Contains(pure, name) && (imp == "github.com/rs/zerolog" || imp == module+"/internal/kube" ||
				strings.HasPrefix(imp, "k8s.io/client-go/") && imp != "k8s.io/client-go/util/jsonpath") {
				t.Errorf("%s is pure but imports %s", name, imp)
			}
		}
		for _, file := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, file), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				where := fset.Position(sel.Pos())
				switch {
				case x.Name == "os" && sel.Sel.Name == "Exit" && !(name == "internal/cli" && file == "main.go"):
					t.Errorf("%s: os.Exit outside cli.Main", where)
				case x.Name == "time" && clockCalls[sel.Sel.Name] && slices.Contains(pure, name):
					t.Errorf("%s: time.%s in pure package %s: take the time as an argument", where, sel.Sel.Name, name)
				}
				return true
			})
		}
	}
}
