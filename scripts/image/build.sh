#!/usr/bin/env bash
# make image: the janitor's container image as an OCI archive, built in pure
# Go (scripts/image, go-containerregistry), no Docker, nothing pulled:
#
#   dist/pvc-janitor_<version>_linux_<arch>.oci.tar   (+ .oci.spdx.json, the SBOM)
#
#   scripts/image/build.sh                       this checkout, host arch
#   scripts/image/build.sh --out FILE            write the archive to FILE (the
#                                                local node's import, docs/node.md)
#   scripts/image/build.sh --binary B --arch A --version V --os O
#                                                a binary already built (the
#                                                release's post hook; O other
#                                                than linux: nothing to do)
#
# The version is `git describe --tags` (or 0.0.0-dev-<commit>), the labels' commit and every
# timestamp the commit's, so the same commit gives the same image. The archive
# is checked (user 65532, entrypoint /usr/bin/janitor, platform, no shell)
# before the script ends. Load it into containerd with
# `ctr -n k8s.io images import dist/…oci.tar`; push with
# `go -C scripts/image run . push -ref REF dist/*.oci.tar`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
cd "$root"

binary="" arch="$(go env GOARCH)" version="" os=linux out=""
while [[ $# -gt 0 ]]; do
	case "$1" in
	--binary) binary="$2"; shift 2 ;;
	--arch) arch="$2"; shift 2 ;;
	--version) version="$2"; shift 2 ;;
	--os) os="$2"; shift 2 ;;
	--out) out="$2"; shift 2 ;;
	*) echo "usage: $0 [--binary PATH --arch GOARCH --version V --os GOOS --out FILE]" >&2; exit 2 ;;
	esac
done
[[ "$os" == linux ]] || exit 0
commit="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
created="$(git show -s --format=%cI HEAD 2>/dev/null || echo 1970-01-01T00:00:00Z)"
created="$(date -u -d "$created" +%Y-%m-%dT%H:%M:%SZ)"
if [[ -z "$version" ]]; then
	version="$(git describe --tags --dirty 2>/dev/null || echo "0.0.0-dev-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")"
	version="${version#v}"
fi
mkdir -p dist
if [[ -z "$binary" ]]; then
	binary="dist/janitor_linux_$arch"
	pkg=github.com/pvc-janitor/pvc-janitor/internal/version
	GOOS=linux GOARCH="$arch" go build -trimpath \
		-ldflags "-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.Date=$created" \
		-o "$binary" ./cmd/janitor
fi
[[ -n "$out" ]] || out="$root/dist/pvc-janitor_${version}_linux_${arch}.oci.tar"
[[ "$binary" = /* ]] || binary="$root/$binary"
tool=(go -C "$root/scripts/image" run .)
"${tool[@]}" build -binary "$binary" -arch "$arch" -version "$version" -revision "$commit" -created "$created" \
	-ref "ghcr.io/pvc-janitor/pvc-janitor:${version//+/-}" -out "$out"
"${tool[@]}" check -arch "$arch" "$out"
