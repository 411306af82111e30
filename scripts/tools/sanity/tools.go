//go:build tools

// Package tools pins csi-sanity, the CSI conformance test that `make sanity`
// runs against the project's driver (see scripts/cluster/sanity.sh). It is
// never imported.
package tools

import (
	_ "github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity"
)
