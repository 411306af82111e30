{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "pvc-janitor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects; the CronJob's name must leave room
for the Job suffix (11 characters), hence 52. */}}
{{- define "pvc-janitor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pvc-janitor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pvc-janitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pvc-janitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pvc-janitor.labels" -}}
helm.sh/chart: {{ include "pvc-janitor.chart" . }}
{{ include "pvc-janitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: janitor
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "pvc-janitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pvc-janitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pvc-janitor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The namespace of the run's Lease: unless set, the janitor's own default
(default), so that a manual run with default flags and the CronJob take one
Lease whatever the release namespace (docs/spec.md#run-lease). */}}
{{- define "pvc-janitor.lockNamespace" -}}
{{- default "default" (get .Values.config "lock-namespace") }}
{{- end }}

{{/* The namespaces the janitor looks at, as a list (empty: all). */}}
{{- define "pvc-janitor.namespaces" -}}
{{- $ns := get .Values.config "namespace" | default list }}
{{- if kindIs "string" $ns }}{{ $ns = splitList "," $ns }}{{ end }}
{{- $out := list }}
{{- range $ns }}{{ $n := trim . }}{{ if $n }}{{ $out = append $out $n }}{{ end }}{{ end }}
{{- toJson (uniq $out) }}
{{- end }}

{{/* Refuses configurations the janitor would refuse at every run, so that a
broken release fails at install time instead of on every schedule. */}}
{{- define "pvc-janitor.validate" -}}
{{- $c := .Values.config }}
{{- $ns := include "pvc-janitor.namespaces" . | fromJsonArray }}
{{- if and (not (get $c "selector")) (not (get $c "all-claims")) }}
{{- fail "config.selector is required (a label selector of the workspace claims, e.g. app=ide); set config.all-claims=true to act on every claim in scope" }}
{{- end }}
{{- if and (get $c "all-namespaces") $ns }}
{{- fail "set either config.all-namespaces=true or a list in config.namespace, not both" }}
{{- end }}
{{- if and (not (get $c "all-namespaces")) (not $ns) }}
{{- fail "set config.all-namespaces=true or list the namespaces to look at in config.namespace" }}
{{- end }}
{{- if and .Values.rbac.namespaced (get $c "all-namespaces") }}
{{- fail "rbac.namespaced=true needs the namespaces listed in config.namespace (all-namespaces needs the ClusterRole)" }}
{{- end }}
{{- end }}

{{/* The configuration file: the values' config with the chart's own keys,
empty values left out (the janitor's defaults apply). */}}
{{- define "pvc-janitor.config" -}}
{{- $out := dict }}
{{- range $k, $v := .Values.config }}
{{- if not (or (kindIs "invalid" $v) (and (kindIs "string" $v) (eq $v "")) (and (kindIs "slice" $v) (eq (len $v) 0))) }}
{{- $_ := set $out $k $v }}
{{- end }}
{{- end }}
{{- $_ := set $out "lock-namespace" (include "pvc-janitor.lockNamespace" .) }}
{{- /* marks-only is an argument of the CronJob, not a key: helm test's scan --dry-run reads this file too. */}}
{{- $_ := set $out "dry-run" (and .Values.dryRun (not .Values.marksOnly) | default false) }}
{{- $ret := .Values.retention | default dict }}
{{- with $ret.keepFor }}{{ $_ := set $out "keep-for" (toString .) }}{{ end }}
{{- with $ret.keepLast }}{{ $_ := set $out "keep-last" (int64 .) }}{{ end }}
{{- $prices := list }}
{{- range $class, $price := (.Values.prices | default dict) }}
{{- $prices = append $prices (printf "%s=%v" $class $price) }}
{{- end }}
{{- with $prices }}{{ $_ := set $out "price" . }}{{ end }}
{{- if not (kindIs "invalid" .Values.snapshotPrice) }}
{{- $_ := set $out "snapshot-price" (printf "%v" .Values.snapshotPrice) }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/* contents.delete: the janitor may set a Retain content of its own rescue
to Delete before deleting the rescue (--delete-contents). */}}
{{- define "pvc-janitor.deleteContents" -}}
{{- if (.Values.contents | default dict).delete }}true{{ end }}
{{- end }}

{{/*
RBAC: exactly the API calls the janitor makes (see the README, "RBAC").
Reads are list (and watch); the janitor watches only VolumeSnapshots.
*/}}

{{/* Namespaced resources: in the ClusterRole, or in each namespace's Role. */}}
{{- define "pvc-janitor.namespacedRules" -}}
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "patch", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshots"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments", "replicasets", "daemonsets", "statefulsets"]
  verbs: ["list"]
- apiGroups: ["batch"]
  resources: ["jobs", "cronjobs"]
  verbs: ["list"]
{{- end }}

{{/* Cluster-scoped resources: always in a ClusterRole. get on
VolumeSnapshotClasses checks --snapshot-class before anything is written;
get on VolumeSnapshotContents reads a rescue's content by name (the
rescue's wait, the reap's re-read right before a delete); patch on them
only with contents.delete. */}}
{{- define "pvc-janitor.clusterScopedRules" -}}
- apiGroups: [""]
  resources: ["persistentvolumes"]
  verbs: ["list"]
- apiGroups: ["storage.k8s.io"]
  resources: ["volumeattachments"]
  verbs: ["list"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["get", "list"]
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotclasses"]
  verbs: ["get", "list"]
{{- if include "pvc-janitor.deleteContents" . }}
# contents.delete: set a Retain content of the janitor's own rescue to
# Delete (a JSON patch that first tests the content's volumeSnapshotRef UID)
# just before deleting the rescue, and back to Retain for a rescue kept after
# all (in the same run, or by the next run from its prune-intent).
- apiGroups: ["snapshot.storage.k8s.io"]
  resources: ["volumesnapshotcontents"]
  verbs: ["patch"]
{{- end }}
{{- end }}

{{/* The run's Lease, in the lock namespace only. create cannot be limited
to a name; everything else is limited to the one Lease. */}}
{{- define "pvc-janitor.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["pvc-janitor"]
  verbs: ["get", "update", "delete"]
{{- end }}
