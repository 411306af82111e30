// Package version carries the build's version, commit and date, set by the
// linker (-X) in the Makefile and .goreleaser.yaml.
package version

// Set at build time with -ldflags -X.
var (
	// Version is the release version, e.g. v0.1.0.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = "none"
	// Date is the build time, RFC 3339.
	Date = "unknown"
)
