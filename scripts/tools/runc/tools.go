//go:build tools

// Package tools pins runc for the local cluster's opt-in node (see
// scripts/cluster/build.sh node; cgo with libseccomp). It is never imported.
package tools

import _ "github.com/opencontainers/runc"
