package rescue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The rescue of one claim: the checks that need no API call (one), then
// rounds of re-check, create and wait (claimRescue), each ending the rescue
// or starting another round.

// maxRounds bounds the create-and-wait rounds of one claim in one run:
// attempts, plus the rounds that only wait for a snapshot being deleted by
// someone else, or for the server's clock.
func maxRounds(attempts int) int { return 2*attempts + 4 }

// one rescues one claim.
func (r *rescuer) one(ctx context.Context, i int) Outcome {
	d := &r.ds[i]
	cl := d.Claim
	log := zerolog.Ctx(ctx).With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Logger()
	ctx = log.WithContext(ctx)

	// Failed attempts count across runs: before the next one is due, the
	// claim is left alone (the scan reports it SnapshotFailed).
	rec := readAttempts(cl.Annotations)
	if rec.Invalid != "" {
		log.Warn().Str("key", rec.Invalid).Msg("attempt record does not parse; ignoring it")
	}
	if !due(rec.Attempts, rec.Next, r.now()) {
		return Outcome{Action: ActionSkipped, State: classify.SnapshotFailed,
			Message: fmt.Sprintf("%d failed snapshot attempts; the next is due at %s", rec.Attempts, rec.Next.UTC().Format(time.RFC3339))}
	}
	class, err := r.class(cl)
	if r.o.DryRun {
		// Before any failure is recorded: a dry run writes nothing, not
		// even the failure it foresees (docs/spec.md#cmd-snapshot).
		return r.dryRun(ctx, d, class, err)
	}
	if err != nil {
		return r.fail(ctx, cl, "", err.Error(), err)
	}
	r.count(func(c *Counts) { c.Pending++ })
	defer r.count(func(c *Counts) { c.Pending-- })
	c := &claimRescue{r: r, d: d, cl: cl, class: class, rec: rec, perRun: attemptsThisRun(rec.Attempts, r.o.Attempts)}
	o := c.run(ctx)
	o.LeakedContents = c.leaked
	return o
}

// dryRun reports the snapshot a rescue would create, creating nothing; or,
// when no class can be chosen (classErr), the failure a real run would
// meet, recording nothing: the claim keeps the state it was scanned in.
func (r *rescuer) dryRun(ctx context.Context, d *classify.Decision, class string, classErr error) Outcome {
	cl := d.Claim
	if classErr != nil {
		r.count(func(c *Counts) { c.Failed++ })
		zerolog.Ctx(ctx).Warn().Bool("dry_run", true).Str("reason", classErr.Error()).Msg("a rescue would fail")
		return Outcome{Action: ActionFailed, State: d.State, Message: classErr.Error(), Err: classErr}
	}
	name := ""
	if d.OrphanedSince != nil {
		name = Name(cl.Name, cl.UID, *d.OrphanedSince)
	}
	zerolog.Ctx(ctx).Info().Bool("dry_run", true).Str("class", class).Str("snapshot", name).Msg("would create snapshot")
	return Outcome{Snapshot: name, Action: ActionWould, State: d.State}
}

// claimRescue is one claim's rescue in this run: the rounds, and what they
// have seen so far.
type claimRescue struct {
	r      *rescuer
	d      *classify.Decision // the scan's
	cl     *inventory.Claim
	class  string
	rec    attemptRecord // the failed attempts of earlier runs
	perRun int           // the attempts this run may make

	since     time.Time // the orphaned-since of the round under way
	failed    int       // attempts of this run whose status.error persisted
	created   bool      // this run created the snapshot
	lastError string    // why the last round did not end the rescue
	leaked    []string  // contents its snapshot deletions left behind
	// from is the claim as the last re-check read it (nil: not in it).
	from *corev1.PersistentVolumeClaim
}

// remove deletes one of the claim's snapshots (see rescuer.remove) and
// remembers the content it left behind.
func (c *claimRescue) remove(ctx context.Context, name string, uid types.UID) error {
	left, err := c.r.remove(ctx, c.cl.Namespace, name, uid)
	if left != "" {
		c.leaked = append(c.leaked, left)
	}
	return err
}

// attempt is the number of the attempt under way, earlier runs' included.
func (c *claimRescue) attempt() int { return c.rec.Attempts + c.failed + 1 }

