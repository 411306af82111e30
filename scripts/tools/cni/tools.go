//go:build tools

// Package tools pins the CNI plugins the local cluster's opt-in node uses
// (see scripts/cluster/build.sh node). It is never imported.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
)
