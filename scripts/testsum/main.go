// Command testsum runs `go test -json` and prints what a plain `go test`
// prints (each package's ok/FAIL line, and the whole output of a failing
// test or package), then a summary a reader cannot miss: every skipped test
// with its reason, and one closing line "N passed, N failed, N skipped".
// Its exit code is go test's (1 when go test passed but the summary holds a
// failure it saw, or a -run expression selected no test at all).
//
// make test runs its go test commands through it, so that a test skipped
// for a missing precondition is said in the run's summary, never hidden in
// a verbose log (docs/testing.md).
//
// Usage: go run ./scripts/testsum [go test flags and packages]
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
)

func main() {
	args := append([]string{"test", "-json"}, os.Args[1:]...)
	cmd := exec.Command("go", args...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testsum: %v\n", err)
		os.Exit(1)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testsum: start go test: %v\n", err)
		os.Exit(1)
	}
	s := newSummary(os.Stdout)
	s.read(out)
	werr := cmd.Wait()
	s.close()
	code, why := verdict(os.Args[1:], s, werr)
	if why != "" {
		fmt.Fprintln(os.Stderr, "testsum:", why)
	}
	os.Exit(code)
}

// verdict is testsum's exit code: go test's, or 1 when go test passed but
// the summary holds a failure, or a -run expression selected no test at
// all (a renamed test or a typo would otherwise pass having run nothing;
// -run '^$', which selects none on purpose, is the exception).
func verdict(args []string, s *summary, werr error) (int, string) {
	if werr != nil {
		if ee, ok := werr.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			return ee.ExitCode(), ""
		}
		return 1, ""
	}
	if s.failed > 0 {
		return 1, ""
	}
	if expr, ok := runExpr(args); ok && expr != "^$" && s.passed+s.failed+s.skipped == 0 {
		return 1, fmt.Sprintf("-run %q selects no test", expr)
	}
	return 0, ""
}

// runExpr is the -run expression among go test's arguments, if any (the
// last one, as the flag package takes it).
func runExpr(args []string) (string, bool) {
	expr, found := "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-args" || a == "--args" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "run" && name != "test.run") {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				break
			}
			i++
			val = args[i]
		}
		expr, found = val, true
	}
	return expr, found
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a test's pass or fail
}

type key struct{ pkg, test string }

// summary turns the event stream into go test's plain output plus a summary.
type summary struct {
	w                       io.Writer
	output                  map[key][]string // output so far of each running test and package
	skips                   []string
	passed, failed, skipped int
	slow                    []timed        // top-level tests that took slowAt or more
	fails                   []string       // each failing top-level test (or package) with the last line it logged
	subErr                  map[key]string // the last logged line of a failed subtest, by its top-level test
}

// timed is a test that took slowAt or more, for the line that names the
// slowest (where make test's time goes; docs/testing.md).
type timed struct {
	name    string
	elapsed float64
}

const slowAt, slowShown = 30.0, 10

func newSummary(w io.Writer) *summary {
	return &summary{w: w, output: map[key][]string{}, subErr: map[key]string{}}
}

func (s *summary) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(s.w, line) // not an event: say it as it came
			continue
		}
		s.event(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(s.w, "testsum: reading go test's output: %v\n", err)
		s.failed++
	}
}

func (s *summary) event(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
	case "output":
		if e.Test == "" && isResultLine(e.Output) {
			fmt.Fprint(s.w, e.Output)
			return
		}
		s.output[k] = append(s.output[k], e.Output)
	case "pass":
		if topLevel(e.Test) {
			s.passed++
			s.noteSlow(e)
		}
		delete(s.output, k)
	case "skip":
		if e.Test == "" {
			delete(s.output, k) // a package without test files
			return
		}
		if topLevel(e.Test) {
			s.skipped++
		}
		s.skips = append(s.skips, e.Package+" "+e.Test+": "+reason(s.output[k]))
		delete(s.output, k)
	case "fail":
		if topLevel(e.Test) {
			s.failed++
			s.noteSlow(e)
			why := lastLogged(s.output[k])
			if sub, ok := s.subErr[k]; ok && why == noOutput {
				why = sub
			}
			s.fails = append(s.fails, path.Base(e.Package)+" "+e.Test+": "+why)
		} else if e.Test != "" {
			top := key{e.Package, strings.SplitN(e.Test, "/", 2)[0]}
			if _, ok := s.subErr[top]; !ok {
				s.subErr[top] = e.Test + ": " + lastLogged(s.output[k])
			}
		} else if e.Test == "" && !s.sawFailIn(e.Package) {
			s.fails = append(s.fails, path.Base(e.Package)+" (the package itself): "+lastLogged(s.output[k]))
		}
		// A failing test's output is printed whole, as go test does; a
		// failing package's too (its TestMain, a panic, a timeout).
		fmt.Fprint(s.w, strings.Join(s.output[k], ""))
		delete(s.output, k)
	}
}

