package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBuildWaitsForAnotherBuild: scripts/cluster/build.sh builds a
// component under a lock (flock on <folder>.lock), so a second build of
// it waits for the first and then finds it complete instead of building
// it again. The test plays the first build in a cache of its own: it holds
// the lock, sees the script wait, puts the binary in place and lets go.
// The script's go is one that fails: a script that does not wait builds.
func TestBuildWaitsForAnotherBuild(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PVC_JANITOR_CACHE", t.TempDir())
	dirs, err := cacheDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	dest := dirs["PROVISIONER_BIN"]
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\necho 'go must not run' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(dest+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "cluster", "build.sh"), "provisioner")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		out = append(out, sc.Text())
		if strings.Contains(sc.Text(), "waiting for another build of provisioner-") {
			break
		}
	}
	if len(out) == 0 || !strings.Contains(out[len(out)-1], "waiting for another build") {
		_ = cmd.Wait()
		t.Fatalf("build.sh did not wait for the lock:\n%s", strings.Join(out, "\n"))
	}
	// The first build completes, and lets go.
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, "csi-provisioner"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, strings.Join(out, "\n"))
	}
	if last := out[len(out)-1]; !strings.Contains(last, "cached: "+dest+" (built by another process meanwhile)") {
		t.Errorf("build.sh ended with %q, want the folder found complete:\n%s", last, strings.Join(out, "\n"))
	}
}
