# shellcheck shell=bash disable=SC2034  # sourced; the variables are its output
# Pinned versions of the local control plane. Sourced by the cluster scripts;
# the Go test helper reads the same cache folders (test/testenv).
# JANITOR_KUBE_VERSION picks another supported minor (v1.35.4, v1.36.3; the
# default is the newest). Each version's tools module is
# scripts/tools/kube-<version> (the default's is scripts/tools/kube), and its
# build gets its own cache folder.
KUBE_VERSION="${JANITOR_KUBE_VERSION:-v1.37.2}"
# The minors the janitor supports and make matrix runs, oldest first.
KUBE_VERSIONS="v1.35.4 v1.36.3 v1.37.2"
ETCD_VERSION=v3.6.16
# SNAPSHOTTER_VERSION=v8.4.0 in the environment selects the previous
# release: its tools module is kept in scripts/tools/snapshotter-v8.4.0 (the
# default's is scripts/tools/snapshotter) and its build in its own folder.
SNAPSHOTTER_VERSION="${SNAPSHOTTER_VERSION:-v8.7.0}"
PROVISIONER_VERSION=v6.4.0
SANITY_VERSION=v5.6.0
CACHE_ROOT="${PVC_JANITOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvc-janitor}"
BIN_ROOT="$CACHE_ROOT/bin"
KUBE_BIN="$BIN_ROOT/kube-$KUBE_VERSION"
ETCD_BIN="$BIN_ROOT/etcd-$ETCD_VERSION"
SNAPSHOTTER_BIN="$BIN_ROOT/snapshotter-$SNAPSHOTTER_VERSION"
PROVISIONER_BIN="$BIN_ROOT/provisioner-$PROVISIONER_VERSION"
# csi-sanity, the CSI conformance test of `make sanity` (not part of the stack).
SANITY_BIN="$BIN_ROOT/sanity-$SANITY_VERSION"
# The opt-in node (JANITOR_CLUSTER_NODE=1, docs/node.md): kubelet and
# kube-scheduler of KUBE_VERSION, containerd, runc (cgo, libseccomp) and the
# CNI plugins, each built from its Go module (scripts/tools/<name>).
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CNI_VERSION=v1.10.0
NODE_BIN="$BIN_ROOT/node-$KUBE_VERSION"
CONTAINERD_BIN="$BIN_ROOT/containerd-$CONTAINERD_VERSION"
RUNC_BIN="$BIN_ROOT/runc-$RUNC_VERSION"
CNI_BIN="$BIN_ROOT/cni-$CNI_VERSION"
# Linters the examples tests run (test/examplestest): actionlint is built
# from its Go module into the cache; shellcheck is the Debian package.
ACTIONLINT_VERSION=v1.7.12
ACTIONLINT_BIN="$BIN_ROOT/actionlint-$ACTIONLINT_VERSION"
