#!/usr/bin/env bash
# Builds the pinned control-plane binaries from Go modules into a cache outside
# the repository, one folder per component and version. A folder that is
# complete is never rebuilt. A cold build takes about 20 minutes on 2 cores.
# Usage: build.sh [all|kube|etcd|snapshotter|provisioner|sanity|node]...
#
# Honours KUBEBUILDER_ASSETS: when it holds etcd and kube-apiserver, those two
# are not built (kube-controller-manager, kubectl and the snapshot binaries
# still are: envtest does not ship them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools="$(cd "$here/../tools" && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# lock DEST: takes DEST.lock (flock) and holds it until the script exits,
# so that a second build of DEST (another go test process, say) waits for
# the first and then finds DEST complete instead of building it again.
lock() {
	local f="$1.lock" fd
	mkdir -p "$(dirname "$f")"
	exec {fd}>"$f"
	if ! flock -n "$fd"; then
		log "waiting for another build of $(basename "$1") (it holds $f)"
		flock "$fd"
	fi
}

# complete DEST PKG... : every binary of PKGs is in DEST.
complete() {
	local dest="$1"
	shift
	for p in "$@"; do [[ -x "$dest/$(basename "$p")" ]] || return 1; done
}

# build DEST MODULE_DIR LDFLAGS PKG... : builds PKGs into DEST atomically
# (with $BUILD_TAGS as -tags when set), one build of DEST at a time.
build() {
	local dest="$1" mod="$2" ldflags="$3"
	shift 3
	if complete "$dest" "$@"; then
		log "cached: $dest"
		return
	fi
	lock "$dest"
	if complete "$dest" "$@"; then
		log "cached: $dest (built by another process meanwhile)"
		return
	fi
	local tmp="$dest.tmp.$$"
	rm -rf "$tmp" && mkdir -p "$tmp"
	log "building $(basename "$dest") ($*) ... this takes minutes on a cold cache"
	local start=$SECONDS
	local tags=()
	[[ -z "${BUILD_TAGS:-}" ]] || tags=(-tags "$BUILD_TAGS")
	(cd "$mod" && go build -trimpath "${tags[@]}" -ldflags "$ldflags" -o "$tmp/" "$@")
	mkdir -p "$dest"
	mv "$tmp"/* "$dest/" && rm -rf "$tmp"
	log "built $(basename "$dest") in $((SECONDS - start))s"
}

kube_ldflags() {
	local v="$KUBE_VERSION" major minor
	major="${v#v}"; major="${major%%.*}"
	minor="${v#v*.}"; minor="${minor%%.*}"
	local f=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		f+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	echo "-s -w$f"
}

# Components: all (the stack: etcd, kube, snapshotter, provisioner) or any of
# them by name, sanity (csi-sanity, for `make sanity`) and node (kubelet,
# kube-scheduler, containerd, runc, CNI plugins: the opt-in node); neither
# is in all.
usage="usage: $0 [all|kube|etcd|snapshotter|provisioner|sanity|node]..."
[[ $# -gt 0 ]] || set -- all
declare -A comps=()
for c in "$@"; do
	case "$c" in
	all) comps[etcd]=1 comps[kube]=1 comps[snapshotter]=1 comps[provisioner]=1 ;;
	kube | etcd | snapshotter | provisioner | sanity | node) comps[$c]=1 ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done

# The default snapshotter's tools module is scripts/tools/snapshotter; other
# versions (SNAPSHOTTER_VERSION=v8.4.0) keep theirs in snapshotter-<version>.
snapshotter_module() {
	local mod="$tools/snapshotter"
	[[ -d "$tools/snapshotter-$SNAPSHOTTER_VERSION" ]] && mod="$tools/snapshotter-$SNAPSHOTTER_VERSION"
	if ! grep -q "github.com/kubernetes-csi/external-snapshotter/v8 $SNAPSHOTTER_VERSION\$" "$mod/go.mod"; then
		log "no tools module pins external-snapshotter $SNAPSHOTTER_VERSION (looked in $mod)"
		exit 2
	fi
	echo "$mod"
}

# The default Kubernetes version's tools module is scripts/tools/kube; the
# other supported minors keep theirs in kube-<version>.
kube_module() {
	local mod="$tools/kube"
	[[ -d "$tools/kube-$KUBE_VERSION" ]] && mod="$tools/kube-$KUBE_VERSION"
	if ! grep -q "^require k8s.io/kubernetes $KUBE_VERSION\$" "$mod/go.mod"; then
		log "no tools module pins k8s.io/kubernetes $KUBE_VERSION (looked in $mod; supported: $KUBE_VERSIONS)"
		exit 2
	fi
	echo "$mod"
}

if [[ -n ${comps[etcd]:-} ]]; then
	if [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
		log "etcd from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
	else
		build "$ETCD_BIN" "$tools/etcd" "-s -w" github.com/pvc-janitor/pvc-janitor/scripts/tools/etcd
	fi
fi
if [[ -n ${comps[snapshotter]:-} ]]; then
	snapmod="$(snapshotter_module)"
	build "$SNAPSHOTTER_BIN" "$snapmod" "-s -w -X main.version=$SNAPSHOTTER_VERSION" \
		github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller \
		github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter
	# The CRDs of the same release ship in its client module.
	[[ -f "$SNAPSHOTTER_BIN/crd/snapshot.storage.k8s.io_volumesnapshots.yaml" ]] || lock "$SNAPSHOTTER_BIN"
	if [[ ! -f "$SNAPSHOTTER_BIN/crd/snapshot.storage.k8s.io_volumesnapshots.yaml" ]]; then
		crd="$(cd "$snapmod" && go list -m -f '{{.Dir}}' github.com/kubernetes-csi/external-snapshotter/client/v8)/config/crd"
		mkdir -p "$SNAPSHOTTER_BIN/crd.tmp.$$"
		cp "$crd"/snapshot.storage.k8s.io_*.yaml "$SNAPSHOTTER_BIN/crd.tmp.$$/"
		chmod 0644 "$SNAPSHOTTER_BIN/crd.tmp.$$"/*
		mv "$SNAPSHOTTER_BIN/crd.tmp.$$" "$SNAPSHOTTER_BIN/crd"
		log "snapshot CRDs copied from $crd"
	fi
fi
if [[ -n ${comps[kube]:-} ]]; then
	pkgs=(k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl)
	if [[ -z "${KUBEBUILDER_ASSETS:-}" || ! -x "$KUBEBUILDER_ASSETS/kube-apiserver" ]]; then
		pkgs=(k8s.io/kubernetes/cmd/kube-apiserver "${pkgs[@]}")
	else
		log "kube-apiserver from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
	fi
	kubemod="$(kube_module)"
	build "$KUBE_BIN" "$kubemod" "$(kube_ldflags)" "${pkgs[@]}"
fi
if [[ -n ${comps[provisioner]:-} ]]; then
	build "$PROVISIONER_BIN" "$tools/provisioner" "-s -w -X main.version=$PROVISIONER_VERSION" \
		github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner
fi
if [[ -n ${comps[sanity]:-} ]]; then
	build "$SANITY_BIN" "$tools/sanity" "-s -w" github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity
fi
if [[ -n ${comps[node]:-} ]]; then
	build "$NODE_BIN" "$(kube_module)" "$(kube_ldflags)" \
		k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler
	BUILD_TAGS="no_btrfs no_devmapper no_zfs" build "$CONTAINERD_BIN" "$tools/containerd" \
		"-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
		github.com/containerd/containerd/v2/cmd/containerd \
		github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
		github.com/containerd/containerd/v2/cmd/ctr
	# runc needs cgo and libseccomp (the pods' RuntimeDefault seccomp
	# profile): Debian's libseccomp-dev, installed here when it is missing.
	if ! command -v pkg-config >/dev/null || ! pkg-config --exists libseccomp; then
		pkgs=(libseccomp-dev pkg-config)
		log "installing ${pkgs[*]} (Debian) for runc's seccomp support"
		command -v apt-get >/dev/null || { log "libseccomp-dev is missing and there is no apt-get: install libseccomp's headers"; exit 1; }
		apt-get install -y -qq "${pkgs[@]}" >&2 ||
			{ apt-get update -qq >&2 && apt-get install -y -qq "${pkgs[@]}" >&2; } ||
			{ log "apt-get install ${pkgs[*]} failed (root needed)"; exit 1; }
	fi
	CGO_ENABLED=1 BUILD_TAGS=seccomp build "$RUNC_BIN" "$tools/runc" "-s -w -X main.version=${RUNC_VERSION#v}" \
		github.com/opencontainers/runc
	build "$CNI_BIN" "$tools/cni" "-s -w" \
		github.com/containernetworking/plugins/plugins/main/bridge \
		github.com/containernetworking/plugins/plugins/main/loopback \
		github.com/containernetworking/plugins/plugins/ipam/host-local
fi
