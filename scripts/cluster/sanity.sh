#!/usr/bin/env bash
# Runs csi-sanity (kubernetes-csi/csi-test, the CSI conformance test) against
# the project's driver, test/cmd/hostpath-csi, served on a unix socket with a fresh
# state folder: every identity, controller, snapshot and node spec. The node
# specs stage and publish with real bind mounts under a temporary folder, so
# they need root; as another user they are skipped (-ginkgo.skip='Node
# Service') and the summary says so.
# csi-sanity is built into the cache first when missing (build.sh sanity,
# about a minute cold). Prints the pass/fail counts last; exits non-zero when
# a spec fails or when the specs that ran and passed are not the expected
# count (50 as root, 35 without the node specs, for csi-sanity v5.6.0).
#
# SANITY_DRIVER=/path/to/hostpath-csi tests that binary instead of building
# this repository's; SANITY_FLAGS adds csi-sanity flags (e.g.
# SANITY_FLAGS=-ginkgo.v).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"
export GOTOOLCHAIN=local CGO_ENABLED=0

sanity="$SANITY_BIN/csi-sanity"
[[ -x "$sanity" ]] || bash "$here/build.sh" sanity

# A short folder: unix socket paths are limited to 108 bytes.
work="$(mktemp -d /tmp/pvc-janitor-sanity.XXXXXX)"
driver_pid=""
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	if [[ -n "$driver_pid" ]]; then
		kill "$driver_pid" 2>/dev/null || true
		wait "$driver_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

driver="${SANITY_DRIVER:-}"
if [[ -z "$driver" ]]; then
	driver="$work/hostpath-csi"
	(cd "$root" && go build -o "$driver" ./test/cmd/hostpath-csi)
fi
sock="$work/csi.sock"
"$driver" --endpoint="unix://$sock" --state-dir="$work/state" 2>"$work/driver.log" &
driver_pid=$!
for _ in $(seq 100); do
	[[ -S "$sock" ]] && break
	sleep 0.1
done
[[ -S "$sock" ]] || { cat "$work/driver.log" >&2; echo "sanity: the driver did not listen on $sock" >&2; exit 1; }

node=(-ginkgo.skip='Node Service')
node_note="node specs skipped (not root: they bind-mount)"
if [[ $EUID -eq 0 ]]; then
	node=() node_note="node specs on"
fi
set +e
# shellcheck disable=SC2086 # SANITY_FLAGS is a list of flags
"$sanity" --csi.endpoint="unix://$sock" --csi.mountdir="$work/mnt" --csi.stagingdir="$work/staging" \
	"${node[@]}" -ginkgo.no-color ${SANITY_FLAGS:-} >"$work/sanity.log" 2>&1
rc=$?
set -e
cat "$work/sanity.log"
if [[ $rc -ne 0 ]]; then
	echo "--- driver log (last 40 lines)"
	tail -n 40 "$work/driver.log"
fi
summary="$(grep -Eo '[0-9]+ Passed \| [0-9]+ Failed \| [0-9]+ Pending \| [0-9]+ Skipped' "$work/sanity.log" | tail -n 1)"
echo "csi-sanity $SANITY_VERSION, $node_note: ${summary:-no summary}"
# The run must be the whole run: exactly the specs csi-sanity runs against
# this driver (the others need capabilities it does not advertise), each
# passed. Fewer (a spec lost to a driver or csi-sanity change, a
# -ginkgo.focus or skip in SANITY_FLAGS, a binary that found no specs)
# fails, whatever the exit code; SANITY_SPECS=N states another count on
# purpose.
case "$SANITY_VERSION" in
v5.6.0) expected=50 ;; # 35 without the node specs
*) expected="" ;;
esac
if [[ -n "$expected" && ${#node[@]} -gt 0 ]]; then
	expected=35
fi
expected="${SANITY_SPECS:-$expected}"
ran="$(grep -Eo 'Ran [0-9]+ of [0-9]+ Specs' "$work/sanity.log" | tail -n 1 | awk '{print $2}')"
passed="$(grep -Eo '^[0-9]+' <<<"$summary" || true)"
if [[ $rc -eq 0 && -z "$expected" ]]; then
	echo "sanity: no expected spec count for csi-sanity $SANITY_VERSION: count a run's specs and set it here (or SANITY_SPECS=N)" >&2
	exit 1
fi
if [[ $rc -eq 0 && ( "${ran:-0}" -ne "$expected" || "${passed:-0}" -ne "$expected" ) ]]; then
	echo "sanity: ${ran:-no} specs ran, ${passed:-no} passed; want $expected of each ($node_note)" >&2
	exit 1
fi
exit $rc
