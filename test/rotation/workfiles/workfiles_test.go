package workfiles

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The manifest read from the disk is the one derived from the seed, and
// one byte changed, a file missing or a file added each changes it: the
// rotation test's comparison can fail.
func TestSumIsManifestAndSeesOneByte(t *testing.T) {
	dir := t.TempDir()
	files := Files("alice-1")
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	want := Manifest(files)
	if got, err := Sum(dir); err != nil || got != want {
		t.Fatalf("Sum: %v\n%s\nwant\n%s", err, got, want)
	}
	if n := strings.Count(want, "\n"); n != len(files) {
		t.Errorf("%d manifest lines for %d files", n, len(files))
	}
	if Manifest(Files("bob-1")) == want {
		t.Error("another seed gives the same manifest")
	}
	big := filepath.Join(dir, "cache", "big.bin")
	b, err := os.ReadFile(big)
	if err != nil || len(b) != BigSize {
		t.Fatalf("big.bin: %d bytes, %v; want %d", len(b), err, BigSize)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(big, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := Sum(dir); got == want {
		t.Error("one byte changed in big.bin: the same manifest")
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(big, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "empty")); err != nil {
		t.Fatal(err)
	}
	if got, _ := Sum(dir); got == want {
		t.Error("the empty file removed: the same manifest")
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := Sum(dir); got == want {
		t.Error("a file added: the same manifest")
	}
	if err := os.Symlink("notes.md", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Sum(dir); err == nil {
		t.Error("a symbolic link is taken for a file")
	}
}

// The stream does not repeat: no 4 KiB block of the big file is another's,
// so a copy that reorders or repeats blocks is seen.
func TestStreamBlocksDiffer(t *testing.T) {
	s := Stream("x", 1<<20)
	seen := map[string]bool{}
	for i := 0; i+4096 <= len(s); i += 4096 {
		k := string(s[i : i+4096])
		if seen[k] {
			t.Fatalf("block at %d repeats", i)
		}
		seen[k] = true
	}
	if !bytes.Equal(Stream("x", 100), s[:100]) {
		t.Error("a shorter stream is not a prefix of the longer")
	}
}
