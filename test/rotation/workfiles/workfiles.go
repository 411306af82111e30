// Package workfiles is a workspace's files for the rotation test on nodes
// (test/rotation, docs/node.md#a-rotation-through-the-nodes): a set of
// files derived from a seed, among them one of a few MiB of bytes that do
// not compress, written by a pod on the old cluster's node, and their
// manifest (a SHA-256, the size and the path of every file), which a pod on
// the new cluster's node prints for the test to compare with the one the
// test derives from the same seed. The program that runs in the pods is
// cmd/workfiles.
package workfiles

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one file of a workspace: its path (slash-separated, relative to
// the volume's root) and its bytes.
type File struct {
	Path string
	Data []byte
}

// BigSize is the size of the largest file: 3 MiB and 7 bytes, so that it
// ends inside a page and a block.
const BigSize = 3<<20 + 7

// Files returns the workspace's files for seed: a text note, a source file
// in a subfolder, binary bytes with NUL and 0xff, an empty file, and
// BigSize bytes of a SHA-256 stream of the seed (incompressible, so no
// layer on the way can store it as a pattern). The same seed always gives
// the same files.
func Files(seed string) []File {
	return []File{
		{Path: "notes.md", Data: []byte("# " + seed + "\n\nlast work before the teardown\n")},
		{Path: "src/main.go", Data: []byte("package main\n\n// " + seed + "\nfunc main() {}\n")},
		{Path: "src/.hidden/bytes.bin", Data: []byte("\x00\xff\x00" + seed + "\r\n\x00")},
		{Path: "empty", Data: []byte{}},
		{Path: "cache/big.bin", Data: Stream(seed, BigSize)},
	}
}

// Stream is n bytes of SHA-256 in counter mode over seed.
func Stream(seed string, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	var ctr [8]byte
	for i := uint64(0); len(out) < n; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		h := sha256.New()
		h.Write([]byte(seed))
		h.Write(ctr[:])
		out = h.Sum(out)
	}
	return out[:n]
}

// Write writes files under root, each synced, then syncs every folder it
// made: a snapshot taken once the writer has said so holds them all.
func Write(root string, files []File) error {
	dirs := map[string]bool{root: true}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		for d := filepath.Dir(p); d != root && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := writeSynced(p, f.Data); err != nil {
			return err
		}
	}
	for d := range dirs {
		if err := syncPath(d); err != nil {
			return err
		}
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// Manifest is the manifest of files: one line per file, sorted by path,
// "<sha256>  <size>  <path>".
func Manifest(files []File) string {
	lines := make([]string, 0, len(files))
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		lines = append(lines, line(hex.EncodeToString(sum[:]), int64(len(f.Data)), f.Path))
	}
	return join(lines)
}

// Sum is the manifest of every regular file under root, read from the
// disk; anything else but a folder (a link, a device) is an error, so that
// it cannot stand in for a file.
func Sum(root string) (string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", rel, d.Type())
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		n, err := io.Copy(h, f)
		if err != nil {
			return err
		}
		lines = append(lines, line(hex.EncodeToString(h.Sum(nil)), n, filepath.ToSlash(rel)))
		return nil
	})
	if err != nil {
		return "", err
	}
	return join(lines), nil
}

func line(sum string, size int64, path string) string {
	return fmt.Sprintf("%s  %d  %s", sum, size, path)
}

func join(lines []string) string {
	sort.Slice(lines, func(i, j int) bool { return pathOf(lines[i]) < pathOf(lines[j]) })
	return strings.Join(lines, "\n") + "\n"
}

func pathOf(l string) string {
	parts := strings.SplitN(l, "  ", 3)
	return parts[len(parts)-1]
}
