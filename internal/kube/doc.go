// Package kube is the janitor's I/O with the API server: client
// construction from a kubeconfig, the retry policy, and the paginated,
// concurrent, per-page-reduced reads that build an inventory.
//
// Files, by job:
//   - client.go: the clients of a run, the API server's clock, and the log
//     of the uses a run saw;
//   - api.go: the typed client of the built-in groups the janitor calls
//     (not client-go's Clientset: why is there);
//   - retry.go: the API server's use of the one retry policy (RetryPolicy,
//     retry.Policy with Transient, the classification of its errors);
//   - read.go, list.go, storage.go, convert.go, referrers.go, owners.go:
//     the scan's read (Read), described at the top of read.go;
//   - recheck.go: the re-check's read of one namespace just before a rescue;
//   - events.go: the Events written on claims.
//
// The wire formats of the list responses (the protobuf envelope, the
// snapshot CRDs' JSON, the few fields of a pod the scan needs) are decoded
// by the sub-package wire, which needs no cluster to test.
package kube
