//go:build tools

// Package tools pins the CSI external-provisioner that the local cluster
// builds (see scripts/cluster/build.sh). It is never imported.
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
