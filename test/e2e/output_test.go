//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestKubectlOutputs (issue 28): -o jsonpath, custom-columns and name,
// --no-headers and --sort-by behave as kubectl's on a real scan, and a bad
// expression exits 2 with kubectl's message and writes nothing.
func TestKubectlOutputs(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "w"}
	for _, c := range []testenv.ClaimSpec{{Name: "ws-c"}, {Name: "ws-b", Unbound: true}, {Name: "ws-a"}} {
		c.Namespace, c.Labels = ns, labels
		if _, err := f.BoundClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(extra ...string) (int, string, string) {
		return run(t, append([]string{"scan", "-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s"}, extra...)...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run", "-o", "jsonpath={.claims[*].name}", "--sort-by", "{.name}"}, "ws-a ws-b ws-c"},
		{[]string{"--dry-run", "-o", "jsonpath={range .claims[*]}{.name}={.state}{\"\\n\"}{end}", "--sort-by", ".state"},
			"ws-a=Grace\nws-c=Grace\nws-b=Unbound\n"},
		{[]string{"--dry-run", "-o", "custom-columns=NAME:.name,STATE:.state,NONE:.nothing", "--sort-by", "name"},
			"NAME   STATE     NONE\nws-a   Grace     <none>\nws-b   Unbound   <none>\nws-c   Grace     <none>\n"},
		{[]string{"--dry-run", "-o", "custom-columns=NAME:.name", "--no-headers"}, "ws-a\nws-b\nws-c\n"},
		// -o name: the claims the scan would mark (docs/spec.md#output-formats),
		// not the Unbound ws-b it leaves alone.
		{[]string{"--dry-run", "-o", "name"}, "persistentvolumeclaim/ws-a\npersistentvolumeclaim/ws-c\n"},
	} {
		code, out, stderr := scan(tc.args...)
		if code != 0 || out != tc.want {
			t.Errorf("scan %v: exit %d\n%q\nwant\n%q\n%s", tc.args, code, out, tc.want, stderr)
		}
	}
	// --no-headers on the table: the rows only, no header, no summary.
	code, out, _ := scan("--dry-run", "--no-headers")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 3 || strings.Contains(out, "NAMESPACE") || !strings.HasPrefix(lines[0], ns+" ") {
		t.Errorf("--no-headers: exit %d\n%s", code, out)
	}
	// Bad expressions: exit 2, kubectl's message, and nothing written
	// (a scan without --dry-run would mark the orphans).
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-o", "jsonpath={.claims[*}"}, "error: error parsing jsonpath {.claims[*}, unterminated array"},
		{[]string{"-o", "custom-columns=NAME"}, "error: unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"},
		{[]string{"-o", "xml"}, `error: unable to match a printer suitable for the output format "xml"`},
		{[]string{"--sort-by", "{.a[}"}, "error: error parsing jsonpath {.a[}"},
	} {
		code, out, stderr := scan(tc.args...)
		if code != 2 || out != "" || !strings.HasPrefix(strings.TrimSpace(stderr), tc.msg) {
			t.Errorf("scan %v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, stderr, tc.msg)
		}
	}
	l, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Items {
		for k := range c.Annotations {
			if strings.HasPrefix(k, "pvc-janitor.io/") {
				t.Errorf("a refused scan wrote %s on %s", k, c.Name)
			}
		}
	}
}
