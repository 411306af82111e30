# Pinned GoReleaser of make release-check. Sourced by scripts/release/*.sh.
# shellcheck source=../cluster/versions.sh
. "$(dirname "${BASH_SOURCE[0]}")/../cluster/versions.sh"
GORELEASER_VERSION=v2.15.1
GORELEASER_BIN="$BIN_ROOT/goreleaser-$GORELEASER_VERSION"
