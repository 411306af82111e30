package janitor

import (
	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// AtRisk says whether tearing the cluster down would lose the data of the
// claim decided by d (SPEC §4, guard), and why. Held, Grace, Orphaned,
// Snapshotting, SnapshotFailed, Attached and Superseded claims are at risk; a
// Rescued claim is at risk while its snapshot's content has deletionPolicy
// Delete (the teardown may delete the backing snapshot too) unless
// allowDeletePolicy, or when its content cannot be found.
func AtRisk(d *classify.Decision, inv *inventory.Inventory, allowDeletePolicy bool) (bool, string) {
	switch d.State {
	case classify.Held:
		return true, "held by an operator: a teardown would not keep it"
	case classify.Grace, classify.Orphaned, classify.Snapshotting, classify.SnapshotFailed,
		classify.Attached, classify.Superseded:
		return true, "its data has no durable snapshot"
	case classify.Rescued:
		if d.Snapshot == nil {
			return true, "rescued without a known snapshot"
		}
		content, ok := inv.Contents[d.Snapshot.ContentName]
		if !ok {
			return true, "the content of snapshot " + d.Snapshot.Name + " was not found"
		}
		if content.DeletionPolicy == "Delete" && !allowDeletePolicy {
			return true, "snapshot " + d.Snapshot.Name + " has deletionPolicy Delete: a teardown can delete it too"
		}
	}
	return false, ""
}
