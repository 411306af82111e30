//go:build integration

package cli_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestREADMEQuickStart runs the README's quick start (the block after
// <!-- quick-start -->) against the local cluster, as written but for the
// namespace (-A becomes the test's), the selector and the claim, so that
// the commands the README gives a new operator cannot drift from the CLI
// (issue 39). Each must exit 0.
func TestREADMEQuickStart(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces"}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- quick-start -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no <!-- quick-start --> sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	var cmds [][]string
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] != "janitor" {
			t.Fatalf("quick start line %q does not run janitor", line)
		}
		var args []string
		for _, a := range fields[1:] {
			switch a {
			case "-A":
				args = append(args, "-n", ns)
			case "app=ide":
				args = append(args, wsSel)
			case "team-a/claim-alice":
				args = append(args, ns+"/ws-a")
			default:
				args = append(args, a)
			}
		}
		cmds = append(cmds, args)
	}
	if len(cmds) < 3 {
		t.Fatalf("the quick start has %d commands, want the read-only ones, a dry run and acting", len(cmds))
	}
	for _, args := range cmds {
		code, out, stderr := run(t, args...)
		if code != 0 {
			t.Errorf("janitor %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, stderr)
			continue
		}
		if args[0] != "run" && !strings.Contains(out, "ws-a") {
			t.Errorf("janitor %s: the output does not name ws-a:\n%s", strings.Join(args, " "), out)
		}
	}
}
