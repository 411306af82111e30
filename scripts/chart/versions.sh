# Pinned Helm of the chart tests. Sourced by scripts/chart/*.sh; the Go chart
# tests (test/charttest) evaluate it too, so the two never disagree.
# shellcheck source=../cluster/versions.sh
. "$(dirname "${BASH_SOURCE[0]}")/../cluster/versions.sh"
HELM_VERSION=v3.22.0
HELM_BIN="$BIN_ROOT/helm-$HELM_VERSION"
