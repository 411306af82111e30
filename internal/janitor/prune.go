package janitor

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
)

// PruneOptions configure janitor prune, and the retention step of Run.
type PruneOptions struct {
	Scan      ScanOptions
	Retention retention.Policy
	// MaxDeletions and MaxDeletionPercent bound the rescues deleted in one
	// run (of the janitor's rescues in scope).
	MaxDeletions       int
	MaxDeletionPercent float64
	Confirm            func(n int) (bool, error)
	// Keep are rescues kept whatever the retention (retention.Policy.Keep):
	// Run passes the ones its reap deleted claims on.
	Keep map[types.UID]string
}

// Enabled reports whether any retention is configured: without one, prune
// does nothing and Run has no retention step.
func (o PruneOptions) Enabled() bool { return o.Retention.KeepFor > 0 || o.Retention.KeepLast > 0 }

// Prune deletes the janitor's own rescues by retention (docs/spec.md#retention). An error
// means nothing was pruned: a read failed.
func Prune(ctx context.Context, c *kube.Clients, o PruneOptions) (*prune.Result, error) {
	ret := o.Retention
	ret.Keep = o.Keep
	return prune.DeleteByRetention(ctx, c, prune.Options{Scope: o.Scan.Scope, Policy: o.Scan.Policy, Retention: ret,
		DryRun: o.Scan.DryRun, MaxDeletions: o.MaxDeletions, MaxDeletionPercent: o.MaxDeletionPercent,
		Confirm: o.Confirm})
}
