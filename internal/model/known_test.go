//go:build !modelwip

package model

// knownFailing are the invariants main still breaks (issue 38: the lineage
// is chronological, not by descent; findings A–F, the returning user, two
// claims): their violations do not fail make unit until the fixes land.
// `go test -tags modelwip ./internal/model/` checks every invariant.
// Remove a name here once `go test -tags modelwip` passes for it.
var knownFailing = map[string]bool{InvLost: true, InvGuard: true, InvRestore: true, InvHeld: true}
