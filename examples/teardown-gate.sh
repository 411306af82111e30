#!/usr/bin/env bash
# teardown-gate.sh: the gate to run before tearing a cluster (or several)
# down.
#
# It runs `janitor guard --rescue --export FILE`: first every orphaned
# workspace claim is rescued into a VolumeSnapshot (and waited for), then
# the copies holding each workspace's newest data are exported to a bundle
# (their VolumeSnapshotContents set to Retain, so the storage snapshots
# outlive the cluster; `janitor import FILE` brings them into the next
# cluster: docs/operations.md#rotating-a-cluster), then every claim in scope
# is judged. The gate opens (exit 0) only when nothing in scope holds data
# the teardown would lose and every copy at risk is in the bundle. Anything else keeps it shut with a non-zero exit,
# so a pipeline step `teardown-gate.sh && terraform destroy` (or a CI job
# whose next step is the teardown) never destroys a workspace's last data.
#
# Usage:
#   teardown-gate.sh [EXTRA JANITOR FLAGS...]
#
#   KUBECONFIG=~/.kube/prod GATE_NAMESPACES=ws-team-a,ws-team-b ./teardown-gate.sh
#   ./teardown-gate.sh --snapshot-class csi-retain --snapshot-timeout 20m
#   GATE_EXPORT=bundles/eu-1.yaml ./teardown-gate.sh   # keep the bundle as a CI artifact
#   GATE_CONTEXTS=ws-eu-1,ws-us-2 ./teardown-gate.sh    # two clusters, one gate
#
# Settings (environment; the defaults match examples/workspace-platform.yaml):
#   GATE_CONTEXTS         comma-separated kubeconfig contexts: one gate over
#                         several clusters (each checked and rescued on its
#                         own, concurrently; one report with a CLUSTER
#                         column). It opens only when every cluster passes;
#                         the exit code is the most serious of the
#                         clusters' (see below). Empty: the current context
#   GATE_ALL_CONTEXTS     1: every context of the kubeconfig (instead of
#                         GATE_CONTEXTS)
#   GATE_JANITOR          the janitor binary (default: janitor on PATH; a
#                         krew install is kubectl-janitor)
#   GATE_NAMESPACES       comma-separated namespaces to check; empty: every
#                         namespace except GATE_EXCLUDE_NAMESPACES
#   GATE_EXCLUDE_NAMESPACES  comma-separated (default: kube-system,kube-public,kube-node-lease)
#   GATE_SELECTOR         label selector of the workspace claims (required
#                         by --rescue; default
#                         app.kubernetes.io/component=workspace,app.kubernetes.io/managed-by=workspace-manager)
#   GATE_WORKSPACE_LABEL  label naming a claim's workspace (default workspaces.example.com/id)
#   GATE_LOCK_NAMESPACE   namespace of the janitor's Lease (default default, the
#                         janitor's and the chart's): the same as the
#                         CronJob's, so the gate and a scheduled run never
#                         work at the same time
#   GATE_EXPORT           the bundle to export to (default teardown-bundle.yaml;
#                         empty: no export, e.g. when the storage snapshots
#                         are kept outside the cluster anyway). A bundle is
#                         of one cluster: with GATE_CONTEXTS or
#                         GATE_ALL_CONTEXTS the default is no export, and a
#                         GATE_EXPORT is refused (run the gate per cluster)
#   GATE_OUTPUT           report format: table, wide, json or yaml (default wide)
#   GATE_REPORT           also write the report to this file (e.g. a CI artifact)
#   GATE_LOCK_RETRIES     how often to retry while another run holds the
#                         Lease (default 5)
#   GATE_LOCK_WAIT        seconds between those retries (default 30)
# Every janitor setting can also come from its own environment variable
# (JANITOR_<FLAG NAME>, e.g. JANITOR_CONTEXT=prod) or from the extra flags;
# the cluster is the one of KUBECONFIG / --kubeconfig / --context.
#
# The identity it runs as needs the janitor's read rights, create/get/delete
# on VolumeSnapshots, patch on claims and create on events (the chart's
# ClusterRole, without using its delete on claims), the Lease in
# GATE_LOCK_NAMESPACE and, to export, patch on VolumeSnapshotContents
# (without it the gate stays shut with exit 2 and writes no bundle).
#
# Exit codes:
#   0    gate open: every claim in scope is in use, young, unbound,
#        terminating or rescued by a snapshot that survives the teardown,
#        at least --min-claims (default 1) claims are in scope, and (with
#        GATE_EXPORT) every copy at risk is in the bundle, its content Retain.
#        An empty scope keeps the gate shut (exit 3): a selector that
#        matches nothing looks the same as a cluster without workspaces,
#        and must not pass. For a cluster that may have no workspaces,
#        pass --min-claims 0.
#   3    gate shut: claims hold data a teardown would lose (a copy that
#        could not be exported among them), or fewer claims
#        than --min-claims are in scope (the janitor's last line says
#        which). Those at risk are listed
#        first in the report with the reason. Typical fixes: wait and rerun
#        (Snapshotting, Grace), fix the snapshot class (SnapshotFailed), let
#        a node detach (Attached), decide about Superseded and Held claims
#        (remove the hold, or archive/delete them consciously), or use a
#        snapshot class with deletionPolicy Retain (or --allow-delete-policy
#        if the snapshots live outside the cluster anyway).
#   With several clusters the exit code is the most serious of theirs, in
#   the order 2, 1, 5, 3, 4, 0: an unreachable cluster (1) shuts the gate
#   even when the others pass, and the report names it in its own line.
#   other  gate shut because the check itself did not complete: 1 runtime
#        error (API server unreachable, a forbidden read), 2 usage or
#        configuration error, 4 partial failure, 5 another run kept the Lease
#        through every retry, 130/143 interrupted, 127 janitor not found. A
#        check that did not finish never counts as a pass.
set -euo pipefail

