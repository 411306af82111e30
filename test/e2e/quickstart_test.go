//go:build integration

package cli_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestREADMEQuickStart runs the README's quick start (the block after
// <!-- quick-start -->) against the local cluster, as written but for the
// namespace (-A becomes the test's), the selector and the claim, so that
// the commands the README gives a new operator cannot drift from the CLI
// (issue 39). Each must exit 0, in the order the README promises:
// read-only first (nothing written), then the chart's preview (run
// --marks-only: no label, and a report that says marks only), then acting.
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
	// The stages, in order: read-only, the preview, acting.
	stage := func(args []string) int {
		switch {
		case slices.Contains(args, "--marks-only"):
			return 1
		case slices.Contains(args, "--yes"):
			return 2
		case args[0] == "explain" || slices.Contains(args, "--dry-run"):
			return 0
		}
		return -1
	}
	seen := map[int]bool{}
	last := 0
	for _, args := range cmds {
		s := stage(args)
		if s < last {
			t.Fatalf("janitor %s comes after a later stage: read-only first, then the preview, then acting", strings.Join(args, " "))
		}
		last, seen[s] = s, true
	}
	if !seen[0] || !seen[1] || !seen[2] || seen[-1] {
		t.Fatalf("the quick start's stages %v: want read-only commands, the chart's preview (run --marks-only) and acting, nothing else", seen)
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
		cl, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, marked := cl.Annotations[inventory.AnnotationOrphanedSince]
		_, labelled := cl.Labels[inventory.LabelPhase]
		switch stage(args) {
		case 0:
			if marked || labelled {
				t.Errorf("janitor %s (read-only) wrote on ws-a: %v %v", strings.Join(args, " "), cl.Annotations, cl.Labels)
			}
		case 1:
			// ws-a is younger than the default min-age: it gets no
			// mark yet (TestMarksOnlyPreviewShowsWhatRunWouldDo has
			// one that does); never a label.
			if labelled || !strings.Contains(out, "(marks only: nothing but the janitor's marks was written)") {
				t.Errorf("janitor %s: ws-a labelled %t; the report:\n%s", strings.Join(args, " "), labelled, out)
			}
		}
	}
}
