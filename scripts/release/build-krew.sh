#!/usr/bin/env bash
# Builds the pinned krew (sigs.k8s.io/krew, from the Go module proxy) into
# the cache beside the control plane:
#   ${PVC_JANITOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pvc-janitor}/bin/krew-v0.4.3/krew
# A complete folder is never rebuilt. Cold: about 10 s on 2 cores.
# Prints the binary's path on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

dest="$KREW_BIN"
if [[ -x "$dest/krew" ]]; then
	log "cached: $dest"
	echo "$dest/krew"
	exit 0
fi
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" && mkdir -p "$tmp"
log "building krew $KREW_VERSION"
start=$SECONDS
# go install pkg@version: the module's own go.mod and the checksum database
# pin every dependency; the repository's GOFLAGS do not apply.
GOFLAGS='' GOBIN="$tmp" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
mkdir -p "$dest"
mv "$tmp/krew" "$dest/krew"
log "built krew-$KREW_VERSION in $((SECONDS - start))s"
echo "$dest/krew"
