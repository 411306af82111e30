#!/usr/bin/env bash
# Installs the linters that the examples tests run and fail without
# (test/examplestest: the teardown workflow and the gate script):
#   - actionlint, built from its pinned Go module into the cache beside the
#     control plane: $BIN_ROOT/actionlint-$ACTIONLINT_VERSION/actionlint
#     (cold: about a minute on 2 cores; a cached binary is never rebuilt);
#   - shellcheck, the Debian package (apt-get, as root or through sudo),
#     skipped when a shellcheck is already on PATH.
# Prints "name path" per tool on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

dest="$ACTIONLINT_BIN"
if [[ -x "$dest/actionlint" ]]; then
	log "cached: $dest"
else
	tmp="$dest.tmp.$$"
	trap 'rm -rf "$tmp"' EXIT
	rm -rf "$tmp" && mkdir -p "$tmp"
	log "building actionlint $ACTIONLINT_VERSION"
	start=$SECONDS
	# go install pkg@version: the module's own go.mod and the checksum
	# database pin every dependency; the repository's GOFLAGS do not apply.
	GOFLAGS='' GOBIN="$tmp" go install -trimpath -ldflags '-s -w' \
		"github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
	mkdir -p "$dest"
	mv "$tmp/actionlint" "$dest/actionlint"
	log "built actionlint-$ACTIONLINT_VERSION in $((SECONDS - start))s"
fi
echo "actionlint $dest/actionlint"

if ! command -v shellcheck >/dev/null; then
	sudo=()
	if [[ $(id -u) -ne 0 ]]; then
		command -v sudo >/dev/null || { log "shellcheck is missing and installing it needs root: apt-get install shellcheck"; exit 1; }
		sudo=(sudo)
	fi
	command -v apt-get >/dev/null || { log "shellcheck is missing and there is no apt-get: install shellcheck"; exit 1; }
	log "installing shellcheck (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	# The package lists may be missing or stale on a fresh machine.
	"${sudo[@]}" apt-get install -y -qq shellcheck >&2 ||
		{ "${sudo[@]}" apt-get update -qq >&2 && "${sudo[@]}" apt-get install -y -qq shellcheck >&2; }
fi
echo "shellcheck $(command -v shellcheck)"
