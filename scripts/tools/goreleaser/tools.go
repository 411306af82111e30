//go:build tools

// Package tools pins GoReleaser, which make release-check runs
// (scripts/release). It is never imported: scripts/tools/build.sh builds
// github.com/goreleaser/goreleaser/v2 from this module into the cache.
package tools

import (
	_ "github.com/goreleaser/goreleaser/v2"
)
