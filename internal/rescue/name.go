package rescue

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// maxName is the longest VolumeSnapshot name (a DNS subdomain).
const maxName = 253

// Name returns the name of the rescue of a claim for one orphaned-since
// (docs/spec.md#rescue): <claim name, truncated>-rescue-<first 10 hex of
// sha256(uid + "/" + orphaned-since in RFC 3339)>.
//
// It is deterministic, so a rerun after a crash finds the snapshot it already
// made instead of making a second one; the UID makes it distinct for a claim
// recreated under the same name; and the orphaned-since makes it distinct for
// a claim that was used again and orphaned anew, whose new rescue then stands
// beside the stale one instead of replacing it. The orphaned-since is taken
// in UTC to the second, the precision of the mark and of the Unused
// condition, so that the same moment always gives the same name. The claim
// name (already a DNS subdomain) is truncated so that the result is at most
// 253 characters and still a DNS subdomain.
func Name(claim string, uid types.UID, orphanedSince time.Time) string {
	sum := sha256.Sum256([]byte(string(uid) + "/" + orphanedSince.UTC().Format(time.RFC3339)))
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
