#!/usr/bin/env bash
# make demo NODE=1, after the API-only demo: the janitor as users run it, on
# the local cluster's node (docs/node.md). A workspace pod writes a file to
# its claim and stops; the Helm chart, installed with the image built from
# this checkout, runs one Job from its CronJob, whose log is the report; the
# claim is rescued and reaped; a restored claim, mounted by a new pod, gives
# the file back. The CronJob is suspended: its runs here are the ones the
# demo creates (a scheduled run could hold the Lease during them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/scripts/cluster"
# shellcheck source=versions.sh
. "$here/versions.sh"
dir="${JANITOR_CLUSTER_DIR:?}"
export KUBECONFIG="$dir/kubeconfig"
[[ -f "$dir/node" ]] || { echo "the cluster in $dir has no node: make cluster-down, then make demo NODE=1" >&2; exit 2; }
kubectl() { "$KUBE_BIN/kubectl" "$@"; }
helm="$(bash "$root/scripts/chart/build-helm.sh" 2>/dev/null)"
export HELM_CACHE_HOME="$dir/helm/cache" HELM_CONFIG_HOME="$dir/helm/config" HELM_DATA_HOME="$dir/helm/data"
ns=pvc-janitor-node-demo
say() { printf '\n$ %s\n' "$*"; }
run() { say "$*"; "$@"; }

kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n "$ns" delete pod,pvc --all --wait=true >/dev/null 2>&1 || true
text="nora's notes, $(date -u +%FT%TZ)"
workspace() { # name claim args...
	local name="$1" claim="$2"
	shift 2
	local args=""
	for a in "$@"; do args+="\"$a\", "; done
	cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $ns}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 65532, runAsNonRoot: true, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: workspace
    image: pvc-janitor.local/workspace:1
    imagePullPolicy: Never
    args: [${args%, }]
    volumeMounts: [{name: data, mountPath: /data}]
    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
  volumes: [{name: data, persistentVolumeClaim: {claimName: $claim}}]
YAML
}

echo; echo "--- The node: a workspace writes, stops, and the chart's CronJob rescues and reaps it"
cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ws-nora, namespace: $ns, labels: {app: ide, workspace: nora}}
spec: {accessModes: [ReadWriteOnce], storageClassName: pvc-janitor-csi, resources: {requests: {storage: 1Gi}}}
YAML
kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Bound pvc/ws-nora --timeout=120s >/dev/null
workspace ws-nora ws-nora write /data/notes.md "$text" | kubectl apply -f - >/dev/null
run kubectl -n "$ns" wait --for=condition=Ready pod/ws-nora --timeout=120s
run kubectl -n "$ns" logs ws-nora
run kubectl -n "$ns" delete pod ws-nora
# The Unused condition follows the pod (Kubernetes 1.37+; absent before).
kubectl -n "$ns" wait --for=condition=Unused pvc/ws-nora --timeout=60s >/dev/null 2>&1 || true
run "$helm" upgrade --install pvc-janitor "$root/charts/pvc-janitor" -n pvc-janitor --create-namespace \
	--set image.repository=ghcr.io/pvc-janitor/pvc-janitor --set image.tag=0.0.0-local --set image.pullPolicy=Never \
	--set dryRun=false --set suspend=true --set config.all-namespaces=false --set "config.namespace={$ns}" \
	--set config.selector=app=ide --set config.workspace-label=workspace \
	--set config.min-age=0s --set config.grace-period=0s --set config.max-deletion-percent=100 >/dev/null
job="demo-$(date +%s)"
run kubectl -n pvc-janitor create job "$job" --from=cronjob/pvc-janitor
run kubectl -n pvc-janitor wait --for=condition=Complete "job/$job" --timeout=180s
say kubectl -n pvc-janitor logs "job/$job" "# the run's report"
kubectl -n pvc-janitor logs "job/$job" | grep -v '^{"level"'
run kubectl -n "$ns" get pvc
echo; echo "--- The way back: restore ws-nora and read the file in a new pod"
kubectl -n "$ns" wait --for=delete pvc/ws-nora --timeout=120s >/dev/null 2>&1 || true
run "$root/bin/janitor" restore "$ns/ws-nora" --log-level warn -o table
workspace ws-nora-read ws-nora cat /data/notes.md | kubectl apply -f - >/dev/null
kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Succeeded pod/ws-nora-read --timeout=120s >/dev/null
run kubectl -n "$ns" logs ws-nora-read
got="$(kubectl -n "$ns" logs ws-nora-read)"
[[ "$got" == "$text" ]] || { echo "read back \"$got\", want \"$text\"" >&2; exit 1; }
echo; echo "The file came back byte for byte."
