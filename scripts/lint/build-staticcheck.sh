#!/usr/bin/env bash
# Builds the pinned staticcheck (honnef.co/go/tools, scripts/tools/staticcheck)
# into the cache beside the control plane and helm:
#   ${PVC_JANITOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pvc-janitor}/bin/staticcheck-<version>/staticcheck
# A complete folder is never rebuilt. Cold: about a minute on 2 cores.
# Prints the binary's path on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$(cd "$here/../tools/staticcheck" && pwd)"
# shellcheck source=../cluster/versions.sh
. "$here/../cluster/versions.sh"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The version is the one go.mod pins: one place to bump it.
version="$(cd "$mod" && go list -m -f '{{.Version}}' honnef.co/go/tools)"
dest="$BIN_ROOT/staticcheck-$version"
if [[ -x "$dest/staticcheck" ]]; then
	log "cached: $dest"
	echo "$dest/staticcheck"
	exit 0
fi
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" && mkdir -p "$tmp"
log "building staticcheck $version"
start=$SECONDS
(cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$tmp/staticcheck" honnef.co/go/tools/cmd/staticcheck)
mkdir -p "$dest"
mv "$tmp/staticcheck" "$dest/staticcheck"
log "built staticcheck-$version in $((SECONDS - start))s"
echo "$dest/staticcheck"
