# Pinned GoReleaser of make release-check. Sourced by scripts/release/*.sh.
# shellcheck source=../cluster/versions.sh
. "$(dirname "${BASH_SOURCE[0]}")/../cluster/versions.sh"
GORELEASER_VERSION=v2.15.1
GORELEASER_BIN="$BIN_ROOT/goreleaser-$GORELEASER_VERSION"
# krew, the kubectl plugin manager, with which make release-check installs
# the release's krew manifest as the README says (scripts/release/readme-install.sh).
KREW_VERSION=v0.4.3
KREW_BIN="$BIN_ROOT/krew-$KREW_VERSION"
