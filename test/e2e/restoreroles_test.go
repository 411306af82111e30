//go:build integration

package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestRestoreWorkspaceBringsBackEveryRole (issue 41 item 4,
// docs/spec.md#restore-roles) on real bytes: a workspace with a home and a
// data claim, each labelled with its role, is rescued and reaped; restore
// --workspace with --volume-label brings both back, each from its own
// rescue under its own name, each holding its own bytes. Without
// --volume-label the same restore brings back one claim; with --as and two
// roles it is refused (exit 2, nothing written).
func TestRestoreWorkspaceBringsBackEveryRole(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	text := map[string]string{"w-home": "dotfiles and notes", "w-data": "a dataset"}
	for name, role := range map[string]string{"w-home": "home", "w-data": "data"} {
		labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "a", "volume": role}
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: labels}); err != nil {
			t.Fatal(err)
		}
		if err := f.WriteVolume(ctx, ns, name, "notes.txt", []byte(text[name])); err != nil {
			t.Fatal(err)
		}
	}
	for name := range text {
		idle(t, f, ns, name)
	}
	nextSecond(time.Now())
	gone := func(name string) bool {
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	for i := 0; i < 3 && !(gone("w-home") && gone("w-data")); i++ {
		if code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 {
			t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
		}
		for end := time.Now().Add(time.Minute); time.Now().Before(end) && !(gone("w-home") && gone("w-data")); {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !gone("w-home") || !gone("w-data") {
		t.Fatal("the workspace's claims were not both rescued and reaped")
	}
	restore := func(args ...string) (int, string, string) {
		return run(t, append([]string{"restore", "-n", ns, "--workspace-label", "workspace", "--min-age", "0s", "-o", "json"}, args...)...)
	}

	// Without --volume-label: one claim, the workspace's newest rescue.
	code, out, stderr := restore("--workspace", "a", "--dry-run")
	if n := strings.Count(out, "would-restore"); code != 0 || n != 1 {
		t.Fatalf("--workspace without --volume-label: exit %d, %d claims; want 1\n%s\n%s", code, n, out, stderr)
	}
	// --as names one claim: refused with two roles, nothing written.
	code, out, stderr = restore("--workspace", "a", "--volume-label", "volume", "--as", "x")
	if code != 2 || !strings.Contains(stderr, "has 2 roles") || out != "" || !gone("x") {
		t.Fatalf("--as with two roles: exit %d, stdout %q, stderr %q; want 2, nothing written", code, out, stderr)
	}
	// With --volume-label: every role back, each with its own bytes.
	code, out, stderr = restore("--workspace", "a", "--volume-label", "volume", "--restore-timeout", "2m")
	if code != 0 {
		t.Fatalf("restore --workspace --volume-label: exit %d\n%s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	for name, want := range text {
		if _, act, _ := entry(t, r, name); act != "restored" {
			t.Errorf("%s: action %q, want restored", name, act)
		}
		b, err := f.ReadVolume(ctx, ns, name, "notes.txt")
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if string(b) != want {
			t.Errorf("%s holds %q, want %q", name, b, want)
		}
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if role := map[string]string{"w-home": "home", "w-data": "data"}[name]; c.Labels["volume"] != role {
			t.Errorf("%s restored with role %q, want %q", name, c.Labels["volume"], role)
		}
	}
}
