// Command mutants is the mutation gate of the safety rules (issue 40,
// docs/testing.md#the-mutation-gate): each mutant of list.go (a condition
// removed, a comparison flipped, a boundary moved by one second, a
// constant changed) is applied to a scratch copy of a commit, never to the
// working tree, and the pure tests of the packages it names must fail. It
// exits 1 when a mutant survives, no longer applies (its search string is
// not in its file exactly once) or does not compile, and when the
// unmutated copy fails those tests.
//
//	go run ./scripts/mutants [-rev HEAD] [-run REGEXP] [-list] [-keep] [-v]
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

func main() {
	rev := flag.String("rev", "HEAD", "the commit to mutate (a copy of it; the working tree is never touched)")
	run := flag.String("run", "", "only the mutants whose ID matches this regular expression")
	list := flag.Bool("list", false, "list the mutants and exit")
	keep := flag.Bool("keep", false, "keep the scratch copy")
	verbose := flag.Bool("v", false, "print the test output of every mutant, not only of the ones that are not killed")
	timeout := flag.Duration("timeout", 5*time.Minute, "the bound on one mutant's test run")
	flag.Parse()
	if err := gate(*rev, *run, *list, *keep, *verbose, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

func gate(rev, run string, list, keep, verbose bool, timeout time.Duration) error {
	ms := mutants
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		ms = slices.DeleteFunc(slices.Clone(ms), func(m mutant) bool { return !re.MatchString(m.ID) })
	}
	if list {
		for _, m := range ms {
			fmt.Printf("%-4s %-36s %s\n", m.ID, m.File, m.Why)
		}
		return nil
	}
	if len(ms) == 0 {
		return errors.New("no mutant selected")
	}
	start := time.Now()
	root, err := output("", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pvc-janitor-mutants-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("scratch copy:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if err := extract(strings.TrimSpace(root), rev, dir); err != nil {
		return err
	}
	var pkgs []string
	for _, m := range ms {
		for _, p := range m.Pkgs {
			if !slices.Contains(pkgs, p) {
				pkgs = append(pkgs, p)
			}
		}
	}
	fmt.Printf("baseline: the pure tests of %s on %s, unmutated\n", strings.Join(pkgs, " "), rev)
	if out, err := goTest(dir, pkgs, timeout); err != nil {
		fmt.Print(out)
		return fmt.Errorf("the unmutated copy of %s fails its tests: no mutant can be judged", rev)
	}
	var killed, survived, stale, broken int
	for _, m := range ms {
		t0 := time.Now()
		verdict, by, out := try(dir, m, timeout)
		switch verdict {
		case "killed":
			killed++
		case "SURVIVED":
			survived++
		case "NOT APPLIED":
			stale++
		default:
			broken++
		}
		fmt.Printf("%-11s %-4s %-36s %5.1fs  %s\n", verdict, m.ID, m.File, time.Since(t0).Seconds(), m.Why)
		if by != "" {
			fmt.Printf("%22s by %s\n", "", by)
		}
		if verdict != "killed" || verbose {
			fmt.Print(indent(out))
		}
	}
	fmt.Printf("%d mutants: %d killed, %d survived, %d no longer apply, %d do not compile; %.0fs\n",
		len(ms), killed, survived, stale, broken, time.Since(start).Seconds())
	if killed != len(ms) {
		return fmt.Errorf("%d of %d mutants not killed", len(ms)-killed, len(ms))
	}
	return nil
}

// try applies m to the copy in dir, runs its packages' pure tests and puts
// the file back. The verdict is "killed" (by: the tests that failed),
// "SURVIVED", "NOT APPLIED" or "NO BUILD"; out is the test output.
func try(dir string, m mutant, timeout time.Duration) (verdict, by, out string) {
	path := filepath.Join(dir, m.File)
	orig, err := os.ReadFile(path)
	if err != nil {
		return "NOT APPLIED", "", err.Error() + "\n"
	}
	if n := bytes.Count(orig, []byte(m.Search)); n != 1 {
		return "NOT APPLIED", "", fmt.Sprintf("%q occurs %d times in %s, not once: update the mutant\n", m.Search, n, m.File)
	}
	mutated := bytes.Replace(orig, []byte(m.Search), []byte(m.Replace), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "NO BUILD", "", err.Error() + "\n"
	}
	defer os.WriteFile(path, orig, 0o644)
	out, err = goTest(dir, m.Pkgs, timeout)
	switch {
	case err == nil:
		return "SURVIVED", "", out
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return "NO BUILD", "", out
	}
	var tests []string
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(l, "--- FAIL: "); ok {
			tests = append(tests, strings.Fields(name)[0])
		}
	}
	if len(tests) == 0 {
		// A panic or a timeout kills it too; say which.
		tests = append(tests, "(no test named: "+firstLine(out)+")")
	}
	return "killed", strings.Join(tests, ", "), out
}

func goTest(dir string, pkgs []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append([]string{"test", "-count=1", "-failfast"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// extract writes the tree of rev into dir (git archive: committed files
// only, nothing of the working tree).
func extract(root, rev, dir string) error {
	cmd := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(pipe)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, os.FileMode(h.Mode)&0o777)
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			return err
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", rev, err, stderr.String())
	}
	return nil
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(b), nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
