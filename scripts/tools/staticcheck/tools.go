//go:build tools

// Package tools pins staticcheck, which make lint runs. It is never
// imported: scripts/lint/build-staticcheck.sh builds
// honnef.co/go/tools/cmd/staticcheck from this module into the cache.
package tools

import (
	_ "honnef.co/go/tools/cmd/staticcheck"
)