readonly EXIT_OK=0 EXIT_DATA_AT_RISK=3 EXIT_LOCK_HELD=5

janitor="${GATE_JANITOR:-janitor}"
namespaces="${GATE_NAMESPACES:-}"
exclude="${GATE_EXCLUDE_NAMESPACES-kube-system,kube-public,kube-node-lease}"
selector="${GATE_SELECTOR-app.kubernetes.io/component=workspace,app.kubernetes.io/managed-by=workspace-manager}"
workspace_label="${GATE_WORKSPACE_LABEL-workspaces.example.com/id}"
lock_namespace="${GATE_LOCK_NAMESPACE:-default}"
output="${GATE_OUTPUT:-wide}"
report="${GATE_REPORT:-}"
lock_retries="${GATE_LOCK_RETRIES:-5}"
lock_wait="${GATE_LOCK_WAIT:-30}"
contexts="${GATE_CONTEXTS:-}"
all_contexts="${GATE_ALL_CONTEXTS:-}"
if [[ -n "$contexts" || -n "$all_contexts" ]]; then
	export_file="${GATE_EXPORT-}"
else
	export_file="${GATE_EXPORT-teardown-bundle.yaml}"
fi

log() { printf 'teardown-gate: %s\n' "$*" >&2; }

if ! command -v -- "$janitor" >/dev/null 2>&1; then
	log "janitor not found (GATE_JANITOR=$janitor): install a release or set GATE_JANITOR"
	log "GATE SHUT: the check could not run"
	exit 127
fi
if [[ -z "$selector" ]]; then
	# The janitor refuses this too (exit 2); say it in the gate's words.
	log "GATE_SELECTOR is empty: the gate must know which claims are workspaces"
	log "GATE SHUT: the check could not run"
	exit 2
fi
if ! [[ "$lock_retries" =~ ^[0-9]+$ && "$lock_wait" =~ ^[0-9]+$ ]]; then
	log "GATE_LOCK_RETRIES and GATE_LOCK_WAIT must be whole numbers"
	exit 2
fi

args=(guard --rescue --selector "$selector" --lock-namespace "$lock_namespace" --output "$output")
if [[ -n "$namespaces" ]]; then
	args+=(--namespace "$namespaces")
else
	args+=(--all-namespaces)
fi
if [[ -n "$exclude" ]]; then
	args+=(--exclude-namespace "$exclude")
fi
if [[ -n "$workspace_label" ]]; then
	args+=(--workspace-label "$workspace_label")
fi
if [[ -n "$contexts" && -n "$all_contexts" ]]; then
	log "GATE_CONTEXTS and GATE_ALL_CONTEXTS are exclusive"
	log "GATE SHUT: the check could not run"
	exit 2
fi
if [[ -n "$export_file" && (-n "$contexts" || -n "$all_contexts") ]]; then
	log "GATE_EXPORT: a bundle is of one cluster; run the gate once per cluster to export each"
	log "GATE SHUT: the check could not run"
	exit 2
fi
if [[ -n "$export_file" ]]; then
	args+=(--export "$export_file")
fi
if [[ -n "$contexts" ]]; then
	args+=(--context "$contexts")
elif [[ "$all_contexts" == 1 ]]; then
	args+=(--all-contexts)
fi
args+=("$@")

# run_guard runs the janitor once; the report goes to stdout (and to
# GATE_REPORT), the janitor's logs to stderr. It returns the janitor's exit
# code (or tee's, should writing the report fail: also a shut gate).
run_guard() {
	local status=0
	log "running: $janitor ${args[*]}"
	if [[ -n "$report" ]]; then
		"$janitor" "${args[@]}" | tee -- "$report" || status=$?
	else
		"$janitor" "${args[@]}" || status=$?
	fi
	return "$status"
}

attempt=0
while :; do
	status=0
	run_guard || status=$?
	if [[ "$status" -ne "$EXIT_LOCK_HELD" || "$attempt" -ge "$lock_retries" ]]; then
		break
	fi
	attempt=$((attempt + 1))
	log "another janitor run holds the Lease in $lock_namespace (in a cluster the report names); retry $attempt/$lock_retries in ${lock_wait}s"
	sleep "$lock_wait"
done

case "$status" in
"$EXIT_OK")
	log "GATE OPEN: no claim in scope holds data the teardown would lose"
	if [[ -n "$export_file" ]]; then
		log "bundle: $export_file (keep it; janitor import $export_file in the next cluster brings the copies back)"
	fi
	exit 0
	;;
"$EXIT_DATA_AT_RISK")
	log "GATE SHUT (exit 3): claims in scope hold data the teardown would lose (listed first above, with the reason), or fewer claims than --min-claims are in scope (an empty scope: check the selector)"
	log "rerun once they are rescued, or decide about each of them; do NOT tear down"
	exit "$status"
	;;
"$EXIT_LOCK_HELD")
	log "GATE SHUT (exit 5): another janitor run kept the Lease in $lock_namespace through $lock_retries retries"
	exit "$status"
	;;
*)
	log "GATE SHUT (exit $status): the check did not complete (1 runtime error, 2 usage or configuration, 4 partial failure, 130/143 interrupted); see the log above"
	exit "$status"
	;;
esac
