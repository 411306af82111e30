#!/usr/bin/env bash
# Builds the pinned Helm (helm.sh/helm/v3, scripts/tools/helm) into the
# cache beside the control plane:
#   ${PVC_JANITOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pvc-janitor}/bin/helm-v3.22.0/helm
# A complete folder is never rebuilt. Cold: about 2 minutes on 2 cores.
# Prints the binary's path on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mod="$(cd "$here/../tools/helm" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

dest="$HELM_BIN"
if [[ -x "$dest/helm" ]]; then
	log "cached: $dest"
	echo "$dest/helm"
	exit 0
fi
# Helm's own Makefile sets these: the version, and the Kubernetes version
# that `helm template` and `helm lint` assume (client-go v0.X.Y -> 1.X).
kver="$(cd "$mod" && go list -m -f '{{.Version}}' k8s.io/client-go)"
kminor="${kver#v0.}"; kminor="${kminor%%.*}"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kminor"
done
tmp="$dest.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp" && mkdir -p "$tmp"
log "building helm $HELM_VERSION ... this takes minutes on a cold cache"
start=$SECONDS
(cd "$mod" && go build -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
mkdir -p "$dest"
mv "$tmp/helm" "$dest/helm"
log "built helm-$HELM_VERSION in $((SECONDS - start))s"
echo "$dest/helm"
