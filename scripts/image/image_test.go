package main

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildArchive builds the image of this test binary (a Go binary with
// build information, as the janitor's is) for arch into dir.
func buildArchive(t *testing.T, dir, arch string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "janitor_"+arch+".oci.tar")
	if err := build([]string{"-binary", self, "-arch", arch, "-version", "1.2.3", "-created", "2026-12-03T10:00:00Z",
		"-ref", "example.com/janitor:1.2.3", "-out", out}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildIsCheckedAndReproducible: the archive passes check (user,
// entrypoint, platform, CA bundle, no shell), the same inputs give the
// same bytes, and the SBOM names the binary's modules.
func TestBuildIsCheckedAndReproducible(t *testing.T) {
	a := buildArchive(t, t.TempDir(), "amd64")
	b := buildArchive(t, t.TempDir(), "amd64")
	if err := check([]string{"-arch", "amd64", a}); err != nil {
		t.Fatalf("check: %v", err)
	}
	if err := check([]string{"-arch", "arm64", a}); err == nil || !strings.Contains(err.Error(), "want linux/arm64") {
		t.Errorf("check of an amd64 image as arm64: %v, want a platform error", err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two builds of the same inputs differ")
	}
	sbom, err := os.ReadFile(sbomPath(a))
	if err != nil || !strings.Contains(string(sbom), `"spdxVersion": "SPDX-2.3"`) || !strings.Contains(string(sbom), "pkg:golang/github.com/google/go-containerregistry@") {
		t.Errorf("SBOM (%v): want SPDX 2.3 naming the binary's modules", err)
	}
}

// TestCheckRefusesAShell: an image that carries /bin/sh fails check.
func TestCheckRefusesAShell(t *testing.T) {
	dir := t.TempDir()
	a := buildArchive(t, dir, "amd64")
	img, err := openArchive(a, filepath.Join(dir, "open"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/sh", Mode: 0o755, Size: 2, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("#!"))
	_ = tw.Close()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	withShell, err := mutate.AppendLayers(img, layer)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "shell.oci.tar")
	if err := writeArchive(withShell, "example.com/janitor:shell", bad); err != nil {
		t.Fatal(err)
	}
	if err := check([]string{"-arch", "amd64", bad}); err == nil || !strings.Contains(err.Error(), "/bin/sh") {
		t.Errorf("check of an image with /bin/sh: %v, want it refused", err)
	}
}

// TestPushTwoArchitecturesAsOneIndex: push of two archives writes an index
// whose entries carry their platforms, to a registry on loopback.
func TestPushTwoArchitecturesAsOneIndex(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	dir := t.TempDir()
	amd, arm := buildArchive(t, dir, "amd64"), buildArchive(t, dir, "arm64")
	ref := strings.TrimPrefix(srv.URL, "http://") + "/pvc-janitor:1.2.3"
	if err := push([]string{"-ref", ref, amd, arm}); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		if d.Platform != nil {
			got = append(got, d.Platform.OS+"/"+d.Platform.Architecture)
		}
	}
	if strings.Join(got, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("index platforms %v, want linux/amd64 and linux/arm64", got)
	}
}
