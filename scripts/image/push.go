package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// push uploads the images of OCI archives to a registry under -ref, with
// the credentials of the Docker config (~/.docker/config.json, as `docker
// login` or `crane auth login` wrote them): the release's last step. One
// archive is pushed as it is; several (one per architecture) as an index
// of them, each entry with its platform.
func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	ref := fs.String("ref", "", "where to push, e.g. ghcr.io/pvc-janitor/pvc-janitor:1.2.3")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 || *ref == "" {
		return errors.New("push takes -ref and OCI archives")
	}
	r, err := name.ParseReference(*ref)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "oci-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var img v1.Image
	for i, a := range fs.Args() {
		if img, err = openArchive(a, filepath.Join(dir, fmt.Sprint(i))); err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture}}})
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if fs.NArg() > 1 {
		if err := remote.WriteIndex(r, idx, auth); err != nil {
			return err
		}
		d, _ := idx.Digest()
		fmt.Printf("pushed %s@%s (%d platforms)\n", r, d, fs.NArg())
		return nil
	}
	if err := remote.Write(r, img, auth); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("pushed %s@%s\n", r, d)
	return nil
}
