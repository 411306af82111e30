package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's user, its paths and what it runs.
const (
	uid        = 65532
	entrypoint = "/usr/bin/janitor"
	binDir     = "/usr/bin/"
	caFile     = "/etc/ssl/certs/ca-certificates.crt"
	home       = "/home/nonroot"
	source     = "https://github.com/pvc-janitor/pvc-janitor"
)

type buildOptions struct {
	// name is the program: /usr/bin/<name> is the entrypoint. The release
	// builds "janitor"; the local node's test images (pause, workspace) are
	// built by the same recipe with another name.
	name                                      string
	binary, arch, version, revision, ref, out string
	created                                   time.Time
}

func build(args []string) error {
	o, err := parseBuild(args)
	if err != nil {
		return err
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	img, err := image(o, bin)
	if err != nil {
		return err
	}
	if err := writeArchive(img, o.ref, o.out); err != nil {
		return err
	}
	sbom, err := spdx(o, bin)
	if err != nil {
		return err
	}
	if err := os.WriteFile(sbomPath(o.out), sbom, 0o644); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s %s (%s/%s), SBOM %s\n", o.out, d, "linux", o.arch, sbomPath(o.out))
	return nil
}

func parseBuild(args []string) (*buildOptions, error) {
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	o := &buildOptions{}
	fs.StringVar(&o.binary, "binary", "", "the static linux janitor binary")
	fs.StringVar(&o.name, "name", "janitor", "the program's name: the entrypoint is /usr/bin/<name>")
	fs.StringVar(&o.arch, "arch", "amd64", "its architecture (GOARCH)")
	fs.StringVar(&o.version, "version", "dev", "the version (label org.opencontainers.image.version)")
	fs.StringVar(&o.revision, "revision", "", "the commit (label org.opencontainers.image.revision)")
	fs.StringVar(&o.ref, "ref", "", "the image reference the archive names (org.opencontainers.image.ref.name)")
	fs.StringVar(&o.out, "out", "", "the OCI archive to write (the SBOM goes beside it, .spdx.json)")
	created := fs.String("created", "1970-01-01T00:00:00Z", "every timestamp of the image (RFC 3339): the commit's")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.binary == "" || o.out == "" || o.ref == "" {
		return nil, errors.New("build needs -binary, -ref and -out")
	}
	if o.name == "" || filepath.Base(o.name) != o.name {
		return nil, fmt.Errorf("-name %q: want a file name", o.name)
	}
	t, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return nil, fmt.Errorf("-created: %w", err)
	}
	o.created = t.UTC()
	return o, nil
}

// sbomPath is where the SBOM of the archive out goes.
func sbomPath(out string) string {
	return trimExt(out, ".tar") + ".spdx.json"
}

func trimExt(p, ext string) string {
	if filepath.Ext(p) == ext {
		return p[:len(p)-len(ext)]
	}
	return p
}

// image is the one-layer image of the binary.
func image(o *buildOptions, bin []byte) (v1.Image, error) {
	files, err := rootfs(o.created, o.name, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: types.OCILayer,
		History: v1.History{Created: v1.Time{Time: o.created}, CreatedBy: "scripts/image build", Comment: o.name + " " + o.version}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.arch, v1.Time{Time: o.created}
	var cmd []string
	if o.name == "janitor" {
		cmd = []string{"--help"}
	}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", uid, uid),
		Entrypoint: []string{binDir + o.name},
		Cmd:        cmd,
		WorkingDir: home,
		Env:        []string{"PATH=/usr/bin", "SSL_CERT_FILE=" + caFile, "HOME=" + home},
		Labels:     labels(o),
	}
	return mutate.ConfigFile(img, cf)
}

func labels(o *buildOptions) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    title(o.name),
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
	}
	if o.revision != "" {
		l["org.opencontainers.image.revision"] = o.revision
	}
	return l
}

// entry is one file or folder of the root filesystem.
type entry struct {
	name string
	mode int64
	uid  int
	body []byte
	dir  bool
}

// rootfs is the layer's tar: every entry owned by root except the user's
// home, every time the commit's.
func rootfs(created time.Time, name string, bin []byte) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", uid, uid, home)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: caFile[1:], mode: 0o644, body: caBundle()},
		{name: "home/", mode: 0o755, dir: true},
		{name: home[1:] + "/", mode: 0o700, uid: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/bin/", mode: 0o755, dir: true},
		{name: binDir[1:] + name, mode: 0o755, body: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// caBundle is the PEM of the fallback bundle's unconstrained roots (a root
// with a distrust date needs a check a PEM file cannot carry: left out).
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// writeArchive writes img as an OCI image layout, tarred into out.
func writeArchive(img v1.Image, ref, out string) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	return tarDir(dir, out)
}

// tarDir tars the folder dir into out: sorted, every time zero, no owner.
func tarDir(dir, out string) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer os.Remove(out + ".tmp")
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if d.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
			return tw.WriteHeader(h)
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Typeflag, h.Size = tar.TypeReg, int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}

// title is the image's title label: the project's for the janitor.
func title(name string) string {
	if name == "janitor" {
		return "pvc-janitor"
	}
	return "pvc-janitor-" + name
}
