// Package mark writes the janitor's marks (SPEC §3 "Marks") on claims: the
// pvc-janitor.io/orphaned-since annotation and the pvc-janitor.io/phase
// label. Patches touch only those keys and carry the resourceVersion that
// was classified, so a claim that changed since it was read is left for the
// next run rather than marked on stale evidence.
package mark

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// Outcome of marking one claim.
type Outcome string

// Outcomes, used as report actions.
const (
	Marked    Outcome = "marked"
	WouldMark Outcome = "would-mark"
	Changed   Outcome = "mark-skipped" // the claim changed since it was read
	Failed    Outcome = "mark-failed"
)

// Options tune Apply.
type Options struct {
	DryRun      bool
	Concurrency int
	Retry       kube.RetryPolicy
}

// Result is the outcome per claim index (into the decisions), for the
// decisions whose marks changed; errors are the failures.
type Result struct {
	Outcomes map[int]Outcome
	Errors   []error
}

// Patch returns the JSON merge patch that applies m to a claim at
// resourceVersion rv. Only keys under pvc-janitor.io/ appear in it.
func Patch(m classify.Marks, rv string) ([]byte, error) {
	meta := map[string]any{"resourceVersion": rv}
	ann, lab := map[string]any{}, map[string]any{}
	switch m.OrphanedSince {
	case classify.Set:
		ann[inventory.AnnotationOrphanedSince] = m.OrphanedSinceValue.UTC().Format(time.RFC3339)
	case classify.Remove:
		ann[inventory.AnnotationOrphanedSince] = nil
	}
	switch m.Phase {
	case classify.Set:
		lab[inventory.LabelPhase] = string(m.PhaseValue)
	case classify.Remove:
		lab[inventory.LabelPhase] = nil
	}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	if len(lab) > 0 {
		meta["labels"] = lab
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

// Apply writes the marks of every decision that changes something, with
// opts.Concurrency patches in flight, and an OrphanDetected Event when a
// claim is marked orphaned for the first time. Nothing is written in dry
// run. A failure to mark one claim does not stop the others.
func Apply(ctx context.Context, c *kube.Clients, ds []classify.Decision, opts Options) Result {
	res := Result{Outcomes: map[int]Outcome{}}
	var mu sync.Mutex
	record := func(i int, o Outcome, err error) {
		mu.Lock()
		defer mu.Unlock()
		res.Outcomes[i] = o
		if err != nil {
			res.Errors = append(res.Errors, err)
		}
	}
	work := make(chan int)
	n := max(opts.Concurrency, 1)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				o, err := one(ctx, c, &ds[i], opts)
				record(i, o, err)
			}
		}()
	}
	log := zerolog.Ctx(ctx)
feed:
	for i := range ds {
		if !ds[i].Marks.Changed() {
			continue
		}
		if opts.DryRun {
			log.Debug().Str("namespace", ds[i].Claim.Namespace).Str("claim", ds[i].Claim.Name).
				Str("state", string(ds[i].State)).Bool("dry_run", true).Msg("would mark claim")
			record(i, WouldMark, nil)
			continue
		}
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return res
}

func one(ctx context.Context, c *kube.Clients, d *classify.Decision, opts Options) (Outcome, error) {
	cl := d.Claim
	log := zerolog.Ctx(ctx).With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Str("state", string(d.State)).Logger()
	patch, err := Patch(d.Marks, cl.ResourceVersion)
	if err != nil {
		return Failed, err
	}
	err = opts.Retry.Do(ctx, fmt.Sprintf("mark claim %s/%s", cl.Namespace, cl.Name), func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Patch(ctx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		log.Info().Msg("claim changed since it was read; marks left for the next run")
		return Changed, nil
	case err != nil:
		log.Error().Err(err).Msg("mark claim")
		return Failed, err
	}
	log.Debug().RawJSON("patch", patch).Msg("marked claim")
	_, hadMark := cl.Annotations[inventory.AnnotationOrphanedSince]
	if d.Marks.OrphanedSince == classify.Set && !hadMark {
		msg := fmt.Sprintf("no pod or workload references this claim; orphaned since %s (state %s)",
			d.Marks.OrphanedSinceValue.UTC().Format(time.RFC3339), d.State)
		if err := c.Event(ctx, opts.Retry, cl, corev1.EventTypeNormal, "OrphanDetected", msg); err != nil {
			// The mark is what matters; a lost Event is logged, not fatal.
			log.Warn().Err(err).Msg("record OrphanDetected event")
		}
	}
	return Marked, nil
}
