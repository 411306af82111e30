//go:build tools

// Package tools pins Helm, which the chart tests run (scripts/chart). It is
// never imported: scripts/tools/build.sh builds helm.sh/helm/v3/cmd/helm
// from this module into the cache.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