// run repeats rounds until one ends the rescue, at most maxRounds.
func (c *claimRescue) run(ctx context.Context) Outcome {
	for round := 1; ; round++ {
		if round > maxRounds(c.perRun) {
			return c.r.fail(ctx, c.cl, "", fmt.Sprintf("gave up after %d rounds (last: %s)", round-1, c.lastError), nil)
		}
		if o, done := c.round(ctx); done {
			return o
		}
	}
}

// round re-checks the claim, waits for the server's clock to pass its
// orphaned-since, then creates (or finds) the snapshot and waits for it.
// done is false when another round must follow.
func (c *claimRescue) round(ctx context.Context) (Outcome, bool) {
	// Just before creating (and before every recreate): is the claim
	// still unused, and still not superseded?
	fd, from, o, ok := c.r.recheckClaim(ctx, c.d)
	if !ok {
		return o, true
	}
	c.from = from
	since := *fd.OrphanedSince
	skew := c.r.o.Policy.ClockSkew
	wait, ok := clockWait(c.r.now(), since, skew, maxClockWait)
	if !ok {
		return c.r.fail(ctx, c.cl, "", fmt.Sprintf("the API server's clock (%s) is more than %s behind the claim's orphaned-since %s plus twice --clock-skew %s",
			c.r.now().Format(time.RFC3339), maxClockWait, since.Format(time.RFC3339), skew), nil), true
	}
	if wait > 0 {
		// Wait, then re-check again: the read above would be older than
		// the wait by then.
		if !sleep(ctx, wait) {
			return Outcome{Action: ActionPending, State: c.d.State, Message: "interrupted before starting"}, true
		}
		return Outcome{}, false
	}
	c.since = since
	name := c.snapshotName(ctx, fd, since)
	log := zerolog.Ctx(ctx).With().Str("snapshot", name).Logger()
	ctx = log.WithContext(ctx)
	if own := fd.Snapshot; fd.State == classify.SnapshotFailed && fd.CutBehind && own != nil && own.Name == name {
		// docs/spec.md#rescue-behind-clock: ours for this orphaned-since,
		// intact, but cut too early to count: an attempt that failed.
		return c.persistedError(ctx, fd.Reason, name, own.UID)
	}
	return c.createAndWait(ctx, fd, name)
}

// snapshotName names the snapshot that rescues the claim for since: its
// deterministic name, or the name of the claim's own snapshot for since
// (perhaps named by an older version). A failed own snapshot of an earlier
// orphaned-since is deleted on the way.
func (c *claimRescue) snapshotName(ctx context.Context, fd *classify.Decision, since time.Time) string {
	cl := c.cl
	name := Name(cl.Name, cl.UID, since)
	if own := fd.Snapshot; own != nil && own.ManagedByJanitor && own.SourceUID == cl.UID &&
		classify.RuleFor(fd.State).Snapshot != classify.SnapOther {
		log := zerolog.Ctx(ctx)
		if ownFor(own, since) {
			// Ours for this orphaned-since: wait for it, recreate it under
			// its name.
			name = own.Name
		} else if own.Error != nil {
			// A failed snapshot of an earlier orphaned-since: it holds
			// no rescue, and its pvc-as-source-protection finalizer
			// would keep the owner from deleting the claim.
			log.Info().Str("snapshot", own.Name).Msg("deleting a failed snapshot of an earlier orphaned-since")
			if err := c.remove(ctx, own.Name, own.UID); err != nil {
				log.Warn().Err(err).Str("snapshot", own.Name).Msg("delete failed stale snapshot")
			}
		}
		// A stale one that is pending or ready stays beside the new
		// rescue, labelled stale once that is ready (markStale):
		// retention (prune) deals with it.
	}
	return name
}

// createAndWait creates the snapshot, or finds the one an earlier round or
// run made, and waits for it. done is false when another round must follow.
func (c *claimRescue) createAndWait(ctx context.Context, fd *classify.Decision, name string) (Outcome, bool) {
	archive := classify.RuleFor(fd.State).Archive
	at := time.Now() // before the create, or the read of the one found
	vs, isNew, err := c.r.ensure(ctx, fd, name, c.class, archive, c.attempt(), c.from)
	if errors.Is(err, errDeleting) {
		// Ours, on its way out (a recreate of an earlier run, or someone
		// deleting it): never a rescue. Create it anew once it is gone.
		c.lastError = "the snapshot was being deleted"
		return c.awaitGone(ctx, name, vs.UID)
	}
	if errors.Is(err, errReplaced) {
		return Outcome{Snapshot: name, Action: ActionSkipped, State: fd.State, Message: err.Error() + "; not snapshotted"}, true
	}
	if err != nil {
		o := c.r.fail(ctx, c.cl, name, err.Error(), err)
		if errors.Is(err, errConflict) {
			o.Action = ActionConflict
		}
		return o, true
	}
	if isNew {
		c.recordCreated(ctx, name)
	}
	return c.settle(ctx, c.r.wait(ctx, vs, at), name, vs.UID, archive)
}

