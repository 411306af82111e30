package reap

import (
	"context"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// The checks right before the deletes, by batch (docs/spec.md#reap-batch).
// A batch is up to BatchSize claims of one namespace, taken in the plan's
// order. For each batch, in this order:
//
//  1. the rescues of its claims are read again: one list of the
//     namespace's VolumeSnapshots, then each rescue's content by name (a
//     get), each judged by StillJustified;
//  2. the pods of the namespace are listed, one list begun after every
//     re-read of step 1;
//  3. the claims still justified are deleted one after another, each
//     only while no pod list of the run showed it in use, and only while
//     that pod list answered at most BatchMaxAge ago (the claims left go
//     to a new batch, read again);
//  4. the batch's Events are sent.
//
// So every first delete attempt is preceded by a pod list begun after its
// own rescue's re-read, and the deletes of a batch follow its pod list
// with nothing but deletes in between. What a per-claim list would see
// and a batch's does not: a pod that starts after the batch's list began
// and before the claim's delete; the window is at most BatchSize deletes
// and BatchMaxAge after the list answered (docs/safety.md).

// Batch defaults.
const (
	// DefaultBatchSize is the most claims one pod list serves: at the
	// default --qps 50, about two seconds of deletes.
	DefaultBatchSize = 100
	// DefaultBatchMaxAge bounds the time from a batch's pod list's answer
	// to a delete it serves, as kube.DefaultRecheckMaxAge bounds the age
	// of the namespace read a rescue's re-check shares.
	DefaultBatchMaxAge = 2 * time.Second
)

func (o Options) batchSize() int {
	if o.BatchSize > 0 {
		return o.BatchSize
	}
	return DefaultBatchSize
}

func (o Options) batchMaxAge() time.Duration {
	if o.BatchMaxAge > 0 {
		return o.BatchMaxAge
	}
	return DefaultBatchMaxAge
}

// deleteAll deletes the claims of p.del batch by batch.
func (p *plan) deleteAll(ctx context.Context, c *kube.Clients, o Options, seen *uses) []Outcome {
	var outs []Outcome
	asked := map[*classify.Decision]bool{}
	rest := p.del
	for len(rest) > 0 {
		if ctx.Err() != nil {
			for _, d := range rest {
				outs = append(outs, Outcome{Namespace: d.Claim.Namespace, Name: d.Claim.Name, Action: ActionSkipped, State: d.State, Message: "interrupted before deleting"})
			}
			break
		}
		n := batchLen(rest, o.batchSize())
		bo, left := p.deleteBatch(ctx, c, rest[:n], o, seen, asked)
		outs = append(outs, bo...)
		rest = append(left, rest[n:]...)
	}
	return outs
}

// batchLen is the length of the batch at the head of ds: up to size
// claims of the namespace of ds[0], in a row.
func batchLen(ds []*classify.Decision, size int) int {
	n := 1
	for n < len(ds) && n < size && ds[n].Claim.Namespace == ds[0].Claim.Namespace {
		n++
	}
	return n
}

// deleteBatch runs the checks of one batch and its deletes; left are the
// claims whose turn came after the batch's pod list had aged past
// BatchMaxAge (never the first), for a new batch. asked records the claims
// o.BeforeDelete was called for.
func (p *plan) deleteBatch(ctx context.Context, c *kube.Clients, batch []*classify.Decision, o Options, seen *uses, asked map[*classify.Decision]bool) (outs []Outcome, left []*classify.Decision) {
	ns := batch[0].Claim.Namespace
	var todo []*deleter
	for _, d := range batch {
		x, cl := newDeleter(ctx, c, d, o, seen), d.Claim
		if out, ok := x.seenInUse(); ok {
			outs = append(outs, out)
			continue
		}
		if o.BeforeDelete != nil && !asked[d] {
			asked[d] = true
			o.BeforeDelete(ctx, cl.Key())
		}
		x.out.Evidence = p.evidence[d]
		todo = append(todo, x)
	}
	// 1. The rescues, read again.
	todo, failed := rereadRescues(ctx, c, ns, todo, o)
	outs = append(outs, failed...)
	if len(todo) == 0 {
		return outs, nil
	}
	// 2. The pods, listed after every re-read.
	refs, err := kube.PodClaims(ctx, c, ns, o.Scope.PageSize)
	if err != nil {
		for _, x := range todo {
			outs = append(outs, x.unchecked(err))
		}
		return outs, nil
	}
	seen.record(ns, refs)
	listed := time.Now()
	// 3. The deletes; 4. the Events after them.
	var later []func()
	for i, x := range todo {
		if i > 0 && time.Since(listed) > o.batchMaxAge() {
			for _, y := range todo[i:] {
				left = append(left, y.d)
			}
			break
		}
		x.later = &later
		if users := seen.of(x.d.Claim.Key()); len(users) > 0 {
			outs = append(outs, x.inUse(users))
			continue
		}
		if ctx.Err() != nil {
			outs = append(outs, x.skip("interrupted before deleting"))
			continue
		}
		outs = append(outs, x.run(x.out.Evidence, true))
	}
	for _, send := range later {
		send()
	}
	return outs, left
}

// rereadRescues reads the rescues of the claims of todo again (one list of
// the snapshots of ns when one of them relies on a snapshot, then a get of
// each such snapshot's content) and returns the claims still justified;
// failed are the outcomes of the others: skipped when their rescue is no
// longer what the decision used, failed when it could not be read.
func rereadRescues(ctx context.Context, c *kube.Clients, ns string, todo []*deleter, o Options) (ok []*deleter, failed []Outcome) {
	need := false
	for _, x := range todo {
		need = need || x.out.Evidence != nil
	}
	if !need {
		return todo, nil
	}
	vss, err := kube.NamespaceSnapshots(ctx, c, ns, o.Scope.PageSize, o.Policy.WorkspaceLabel)
	if err != nil {
		for _, x := range todo {
			failed = append(failed, x.unchecked(err))
		}
		return nil, failed
	}
	byName := make(map[string]inventory.Snapshot, len(vss))
	for _, s := range vss {
		byName[s.Name] = s
	}
	for _, x := range todo {
		ev := x.out.Evidence
		if ev == nil {
			ok = append(ok, x)
			continue
		}
		var snap *inventory.Snapshot
		if s, found := byName[ev.Snapshot]; found {
			snap = &s
		}
		err := rereadOne(ctx, c, x.d.Claim, ev, snap)
		if r, refused := AsRereadRefusal(err); refused {
			failed = append(failed, x.skip(r.Why+"; not deleted"))
			continue
		}
		if err != nil {
			failed = append(failed, x.unchecked(err))
			continue
		}
		ok = append(ok, x)
	}
	return ok, failed
}

// rereadOne judges the evidence ev of claim on its snapshot snap as the
// batch's list read it (nil: gone) and its content, read now by name.
func rereadOne(ctx context.Context, c *kube.Clients, claim *inventory.Claim, ev *Evidence, snap *inventory.Snapshot) error {
	return c.Retry.Do(ctx, "read the rescue of claim "+claim.Namespace+"/"+claim.Name+" again", func(ctx context.Context) error {
		return justified(ctx, c, ev, snap)
	})
}

// unchecked reports a claim whose checks could not be made (err): not
// deleted, failed; skipped when the run was interrupted.
func (x *deleter) unchecked(err error) Outcome {
	if x.ctx.Err() != nil {
		return x.skip("interrupted before deleting")
	}
	return x.fail(err)
}
