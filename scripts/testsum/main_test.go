package main

import (
	"strings"
	"testing"
)

func TestSummary(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"p"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:1: quiet on success\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":31.5}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: SKIPPED: not root\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC/one","Output":"    c_test.go:2: iteration 1: a progress line\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC/one","Output":"    c_test.go:3: want 1, got 2\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC/one","Output":"        the message's second line\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC/one"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"--- FAIL: TestC (0.01s)\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC","Elapsed":45}`,
		`{"Action":"output","Package":"p","Output":"control plane log line\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.02s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`# p [p.test]`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}`,
		`{"Action":"pass","Package":"q"}`,
		`{"Action":"skip","Package":"r"}`,
	}, "\n")
	var out strings.Builder
	s := newSummary(&out)
	s.read(strings.NewReader(stream))
	s.close()
	got := out.String()
	for _, want := range []string{
		"want 1, got 2", "--- FAIL: TestC", "control plane log line", "FAIL\tp\t0.02s\n", "# p [p.test]\n",
		"ok  \tq\t0.01s\n", "skipped tests (1), each with its reason:\n  SKIP p TestB: b_test.go:9: SKIPPED: not root\n",
		"slowest tests (2 took 30 s or more): p TestC 45 s, p TestA 32 s\n" +
			"failed (1), each with the last line it logged:\n  FAIL p TestC: TestC/one: c_test.go:3: want 1, got 2 | the message's second line\n" +
			"1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "quiet on success") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

// TestVerdictNoTestSelected: a -run expression that selects no test fails
// the run (issue 40); -run '^$', which selects none on purpose, does not,
// nor a run without -run.
func TestVerdictNoTestSelected(t *testing.T) {
	ran := &summary{passed: 1}
	none := &summary{}
	for _, c := range []struct {
		args []string
		s    *summary
		code int
		why  string
	}{
		{[]string{"-run", "^TestTypo$", "./..."}, none, 1, `-run "^TestTypo$" selects no test`},
		{[]string{"-count=1", "-run=^TestTypo$", "./p/"}, none, 1, `-run "^TestTypo$" selects no test`},
		{[]string{"--run", "X", "./p/"}, none, 1, `-run "X" selects no test`},
		{[]string{"-run", "^TestA$", "./..."}, ran, 0, ""},
		{[]string{"-run", "^TestSkipped$", "./..."}, &summary{skipped: 1}, 0, ""},
		{[]string{"-run", "^$", "-bench", ".", "./p/"}, none, 0, ""},
		{[]string{"-count=1", "./..."}, none, 0, ""},
		{[]string{"-count=1", "./p/", "-args", "-run"}, none, 0, ""},
		{[]string{"-run", "^TestA$"}, &summary{passed: 1, failed: 1}, 1, ""},
	} {
		code, why := verdict(c.args, c.s, nil)
		if code != c.code || why != c.why {
			t.Errorf("verdict(%q) = %d %q, want %d %q", c.args, code, why, c.code, c.why)
		}
	}
}

// TestFailedLineNamesAPackageFailure: a package that fails with no failed
// test (a TestMain that could not start its cluster, a build error of the
// test binary) is named in the closing "failed" list with the panic.
func TestFailedLineNamesAPackageFailure(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"x/e2e"}`,
		`{"Action":"output","Package":"x/e2e","Output":"panic: etcd did not start: port in use\n"}`,
		`{"Action":"output","Package":"x/e2e","Output":"FAIL\tx/e2e\t3.1s\n"}`,
		`{"Action":"fail","Package":"x/e2e"}`,
	}, "\n")
	var out strings.Builder
	s := newSummary(&out)
	s.read(strings.NewReader(stream))
	s.close()
	want := "failed (1), each with the last line it logged:\n  FAIL e2e (the package itself): panic: etcd did not start: port in use\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, out.String())
	}
}
