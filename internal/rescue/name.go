package rescue

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// maxName is the longest VolumeSnapshot name (a DNS subdomain).
const maxName = 253

// Name returns the rescue snapshot's name for a claim: deterministic from the
// claim's UID, so a rerun after a crash finds the snapshot it already made
// instead of making a second one, and distinct for a claim recreated under
// the same name. The claim name (already a DNS subdomain) is truncated so the
// result is at most 253 characters and still a DNS subdomain.
func Name(claim string, uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	suffix := "-rescue-" + hex.EncodeToString(sum[:])[:10]
	base := strings.ToLower(claim)
	if len(base) > maxName-len(suffix) {
		base = base[:maxName-len(suffix)]
	}
	// A DNS subdomain must end (and each label start and end) with an
	// alphanumeric character.
	base = strings.TrimRight(base, "-.")
	if base == "" {
		base = "claim"
	}
	return base + suffix
}
