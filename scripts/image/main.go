// Command image builds the janitor's container image without Docker and
// without pulling anything: one layer with the static binary, a CA bundle
// (the Mozilla roots of golang.org/x/crypto/x509roots/fallback, pinned in
// go.mod), /etc/passwd and /etc/group naming the non-root user 65532, its
// home and /tmp; no shell, no package manager. The result is an OCI image
// layout in a tar archive (what `ctr images import` and `skopeo copy
// oci-archive:` read) and an SPDX SBOM of the binary's modules beside it.
// The same bytes come out of the same binary: every timestamp is the
// commit's (-created), and the tar and gzip streams carry no other.
//
//	image build -binary dist/janitor -arch amd64 -version 1.2.3 -created 2026-12-03T10:00:00Z \
//	    -ref ghcr.io/pvc-janitor/pvc-janitor:1.2.3 -out dist/pvc-janitor_1.2.3_linux_amd64.oci.tar
//	image check -arch amd64 dist/pvc-janitor_1.2.3_linux_amd64.oci.tar
//	image push -ref ghcr.io/pvc-janitor/pvc-janitor:1.2.3 dist/pvc-janitor_1.2.3_linux_amd64.oci.tar
//
// make image and the release (.goreleaser.yaml's post hook) both call
// build; make release-check calls check. docs/development.md#the-image.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|check|push [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(os.Args[2:])
	case "check":
		err = check(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want build, check or push", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