// recordCreated counts a snapshot this run created. The claim is written
// once, when the rescue ends (ready, failed, given up): one patch with the
// phase label and the attempt record at once, and one Event
// (docs/spec.md#run-events, issue 43). The phase label only mirrors the
// state; a run that ends while waiting leaves it as the scan wrote it, and
// the next scan classifies the claim Snapshotting from its snapshot.
func (c *claimRescue) recordCreated(ctx context.Context, name string) {
	c.created = true
	c.r.count(func(n *Counts) { n.Created++ })
	zerolog.Ctx(ctx).Info().Str("class", c.class).Int("attempt", c.attempt()).Msg("snapshot created")
}

// settle carries out the wait's verdict on the snapshot. done is false
// when another round must follow.
func (c *claimRescue) settle(ctx context.Context, v verdict, name string, uid types.UID, archive bool) (Outcome, bool) {
	switch v.Result {
	case waitReady:
		if o, replaced := c.cutFromAnother(ctx, v.Source, name, uid); replaced {
			return o, true
		}
		if why, behind := cutBehind(v.Cut, c.since, c.r.o.Policy.ClockSkew); behind && !archive {
			// Intact, but it would not count as the rescue: never
			// reported Rescued (docs/spec.md#rescue-behind-clock).
			return c.persistedError(ctx, why, name, uid)
		}
		return c.ready(ctx, name, archive), true
	case waitInterrupted:
		return Outcome{Snapshot: name, Action: ActionPending, State: classify.Snapshotting, Message: "interrupted while waiting"}, true
	case waitTimeout:
		// Only slow (or an error still within its grace): never deleted,
		// since a recreate would restart a long snapshot. The next run
		// waits for the same one.
		m := fmt.Sprintf("not ready after %s", c.r.o.Timeout)
		if v.Message != "" {
			m += ": " + v.Message
		}
		return c.r.fail(ctx, c.cl, name, m, nil), true
	case waitDeleting:
		c.lastError = v.Message
		zerolog.Ctx(ctx).Warn().Str("reason", v.Message).Msg("snapshot went away while waiting")
		return c.awaitGone(ctx, name, uid)
	case waitError:
		return c.persistedError(ctx, v.Message, name, uid)
	}
	return Outcome{}, false
}

// awaitGone waits until the snapshot that went away is gone, so that the
// next round can create it anew.
func (c *claimRescue) awaitGone(ctx context.Context, name string, uid types.UID) (Outcome, bool) {
	if err := c.r.gone(ctx, c.cl.Namespace, name, uid); err != nil {
		return c.r.fail(ctx, c.cl, name, "wait for the deleted snapshot to go: "+err.Error(), err), true
	}
	return Outcome{}, false
}

// ready counts and records a rescue: an Event, the Rescued phase label,
// and the attempt record cleared.
func (c *claimRescue) ready(ctx context.Context, name string, archive bool) Outcome {
	c.r.count(func(n *Counts) { n.Ready++ })
	msg := "VolumeSnapshot " + name + " is ready to use"
	if c.created {
		msg += fmt.Sprintf(" (created by this run: class %s, attempt %d)", c.class, c.attempt())
	}
	c.r.event(ctx, c.cl, corev1.EventTypeNormal, "SnapshotReady", msg)
	// A successful rescue clears the attempt record.
	c.r.writeClaim(ctx, c.cl, claimPatch(c.cl.UID, classify.Rescued, &attemptWrite{Clear: true}))
	c.markStale(ctx, c.since)
	action := ActionReady
	if c.created {
		action = ActionCreated
	}
	if archive {
		action = ActionArchived
	}
	zerolog.Ctx(ctx).Info().Int("attempt", c.attempt()).Msg("snapshot ready")
	return Outcome{Snapshot: name, Action: action, State: classify.Rescued, Ready: true}
}

