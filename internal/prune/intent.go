package prune

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// IntentAction is what a run does with a rescue that carries a prune's
// intent (docs/spec.md#retention-intent).
type IntentAction int

// Intent actions.
const (
	// IntentNone: no intent, nothing to do.
	IntentNone IntentAction = iota
	// IntentLeave: the rescue is being deleted; the intent goes with it,
	// and its content may be being deleted by the snapshot controller.
	IntentLeave
	// IntentRetain: the rescue was kept, and its content, still bound to it,
	// is Delete: set it back to Retain, then remove the intent.
	IntentRetain
	// IntentClear: nothing of the prune's is left to undo (the content is
	// Retain, gone, bound to another snapshot or being deleted): remove the
	// intent.
	IntentClear
)

// SettleIntent decides what to do with a rescue s, read by this run, given
// its content c as read (nil when it has none or it does not exist).
func SettleIntent(s *inventory.Snapshot, c *inventory.Content) (IntentAction, string) {
	switch {
	case s.PruneIntent == "":
		return IntentNone, ""
	case s.DeletionTimestamp != nil:
		return IntentLeave, "being deleted: the prune's intent goes with it"
	case c == nil:
		return IntentClear, "no content to set back"
	case c.SnapshotUID != s.UID:
		return IntentClear, "its content " + c.Name + " is bound to another snapshot: not the prune's to set back"
	case c.DeletionTimestamp != nil:
		return IntentClear, "its content " + c.Name + " is being deleted already"
	case c.DeletionPolicy == "Delete":
		return IntentRetain, "kept by an earlier prune that did not finish: its content " + c.Name + " goes back to Retain"
	}
	return IntentClear, "its content " + c.Name + " is " + c.DeletionPolicy + " already"
}

// SettleIntents settles the intent of every snapshot of snaps that carries
// one (SettleIntent), updating contents to what it wrote. Every run that
// writes calls it on its read (the Lease makes any intent it finds one of
// an earlier run's). A failure is logged and left for the next run: it
// never makes a rescue less safe than it is.
func SettleIntents(ctx context.Context, c *kube.Clients, snaps map[string][]inventory.Snapshot, contents map[string]inventory.Content) {
	for _, ss := range snaps {
		for i := range ss {
			settleIntent(ctx, c, &ss[i], contents)
		}
	}
}

func settleIntent(ctx context.Context, c *kube.Clients, s *inventory.Snapshot, contents map[string]inventory.Content) {
	var ct *inventory.Content
	if v, ok := contents[s.ContentName]; ok && s.ContentName != "" {
		ct = &v
	}
	act, why := SettleIntent(s, ct)
	if act == IntentNone || act == IntentLeave {
		return
	}
	log := zerolog.Ctx(ctx).With().Str("namespace", s.Namespace).Str("snapshot", s.Name).Str("intent", s.PruneIntent).Logger()
	if act == IntentRetain {
		if err := kube.SetContentRetain(ctx, c, ct.Name, s.UID); err != nil {
			log.Error().Err(err).Msg("a kept rescue's content is Delete after an unfinished prune and cannot be set back to Retain: left for the next run")
			return
		}
		ct.DeletionPolicy = "Retain"
		contents[ct.Name] = *ct
	}
	if err := kube.UnannotateSnapshot(ctx, c, s, inventory.AnnotationPruneIntent, s.PruneIntent); err != nil {
		log.Warn().Err(err).Msg("remove the prune intent: left for the next run")
		return
	}
	s.PruneIntent = ""
	log.Info().Str("reason", why).Msg("settled an unfinished prune")
}

// intentValue is the intent's value: when the prune set it, on the server's clock.
func intentValue(now time.Time) string { return now.UTC().Format(time.RFC3339) }
