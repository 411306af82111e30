#!/usr/bin/env bash
# make release-check: proves the release configuration works, here, without
# publishing anything and without Docker.
#
#   1. goreleaser check: .goreleaser.yaml is valid (version 2, no
#      deprecated keys).
#   2. goreleaser build --snapshot --single-target --clean: the current
#      platform's binary builds as a release would build it, and the version,
#      commit and date reach it through the ldflags.
#   3. The image: the OCI archive of that binary (goreleaser's post hook,
#      scripts/image/build.sh) declares linux/<arch>, user 65532 and the
#      entrypoint /usr/bin/janitor, has its SBOM and no shell; the image
#      tool's own tests pass.
#   4. The kubectl plugin: that binary installed as kubectl-janitor on PATH,
#      `kubectl janitor version` (the pinned kubectl of the local cluster)
#      runs it.
#   5. The README's install steps, as written there (checksum line, the
#      krew manifest attached to the release, the version from the tag),
#      against a release of this platform built as the README's tag would
#      be and served on loopback (scripts/release/readme-install.sh, with
#      the pinned krew).
#
# With --full it also runs `goreleaser release --snapshot` for every
# platform (archives with README and LICENSE, checksums, the krew manifest;
# publishing skipped) and checks what it wrote. That cross-builds
# six binaries: minutes on a cold Go cache, so it is not part of make test.
#
# GoReleaser reads the commit and its date from git, and gives up on all of
# it when the clone has no remote; a clone without one gets the project's
# URL through the environment (GIT_CONFIG_*), never written to .git/config.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0

full=0
case "${1:-}" in
"") ;;
--full) full=1 ;;
*) echo "usage: $0 [--full]" >&2; exit 2 ;;
esac

log() { printf '[release-check %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

goreleaser="$(bash "$here/build-goreleaser.sh")"
krew="$(bash "$here/build-krew.sh")"
bash "$root/scripts/cluster/build.sh" kube >&2
# shellcheck source=../cluster/versions.sh
. "$root/scripts/cluster/versions.sh"
kubectl="$KUBE_BIN/kubectl"

cd "$root"
if ! git ls-remote --get-url >/dev/null 2>&1; then
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url \
		GIT_CONFIG_VALUE_0=https://github.com/pvc-janitor/pvc-janitor.git
fi
dist="$root/dist"
start=$SECONDS

log "goreleaser check"
"$goreleaser" check

log "goreleaser build --snapshot --single-target --clean"
"$goreleaser" build --snapshot --single-target --clean
bin="$(find "$dist" -type f -name janitor -path "*_$(go env GOOS)_$(go env GOARCH)*" | head -n1)"
[[ -x "$bin" ]] || fail "no janitor binary for $(go env GOOS)/$(go env GOARCH) under $dist"
version="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$dist/metadata.json" 2>/dev/null ||
	sed -n 's/.*"version":"\([^"]*\)".*/\1/p' "$dist/metadata.json")"
commit="$(git rev-parse HEAD)"
out="$("$bin" version)"
log "$bin: $out"
[[ "$out" == *"$version"* ]] || fail "version $version did not reach the binary: $out"
[[ "$out" == *"$commit"* ]] || fail "commit $commit did not reach the binary: $out"
[[ "$out" != *"built unknown"* ]] || fail "build date did not reach the binary: $out"
file_out="$(LC_ALL=C od -An -c -N4 "$bin" | tr -d ' ')"
[[ "$file_out" == '177ELF' || "$(go env GOOS)" != linux ]] || fail "not an ELF binary: $bin"

log "image: the OCI archive goreleaser's post hook built (scripts/image)"
img="$(find "$dist" -maxdepth 1 -name "pvc-janitor_*_linux_$(go env GOARCH).oci.tar" | head -n1)"
[[ -f "$img" ]] || fail "no image archive pvc-janitor_*_linux_$(go env GOARCH).oci.tar under $dist"
[[ -f "${img%.tar}.spdx.json" ]] || fail "no SBOM beside $img"
go -C scripts/image run . check -arch "$(go env GOARCH)" "$img" >&2 || fail "the image of $img is not what scripts/image builds"
log "image tests (build, check, push to a registry on loopback)"
go -C scripts/image test -count=1 . >&2 || fail "scripts/image tests"

log "kubectl plugin: kubectl janitor version"
plugdir="$(mktemp -d)"
trap 'rm -rf "$plugdir"' EXIT
cp "$bin" "$plugdir/kubectl-janitor"
plug="$(PATH="$plugdir:/usr/bin:/bin" KUBECONFIG=/dev/null "$kubectl" janitor version)"
[[ "$plug" == "$out" ]] || fail "kubectl janitor version printed \"$plug\", want \"$out\""
PATH="$plugdir:/usr/bin:/bin" "$kubectl" plugin list 2>/dev/null | grep -q "$plugdir/kubectl-janitor" ||
	fail "kubectl plugin list does not show $plugdir/kubectl-janitor"
log "kubectl janitor version: $plug"

log "the README's install steps against a release built for its tag"
bash "$here/readme-install.sh" "$goreleaser" "$kubectl" "$krew"

if [[ $full == 1 ]]; then
	log "goreleaser release --snapshot --clean (every platform; no docker, no publishing)"
	"$goreleaser" release --snapshot --clean --skip=docker,publish,sign,sbom,announce
	n=0
	for a in "$dist"/pvc-janitor_*.tar.gz; do
		listing="$(tar -tzf "$a")"
		for f in janitor README.md LICENSE; do
			grep -qx "$f" <<<"$listing" || fail "$a lacks $f"
		done
		n=$((n + 1))
	done
	for a in "$dist"/pvc-janitor_*.zip; do
		listing="$(python3 -c 'import sys,zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$a")"
		for f in janitor.exe README.md LICENSE; do
			grep -qx "$f" <<<"$listing" || fail "$a lacks $f"
		done
		n=$((n + 1))
	done
	[[ $n == 6 ]] || fail "want 6 archives, got $n"
	(cd "$dist" && sha256sum -c --quiet pvc-janitor_*_checksums.txt) || fail "checksums do not match"
	manifest="$dist/krew/janitor.yaml"
	[[ -f "$manifest" ]] || fail "no krew manifest"
	for want in "kind: Plugin" "name: janitor" "bin: janitor" "bin: janitor.exe"; do
		grep -q "$want" "$manifest" || fail "krew manifest lacks \"$want\""
	done
	[[ "$(grep -c 'sha256:' "$manifest")" == 6 ]] || fail "krew manifest does not list 6 platforms"
	log "archives, checksums and krew manifest ok"
fi
log "ok in $((SECONDS - start))s"
