// Package charttest holds the tests of the Helm chart charts/pvc-janitor
// (it has no code of its own): helm lint and helm template for every
// ci/*-values.yaml, the rendered manifests applied with a server-side dry
// run to the local control plane, the rendered configuration loaded by the
// janitor's own config loader, a static check that the RBAC grants nothing
// beyond what the janitor uses, and the RBAC proof: the chart's
// ServiceAccount, roles and bindings applied for real, a token minted for
// that ServiceAccount, and the janitor binary run with only that token
// against seeded claims, exactly as the CronJob runs it; with retention, the
// same token cannot set a Retain VolumeSnapshotContent to Delete (403) until
// contents.delete grants it, and then the CronJob's run prunes the rescue.
//
// Helm is the pinned helm.sh/helm/v3 built into the cache by
// scripts/chart/build-helm.sh; kubectl is the local cluster's.
package charttest
