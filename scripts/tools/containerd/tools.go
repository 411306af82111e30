//go:build tools

// Package tools pins containerd, its runc shim and ctr for the local cluster's
// opt-in node (see scripts/cluster/build.sh node). It is never imported.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
