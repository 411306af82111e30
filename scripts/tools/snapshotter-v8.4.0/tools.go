//go:build tools

// Package tools pins the CSI snapshot binaries that the local cluster builds.
// It is never imported.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
