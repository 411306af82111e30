package rescue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Stale reports whether s is a rescue of an earlier orphan period of the
// claim with uid, which is orphaned since since now: the janitor's, of that
// claim (by UID, never by name), cut for an orphaned-since before since,
// so holding data from before the claim's last use. One being deleted or
// already labelled is not reported again.
func Stale(s *inventory.Snapshot, uid types.UID, since time.Time) bool {
	return s.ManagedByJanitor && s.SourceUID == uid && s.DeletionTimestamp == nil && !s.Stale &&
		s.OrphanedSince != nil && s.OrphanedSince.Before(since)
}

// markStale labels the claim's stale rescues pvc-janitor.io/stale: "true"
// once its rescue for since is ready (docs/spec.md#retention). They stay: the janitor
// never deletes a rescue of an earlier period on its own, retention
// (prune) decides. A label patch carries the snapshot's UID, so a
// snapshot of that name made since is left alone; a failed one is logged,
// and the next rescue of the claim tries again.
func (c *claimRescue) markStale(ctx context.Context, since time.Time) {
	for _, s := range c.r.inv.Snapshots[c.cl.Namespace] {
		if !Stale(&s, c.cl.UID, since) {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid": s.UID, "labels": map[string]string{inventory.LabelStale: "true"}}})
		if err != nil {
			return
		}
		err = c.r.c.Retry.Do(ctx, "label stale VolumeSnapshot "+s.Namespace+"/"+s.Name, func(ctx context.Context) error {
			_, err := c.r.c.Snap.SnapshotV1().VolumeSnapshots(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		log := zerolog.Ctx(ctx).With().Str("stale", s.Name).Logger()
		if err != nil {
			log.Warn().Err(err).Msg("label the claim's rescue of an earlier orphan period stale")
			continue
		}
		log.Info().Msg("labelled the claim's rescue of an earlier orphan period stale; left to prune")
	}
}