func (s *summary) noteSlow(e event) {
	if e.Elapsed >= slowAt {
		s.slow = append(s.slow, timed{path.Base(e.Package) + " " + e.Test, e.Elapsed})
	}
}

// sawFailIn reports whether a test of pkg has failed already, so that a
// package's own FAIL is named only when no test of it explains it (a
// panic, a timeout, TestMain).
func (s *summary) sawFailIn(pkg string) bool {
	for _, f := range s.fails {
		if strings.HasPrefix(f, path.Base(pkg)+" ") {
			return true
		}
	}
	return false
}

// lastLogged is the last message a failing test logged through testing
// (file_test.go:N: ..., with the lines of a multi-line message joined by
// " | ") or a panic; else its last line. A t.Fatal is the last thing a
// test logs, and the logs before it are often progress (TestChaos logs
// each disturbance), so the last message is the likeliest cause. The
// closing "failed" line carries it, so that the tail of a long log (all
// CI may keep) says what failed and why.
func lastLogged(lines []string) string {
	var found []string
	last := noOutput
	inMsg := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") || t == "FAIL" {
			inMsg = false
			continue
		}
		switch {
		case strings.HasPrefix(t, "panic:"):
			return clip(t)
		case errLine.MatchString(t):
			found, inMsg = []string{t}, true
		case inMsg && strings.HasPrefix(l, "        "):
			found = append(found, t) // testing indents a message's later lines
		default:
			inMsg = false
		}
		last = t
	}
	if len(found) > 0 {
		return clip(strings.Join(found, " | "))
	}
	return clip(last)
}

const noOutput = "no output"

// errLine is how testing prints a t.Error or t.Fatal: "name_test.go:123: ".
var errLine = regexp.MustCompile(`^[\w.-]+_test\.go:\d+: `)

func clip(s string) string {
	const most = 400
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}

// topLevel reports whether test is a test function (subtests are counted
// through their test, but each skipped one is listed).
func topLevel(test string) bool { return test != "" && !strings.Contains(test, "/") }

// isResultLine reports whether a package-level line is go test's own
// result line for the package.
func isResultLine(out string) bool {
	for _, p := range []string{"ok  \t", "FAIL\t", "?   \t", "--- FAIL", "FAIL\n", "PASS\n"} {
		if strings.HasPrefix(out, p) {
			return p != "PASS\n" && p != "FAIL\n"
		}
	}
	return false
}

// reason is the last line a skipped test logged before its "--- SKIP".
func reason(lines []string) string {
	r := "no reason given"
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		r = t
	}
	return r
}

func (s *summary) close() {
	// Output of tests that never ended (a crash, a timeout) is evidence.
	var left []key
	for k := range s.output {
		if k.test != "" {
			left = append(left, k)
		}
	}
	sort.Slice(left, func(i, j int) bool { return left[i].pkg+left[i].test < left[j].pkg+left[j].test })
	for _, k := range left {
		fmt.Fprintf(s.w, "%s %s did not finish; its output:\n%s", k.pkg, k.test, strings.Join(s.output[k], ""))
	}
	if len(s.skips) > 0 {
		fmt.Fprintf(s.w, "skipped tests (%d), each with its reason:\n", len(s.skips))
		for _, l := range s.skips {
			fmt.Fprintf(s.w, "  SKIP %s\n", l)
		}
	}
	if len(s.slow) > 0 {
		sort.SliceStable(s.slow, func(i, j int) bool { return s.slow[i].elapsed > s.slow[j].elapsed })
		var parts []string
		for _, t := range s.slow[:min(len(s.slow), slowShown)] {
			parts = append(parts, fmt.Sprintf("%s %.0f s", t.name, t.elapsed))
		}
		fmt.Fprintf(s.w, "slowest tests (%d took %.0f s or more): %s\n", len(s.slow), slowAt, strings.Join(parts, ", "))
	}
	if len(s.fails) > 0 {
		fmt.Fprintf(s.w, "failed (%d), each with the last line it logged:\n", len(s.fails))
		for _, f := range s.fails {
			fmt.Fprintf(s.w, "  FAIL %s\n", f)
		}
	}
	fmt.Fprintf(s.w, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, s.skipped)
}
