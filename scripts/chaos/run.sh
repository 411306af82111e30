#!/usr/bin/env bash
# The long chaos profile (make chaos): TestChaos with many iterations of
# `janitor run` as a process through the fault proxy, SIGKILLs, pod churn,
# then faults off and convergence. See docs/reliability.md.
#
#   scripts/chaos/run.sh [RUNS]     RUNS defaults to 500
#
# Environment: PVC_JANITOR_CHAOS_SEED reproduces a run (every failure
# prints its seed), PVC_JANITOR_CHAOS_MAX_RATE caps the fault rates (0.2),
# CHAOS_FEATURE_GATES is passed to kube-apiserver and kube-controller-manager
# as --feature-gates (JANITOR_CLUSTER_FEATURE_GATES of test/testenv; e.g.
# PersistentVolumeClaimUnusedSinceTime=false for a control plane without the
# Unused condition), CHAOS_OUT is where the log and the figures go (default
# ${TMPDIR:-/tmp}/pvc-janitor-chaos, with a -gated suffix under other gates,
# so the figures of the two stacks never overwrite each other),
# CHAOS_TIMEOUT bounds the test (180m). The figures (JSON) are what
# docs/reliability.md records.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=local
runs=${1:-${PVC_JANITOR_CHAOS_RUNS:-500}}
gates=${CHAOS_FEATURE_GATES:-}
out=${CHAOS_OUT:-${TMPDIR:-/tmp}/pvc-janitor-chaos${gates:+-gated}}
mkdir -p "$out"
# Always set, even empty: a JANITOR_CLUSTER_FEATURE_GATES left in the
# environment must not change the stack behind the caller's back.
export JANITOR_CLUSTER_FEATURE_GATES=$gates
rm -f "$out/figures.json"
rm -rf "$out/runs" && mkdir -p "$out/runs"
# Every run's report and log (warn level), one file per process.
export PVC_JANITOR_CHAOS_RUNS=$runs PVC_JANITOR_CHAOS_REPORT=$out/figures.json PVC_JANITOR_CHAOS_LOGS=$out/runs
# CHAOS_ARGS: flags added to every janitor run (e.g. --keep-last 1 --delete-contents).
export PVC_JANITOR_CHAOS_ARGS=${CHAOS_ARGS:-}
echo "chaos: $runs iterations on a control plane with ${gates:+--feature-gates=}${gates:-the default feature gates}; log in $out/log.txt"
start=$(date +%s)
status=0
go test -tags integration -count=1 -timeout "${CHAOS_TIMEOUT:-180m}" -v -run '^TestChaos$' ./test/e2e/ >"$out/log.txt" 2>&1 || status=$?
echo "chaos: ended after $(( $(date +%s) - start ))s with status $status"
if [[ $status -ne 0 ]]; then
	grep -E 'PVC_JANITOR_CHAOS_SEED=|--- FAIL' "$out/log.txt" | head -20 || true
	echo "chaos: FAILED; full log: $out/log.txt"
	exit "$status"
fi
cat "$out/figures.json"