// persistedError deletes a snapshot whose status.error persisted, either
// way: to replace it in the next round while this run has attempts left
// (done false), or because the janitor gives up on it and its finalizer
// must not hold the claim.
func (c *claimRescue) persistedError(ctx context.Context, msg, name string, uid types.UID) (Outcome, bool) {
	c.failed++
	c.lastError = msg
	zerolog.Ctx(ctx).Warn().Int("attempt", c.rec.Attempts+c.failed).Str("error", msg).Msg("snapshot error persisted")
	delErr := c.remove(ctx, name, uid)
	if c.failed < c.perRun && delErr == nil {
		return Outcome{}, false
	}
	return c.giveUp(ctx, msg, name, delErr), true
}

// giveUp counts and records a claim whose attempts of this run are spent:
// the attempt record with when the next is due, an Event, the
// SnapshotFailed phase label.
func (c *claimRescue) giveUp(ctx context.Context, msg, name string, delErr error) Outcome {
	c.r.count(func(n *Counts) { n.Failed++ })
	total := c.rec.Attempts + c.failed
	next := nextAttempt(c.r.now(), total, c.r.o.Attempts, c.r.o.RetryBackoff)
	m := fmt.Sprintf("failed after %d attempts: %s", total, msg)
	switch {
	case delErr != nil:
		m += fmt.Sprintf("; deleting the failed snapshot failed: %v", delErr)
	default:
		m += "; the failed snapshot was deleted"
	}
	m += "; next attempt at " + next.Format(time.RFC3339)
	zerolog.Ctx(ctx).Error().Str("reason", m).Msg("rescue failed")
	c.r.event(ctx, c.cl, corev1.EventTypeWarning, "SnapshotFailed", "VolumeSnapshot "+name+": "+m)
	c.r.writeClaim(ctx, c.cl, claimPatch(c.cl.UID, classify.SnapshotFailed, &attemptWrite{Attempts: total, Next: next}))
	return Outcome{Snapshot: name, Action: ActionFailed, State: classify.SnapshotFailed, Message: m, Err: delErr}
}

// cutFromAnother checks that the ready snapshot was cut from the claim
// (docs/spec.md#rescue-claim-template): the snapshot is created by the
// claim's name, and the snapshot controller reads the claim of that name
// after the create, so another claim that took the name since the
// re-check may be what was cut. source is the volume its content was cut
// from. A snapshot proven cut from another volume is deleted and the
// claim skipped (replaced). When either volume is unknown the claim is
// read again: the UID the re-check saw, still there, proves it (a claim
// that existed before the create and after the cut is the one cut);
// another claim, or none, proves nothing either way, and the snapshot,
// which may be the only copy of the claim's data, is kept and the claim
// skipped.
func (c *claimRescue) cutFromAnother(ctx context.Context, source, name string, uid types.UID) (Outcome, bool) {
	want := ""
	if c.r.inv != nil {
		want = c.r.inv.PVs[c.cl.VolumeName].VolumeHandle
	}
	if want != "" && source != "" {
		if source == want {
			return Outcome{}, false
		}
		msg := fmt.Sprintf("another claim took the name since the re-check: VolumeSnapshot %s was cut from volume %s, not the claim's %s", name, source, want)
		zerolog.Ctx(ctx).Warn().Str("reason", msg).Msg("snapshot of another claim; deleting it")
		if err := c.remove(ctx, name, uid); err != nil {
			msg += "; deleting it failed: " + err.Error()
		} else {
			msg += "; it was deleted"
		}
		return Outcome{Snapshot: name, Action: ActionSkipped, State: c.d.State, Message: msg + "; not snapshotted"}, true
	}
	cur, err := c.r.getClaim(ctx, c.cl)
	switch {
	case err != nil:
		// As a failed read before the create always was: logged, and
		// the rescue stands.
		zerolog.Ctx(ctx).Warn().Err(err).Msg("read the claim again to tell what was cut")
		return Outcome{}, false
	case cur != nil && cur.UID == c.cl.UID:
		return Outcome{}, false
	}
	msg := "the claim was deleted or replaced while VolumeSnapshot " + name + " was cut: which claim it holds cannot be told; the snapshot is kept"
	return Outcome{Snapshot: name, Action: ActionSkipped, State: c.d.State, Message: msg}, true
}
