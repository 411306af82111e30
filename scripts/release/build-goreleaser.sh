#!/usr/bin/env bash
# Builds the pinned GoReleaser (github.com/goreleaser/goreleaser/v2,
# scripts/tools/goreleaser) into the cache beside the control plane:
#   ${PVC_JANITOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pvc-janitor}/bin/goreleaser-v2.15.1/goreleaser
# A complete folder is never rebuilt. Cold: several minutes on 2 cores.
# Prints the binary's path on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$(cd "$here/../tools/goreleaser" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

dest="$GORELEASER_BIN"
if [[ -x "$dest/goreleaser" ]]; then
	log "cached: $dest"
	echo "$dest/goreleaser"
	exit 0
fi
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" && mkdir -p "$tmp"
log "building goreleaser $GORELEASER_VERSION ... this takes minutes on a cold cache"
start=$SECONDS
(cd "$mod" && go build -trimpath \
	-ldflags "-s -w -X main.version=$GORELEASER_VERSION -X main.builtBy=pvc-janitor -X main.treeState=clean" \
	-o "$tmp/goreleaser" github.com/goreleaser/goreleaser/v2)
mkdir -p "$dest"
mv "$tmp/goreleaser" "$dest/goreleaser"
log "built goreleaser-$GORELEASER_VERSION in $((SECONDS - start))s"
echo "$dest/goreleaser"
