#!/usr/bin/env bash
# make chart-test: the Helm chart's tests (test/charttest): helm lint and
# helm template for every charts/pvc-janitor/ci/*-values.yaml, a server-side
# dry run of every rendering on the local control plane, the rendered
# configuration loaded by the janitor, the RBAC checked rule by rule, and the
# RBAC proof (the janitor run with only the chart's ServiceAccount token).
# Builds the pinned Helm and the control plane into the cache first (cached:
# seconds). Extra arguments go to go test, e.g. -run TestRBACProof -v.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export GOTOOLCHAIN=local CGO_ENABLED=0
bash "$here/build-helm.sh" >/dev/null
bash "$root/scripts/cluster/build.sh" all
cd "$root"
exec go test -tags integration -count=1 "$@" ./test/charttest/
