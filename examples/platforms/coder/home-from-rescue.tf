# The home claim of coder/coder's examples/templates/kubernetes/main.tf,
# created from the janitor's newest rescue of it when there is one
# (docs/platforms.md#coder-kubernetes-templates).
#
# Use it in place of the template's resource
# "kubernetes_persistent_volume_claim" "home", and point the Deployment's
# volume at it:
#
#   persistent_volume_claim {
#     claim_name = kubernetes_manifest.home.manifest.metadata.name
#   }
#
# Why a kubernetes_manifest: the provider's kubernetes_persistent_volume_claim
# has no dataSource field. Why ignore_changes: a claim's dataSourceRef is
# immutable, and a rescue appears while the claim still exists (the janitor
# rescues a claim before it reaps it); the manifest is read once, when the
# claim is created, which is when the janitor has reaped it and a start
# creates it again.
#
# It assumes the janitor's configuration of examples/platforms/coder/
# janitor.yaml (workspace label com.coder.workspace.id). It picks, as
# `janitor restore --workspace` does, the janitor's ready rescue with the
# newest data time (pvc-janitor.io/orphaned-since), never an archive; it
# does not apply restore's other refusals (docs/spec.md#restore-refusals),
# which only matter when another claim of the workspace holds data: this
# template has one claim per workspace, and it is gone when this runs.
# Not run by this project's tests (they need no Terraform): the objects it
# makes are those test/platforms checks.

locals {
  home_claim = "coder-${data.coder_workspace.me.id}-home"
}

data "kubernetes_resources" "home_rescues" {
  api_version    = "snapshot.storage.k8s.io/v1"
  kind           = "VolumeSnapshot"
  namespace      = var.namespace
  label_selector = "app.kubernetes.io/managed-by=pvc-janitor,com.coder.workspace.id=${data.coder_workspace.me.id},pvc-janitor.io/superseded!=true"
}

locals {
  # "<data time>/<name>" of each ready rescue of this very claim: RFC 3339
  # times in UTC, as the janitor writes them, sort as text.
  home_rescues = sort([
    for s in data.kubernetes_resources.home_rescues.objects :
    "${s.metadata.annotations["pvc-janitor.io/orphaned-since"]}/${s.metadata.name}"
    if try(s.status.readyToUse, false) == true &&
    try(s.status.error, null) == null &&
    try(s.metadata.deletionTimestamp, null) == null &&
    try(s.metadata.annotations["pvc-janitor.io/source-name"], "") == local.home_claim
  ])
  home_rescue = length(local.home_rescues) == 0 ? "" : split("/", local.home_rescues[length(local.home_rescues) - 1])[1]
}

resource "kubernetes_manifest" "home" {
  manifest = {
    apiVersion = "v1"
    kind       = "PersistentVolumeClaim"
    metadata = {
      name      = local.home_claim
      namespace = var.namespace
      labels = {
        "app.kubernetes.io/name"     = "coder-pvc"
        "app.kubernetes.io/instance" = "coder-pvc-${data.coder_workspace.me.id}"
        "app.kubernetes.io/part-of"  = "coder"
        "com.coder.resource"         = "true"
        "com.coder.workspace.id"     = data.coder_workspace.me.id
        "com.coder.workspace.name"   = data.coder_workspace.me.name
        "com.coder.user.id"          = data.coder_workspace_owner.me.id
        "com.coder.user.username"    = data.coder_workspace_owner.me.name
      }
      annotations = {
        "com.coder.user.email" = data.coder_workspace_owner.me.email
      }
    }
    spec = merge(
      {
        accessModes = ["ReadWriteOnce"]
        resources = {
          requests = { storage = "${data.coder_parameter.home_disk_size.value}Gi" }
        }
      },
      # dataSourceRef only when there is a rescue: a new workspace starts empty.
      { for k, v in {
        dataSourceRef = {
          apiGroup = "snapshot.storage.k8s.io"
          kind     = "VolumeSnapshot"
          name     = local.home_rescue
        }
      } : k => v if local.home_rescue != "" },
    )
  }

  lifecycle {
    ignore_changes = [manifest]
  }
}
