package reap

import (
	"fmt"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/apistub"
)

// TestReapRequestsPerClaim counts what the delete loop sends per reaped
// claim, against the stub of stub_test.go (a stub pinning what the
// orchestration loop sends, not a model of the API server): N rescued
// claims in one namespace, with pods that use other claims, all deleted.
// The re-read before the deletions (kube.Read) is the run's, not the
// claim's, and is not counted here; make bench counts the whole command.
//
// The ceilings are issue 43's: per claim the delete, the Reaped Event and
// the rescue's re-read (its content, by name); per batch
// (docs/spec.md#reap-batch) one list of the namespace's snapshots and one
// of its pods, so that the objects read per claim are the namespace's
// pods and snapshots divided by the batch size, not multiplied by the
// claims.
func TestReapRequestsPerClaim(t *testing.T) {
	const n, batch = 40, 10
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ws-%02d", i)
	}
	s, ds := world(t, names...)
	for i := range 50 {
		s.pods = append(s.pods, podUsing(fmt.Sprintf("ide-%02d", i), fmt.Sprintf("other-%02d", i)))
	}
	res := reapOne(t, s.clients(t), ds, Options{BatchSize: batch})
	for _, name := range names {
		if out := outcome(t, res, name); out.Action != ActionDeleted {
			t.Fatalf("%s: %+v, want deleted", name, out)
		}
	}
	counts := apistub.ByVerbAndResource(s.Requests())
	t.Logf("reap of %d rescued claims in batches of %d: %s; pod objects read per claim: %d (all %d of the namespace per batch)",
		n, batch, apistub.PerClaim(counts, n), counts["LIST pods"]*len(s.pods)/n, len(s.pods))
	perClaimCeiling := map[string]int{
		"DELETE persistentvolumeclaims": 1, // with Preconditions{UID, ResourceVersion}
		"POST events":                   1, // Reaped
		"GET volumesnapshotcontents":    1, // the rescue's content, by name
	}
	perBatch := map[string]int{
		"LIST volumesnapshots": 1, // the rescues, read again
		"LIST pods":            1, // begun after every re-read of the batch
	}
	batches := (n + batch - 1) / batch
	perClaimTotal := 0
	for k, v := range counts {
		if max, ok := perClaimCeiling[k]; ok {
			perClaimTotal += v
			if v > max*n {
				t.Errorf("%s: %d for %d claims, want at most %d per claim", k, v, n, max)
			}
			continue
		}
		if max, ok := perBatch[k]; !ok || v > max*batches {
			t.Errorf("%s: %d for %d claims in %d batches, want at most %d per batch", k, v, n, batches, perBatch[k])
		}
	}
	if perClaimTotal > 3*n {
		t.Errorf("%d requests for %d reaped claims besides the batches' lists, want at most 3 per claim", perClaimTotal, n)
	}
}
