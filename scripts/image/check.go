package main

import (
	"archive/tar"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// shells are files no image of the janitor may carry: a shell gives an
// attacker in the container a tool the janitor never needs.
var shells = []string{"bin/sh", "bin/bash", "bin/ash", "bin/dash", "bin/busybox", "usr/bin/sh", "usr/bin/bash", "usr/bin/busybox"}

// check opens an OCI archive and fails unless its one image is what build
// makes: linux on -arch, user 65532, entrypoint /usr/bin/janitor, the
// binary executable, a CA bundle, and no shell.
func check(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	arch := fs.String("arch", "amd64", "the architecture the image must declare")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("check takes one OCI archive")
	}
	dir, err := os.MkdirTemp("", "oci-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, err := openArchive(fs.Arg(0), dir)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	var problems []string
	want := func(ok bool, format string, a ...any) {
		if !ok {
			problems = append(problems, fmt.Sprintf(format, a...))
		}
	}
	want(cf.OS == "linux" && cf.Architecture == *arch, "platform %s/%s, want linux/%s", cf.OS, cf.Architecture, *arch)
	want(cf.Config.User == fmt.Sprintf("%d:%d", uid, uid), "user %q, want %d:%d", cf.Config.User, uid, uid)
	want(slices.Equal(cf.Config.Entrypoint, []string{entrypoint}), "entrypoint %q, want [%s]", cf.Config.Entrypoint, entrypoint)
	files, err := listFiles(img)
	if err != nil {
		return err
	}
	want(files[entrypoint[1:]]&0o111 != 0, "%s is missing or not executable", entrypoint)
	want(files[caFile[1:]] != 0, "%s is missing", caFile)
	for _, s := range shells {
		_, has := files[s]
		want(!has, "the image carries a shell: /%s", s)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	d, _ := img.Digest()
	fmt.Printf("%s: %s, linux/%s, user %s, entrypoint %s, %d files, no shell\n", fs.Arg(0), d, cf.Architecture, cf.Config.User, entrypoint, len(files))
	return nil
}

// openArchive untars an OCI archive into dir and returns its only image.
func openArchive(archive, dir string) (v1.Image, error) {
	if err := untar(archive, dir); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want 1", archive, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+h.Name)))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
}

// listFiles maps every regular file of the image's layers to its mode.
func listFiles(img v1.Image) (map[string]int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	files := map[string]int64{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				rc.Close()
				return nil, err
			}
			if h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeSymlink || h.Typeflag == tar.TypeLink {
				files[strings.TrimPrefix(path.Clean("/"+h.Name), "/")] = h.Mode | 1<<20 // never 0 for a present file
			}
		}
		rc.Close()
	}
	return files, nil
}
