// Package rescue takes the janitor's VolumeSnapshots of orphaned claims
// (SPEC §5): a deterministic name from the claim's UID and the orphaned-since
// it rescues, an ownership check on AlreadyExists, the snapshot class of the
// claim's CSI driver, a re-check of the claim (use and supersession) just
// before each create, a bounded wait until the snapshot is intact with
// delete-and-recreate on a persistent error, and an attempt record on the
// claim so that failed attempts count across runs.
//
// The rules are pure functions (rules.go, and decide in wait.go) with the
// API server's clock passed in; this file and wait.go only do the I/O.
package rescue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// DefaultClassAnnotation marks a VolumeSnapshotClass as its driver's default.
const DefaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

// Superseded policies (--superseded).
const (
	SupersededKeep    = "keep"
	SupersededArchive = "archive"
	SupersededDiscard = "discard"
)

// Actions reported per claim.
const (
	ActionCreated  = "snapshot-created"    // this run created it and it became ready
	ActionReady    = "snapshot-ready"      // it existed (an earlier run) and is ready
	ActionWould    = "would-snapshot"      // dry run
	ActionFailed   = "snapshot-failed"     // error, attempts or time ran out; or the re-check could not read
	ActionPending  = "snapshot-pending"    // interrupted while waiting
	ActionSkipped  = "snapshot-skipped"    // the re-check found it no longer a target, or its next attempt is not due
	ActionConflict = "snapshot-conflict"   // the name is taken by another claim's snapshot
	ActionArchived = "superseded-archived" // archive snapshot of a superseded claim is ready
)

// DefaultRetryBackoff is --snapshot-retry-backoff's default.
const DefaultRetryBackoff = 10 * time.Minute

// maxClockWait bounds the wait for the API server's clock to pass a claim's
// orphaned-since: marks are rounded up to the next second, so a second or
// two is all it ever takes on a sane clock.
const maxClockWait = 5 * time.Second

// Options configure a rescue.
type Options struct {
	// Class is --snapshot-class; empty: the driver's default class.
	Class string
	// Superseded is the --superseded policy.
	Superseded string
	// Policy is the classification policy the re-check re-classifies with.
	Policy         classify.Policy
	WorkspaceLabel string
	// Selector selects workspace claims (the scan's): the re-check reads
	// the claims of a namespace with it.
	Selector     labels.Selector
	Timeout      time.Duration // --snapshot-timeout: the wait until intact
	ErrorGrace   time.Duration // --snapshot-error-grace
	Attempts     int           // --snapshot-attempts: per claim, in its first failing run
	RetryBackoff time.Duration // --snapshot-retry-backoff: first wait after a failed run
	// RecheckMaxAge bounds the age of the namespace read a claim is
	// re-checked on; 0: kube.DefaultRecheckMaxAge.
	RecheckMaxAge time.Duration
	Concurrency   int
	DryRun        bool
	Retry         kube.RetryPolicy
	// Progress, when set, is called whenever a counter changes.
	Progress func(Counts)
}

// Counts are the live totals of a rescue, for progress reporting.
type Counts struct {
	Total, Created, Ready, Failed, Pending int
	Started                                time.Time
}

// Outcome is what happened to one claim.
type Outcome struct {
	// Index into the decisions.
	Index    int
	Snapshot string
	Action   string
	// State is the claim's state after the rescue: Rescued, SnapshotFailed
	// or Snapshotting, or the state the re-check found.
	State classify.State
	Ready bool
	// Message explains a failure or a skip (the driver's error included).
	Message string
	Err     error
}

// Failed reports whether the outcome is a failure of the run (exit 4): an
// action that failed, not a claim skipped by rule.
func (o Outcome) Failed() bool { return o.Action == ActionFailed || o.Action == ActionConflict }

// Targets returns the indexes of the decisions a rescue acts on: Orphaned
// claims, claims whose own snapshot is pending or failed, and Superseded
// claims under the archive policy.
func Targets(ds []classify.Decision, superseded string) []int {
	var out []int
	for i := range ds {
		switch ds[i].State {
		case classify.Orphaned, classify.Snapshotting, classify.SnapshotFailed:
			out = append(out, i)
		case classify.Superseded:
			if superseded == SupersededArchive {
				out = append(out, i)
			}
		}
	}
	return out
}

// ValidateClass checks --snapshot-class before anything is written: an
// unknown class is a configuration error, not a per-claim failure.
func ValidateClass(ctx context.Context, c *kube.Clients, o Options) error {
	if o.Class == "" {
		return nil
	}
	err := o.Retry.Do(ctx, "get VolumeSnapshotClass "+o.Class, func(ctx context.Context) error {
		_, err := c.Snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, o.Class, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("--snapshot-class: VolumeSnapshotClass %q not found", o.Class)
	}
	return err
}

// Rescue snapshots the target claims and waits for their snapshots. It
// returns one outcome per target, in target order.
func Rescue(ctx context.Context, c *kube.Clients, inv *inventory.Inventory, ds []classify.Decision, targets []int, o Options) ([]Outcome, error) {
	if o.Attempts < 1 {
		o.Attempts = 1
	}
	if o.Retry.MaxElapsed == 0 {
		o.Retry = kube.DefaultRetry
	}
	r := &rescuer{c: c, inv: inv, ds: ds, o: o, counts: Counts{Total: len(targets), Started: time.Now()}}
	r.recheck = kube.NewRechecker(c, kube.RecheckOptions{Selector: o.Selector, WorkspaceLabel: o.WorkspaceLabel,
		MaxAge: o.RecheckMaxAge, Retry: o.Retry})
	if err := r.loadClasses(ctx); err != nil {
		return nil, err
	}
	out := make([]Outcome, len(targets))
	sem := make(chan struct{}, max(o.Concurrency, 1))
	var wg sync.WaitGroup
	for j, i := range targets {
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[j] = r.one(ctx, i)
			out[j].Index = i
		}()
	}
	wg.Wait()
	for j := range out {
		if out[j].Action == "" {
			out[j] = Outcome{Index: targets[j], Action: ActionPending, State: ds[targets[j]].State, Message: "interrupted before starting"}
		}
	}
	return out, nil
}

type rescuer struct {
	c       *kube.Clients
	inv     *inventory.Inventory
	ds      []classify.Decision
	o       Options
	classes []snapv1.VolumeSnapshotClass
	recheck *kube.Rechecker

	mu     sync.Mutex
	counts Counts
	// cleared: claims whose marks a re-check removed, by UID, with the
	// resourceVersion the removal was based on.
	cleared map[types.UID]string
}

func (r *rescuer) count(f func(*Counts)) {
	r.mu.Lock()
	f(&r.counts)
	c := r.counts
	r.mu.Unlock()
	if r.o.Progress != nil {
		r.o.Progress(c)
	}
}

// now is the API server's clock: the one orphaned-since, status.error times
// and the attempt record are on.
func (r *rescuer) now() time.Time { return r.c.Clock.Now() }

func (r *rescuer) loadClasses(ctx context.Context) error {
	var l *snapv1.VolumeSnapshotClassList
	err := r.o.Retry.Do(ctx, "list VolumeSnapshotClasses", func(ctx context.Context) error {
		var err error
		l, err = r.c.Snap.SnapshotV1().VolumeSnapshotClasses().List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return err
	}
	r.classes = l.Items
	return nil
}

// class picks the snapshot class for a claim's PV (chooseClass).
func (r *rescuer) class(cl *inventory.Claim) (string, error) {
	var pv *inventory.PV
	if r.inv != nil {
		if v, ok := r.inv.PVs[cl.VolumeName]; ok {
			pv = &v
		}
	}
	return chooseClass(r.o.Class, pv, cl.VolumeName, r.classes)
}

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
	if err != nil {
		r.count(func(c *Counts) { c.Failed++ })
		return r.fail(ctx, cl, "", err.Error(), err)
	}
	if r.o.DryRun {
		name := ""
		if d.OrphanedSince != nil {
			name = Name(cl.Name, cl.UID, *d.OrphanedSince)
		}
		log.Info().Bool("dry_run", true).Str("class", class).Str("snapshot", name).Msg("would create snapshot")
		return Outcome{Snapshot: name, Action: ActionWould, State: d.State}
	}
	r.count(func(c *Counts) { c.Pending++ })
	defer r.count(func(c *Counts) { c.Pending-- })

	perRun := attemptsThisRun(rec.Attempts, r.o.Attempts)
	failed := 0 // attempts of this run whose status.error persisted
	created := false
	lastError := ""
	for round := 1; ; round++ {
		if round > maxRounds(perRun) {
			r.count(func(c *Counts) { c.Failed++ })
			return r.fail(ctx, cl, "", fmt.Sprintf("gave up after %d rounds (last: %s)", round-1, lastError), nil)
		}
		// Just before creating (and before every recreate): is the claim
		// still unused, and still not superseded?
		fd, o, ok := r.recheckClaim(ctx, d)
		if !ok {
			return o
		}
		since := *fd.OrphanedSince
		if wait, ok := clockWait(r.now(), since, maxClockWait); !ok {
			r.count(func(c *Counts) { c.Failed++ })
			return r.fail(ctx, cl, "", fmt.Sprintf("the API server's clock (%s) is more than %s behind the claim's orphaned-since %s",
				r.now().Format(time.RFC3339), maxClockWait, since.Format(time.RFC3339)), nil)
		} else if wait > 0 {
			// Wait, then re-check again: the read above would be older
			// than the wait by then.
			if !sleep(ctx, wait) {
				return Outcome{Action: ActionPending, State: d.State, Message: "interrupted before starting"}
			}
			continue
		}
		archive := fd.State == classify.Superseded
		name := Name(cl.Name, cl.UID, since)
		if own := fd.Snapshot; own != nil && own.ManagedByJanitor && own.SourceUID == cl.UID &&
			(fd.State == classify.Snapshotting || fd.State == classify.SnapshotFailed || fd.State == classify.Rescued) {
			if ownFor(own, since) {
				// Ours for this orphaned-since (perhaps named by an older
				// version): wait for it, recreate it under its name.
				name = own.Name
			} else if own.Error != nil {
				// A failed snapshot of an earlier orphaned-since: it holds
				// no rescue, and its pvc-as-source-protection finalizer
				// would keep the owner from deleting the claim.
				log.Info().Str("snapshot", own.Name).Msg("deleting a failed snapshot of an earlier orphaned-since")
				if err := r.remove(ctx, cl.Namespace, own.Name, own.UID); err != nil {
					log.Warn().Err(err).Str("snapshot", own.Name).Msg("delete failed stale snapshot")
				}
			}
			// A stale one that is pending or ready stays beside the new
			// rescue: retention (prune) deals with it.
		}
		log := log.With().Str("snapshot", name).Logger()
		ctx := log.WithContext(ctx)

		vs, isNew, err := r.ensure(ctx, fd, name, class, archive, rec.Attempts+failed+1)
		if errors.Is(err, errDeleting) {
			// Ours, on its way out (a recreate of an earlier run, or
			// someone deleting it): never a rescue. Create it anew once
			// it is gone.
			lastError = "the snapshot was being deleted"
			if err := r.gone(ctx, cl.Namespace, name, vs.UID); err != nil {
				r.count(func(c *Counts) { c.Failed++ })
				return r.fail(ctx, cl, name, "wait for the deleted snapshot to go: "+err.Error(), err)
			}
			continue
		}
		if err != nil {
			r.count(func(c *Counts) { c.Failed++ })
			o := r.fail(ctx, cl, name, err.Error(), err)
			if errors.Is(err, errConflict) {
				o.Action = ActionConflict
			}
			return o
		}
		if isNew {
			created = true
			r.count(func(c *Counts) { c.Created++ })
			r.event(ctx, cl, corev1.EventTypeNormal, "SnapshotCreated", fmt.Sprintf("created VolumeSnapshot %s (class %s, attempt %d)", name, class, rec.Attempts+failed+1))
			r.writeClaim(ctx, cl, claimPatch(cl.UID, classify.Snapshotting, nil))
		}
		v := r.wait(ctx, vs)
		switch v.Result {
		case waitReady:
			r.count(func(c *Counts) { c.Ready++ })
			r.event(ctx, cl, corev1.EventTypeNormal, "SnapshotReady", "VolumeSnapshot "+name+" is ready to use")
			// A successful rescue clears the attempt record.
			r.writeClaim(ctx, cl, claimPatch(cl.UID, classify.Rescued, &attemptWrite{Clear: true}))
			action := ActionReady
			if created {
				action = ActionCreated
			}
			if archive {
				action = ActionArchived
			}
			log.Info().Int("attempt", rec.Attempts+failed+1).Msg("snapshot ready")
			return Outcome{Snapshot: name, Action: action, State: classify.Rescued, Ready: true}
		case waitInterrupted:
			return Outcome{Snapshot: name, Action: ActionPending, State: classify.Snapshotting, Message: "interrupted while waiting"}
		case waitTimeout:
			// Only slow (or an error still within its grace): never
			// deleted, since a recreate would restart a long snapshot. The
			// next run waits for the same one.
			r.count(func(c *Counts) { c.Failed++ })
			m := fmt.Sprintf("not ready after %s", r.o.Timeout)
			if v.Message != "" {
				m += ": " + v.Message
			}
			return r.fail(ctx, cl, name, m, nil)
		case waitDeleting:
			lastError = v.Message
			log.Warn().Str("reason", v.Message).Msg("snapshot went away while waiting")
			if err := r.gone(ctx, cl.Namespace, name, vs.UID); err != nil {
				r.count(func(c *Counts) { c.Failed++ })
				return r.fail(ctx, cl, name, "wait for the deleted snapshot to go: "+err.Error(), err)
			}
		case waitError:
			failed++
			lastError = v.Message
			log.Warn().Int("attempt", rec.Attempts+failed).Str("error", v.Message).Msg("snapshot error persisted")
			// Deleted either way: to recreate it, or because the janitor
			// gives up on it and its finalizer must not hold the claim.
			delErr := r.remove(ctx, cl.Namespace, name, vs.UID)
			if failed < perRun && delErr == nil {
				continue
			}
			r.count(func(c *Counts) { c.Failed++ })
			total := rec.Attempts + failed
			next := nextAttempt(r.now(), total, r.o.Attempts, r.o.RetryBackoff)
			m := fmt.Sprintf("failed after %d attempts: %s", total, v.Message)
			switch {
			case delErr != nil:
				m += fmt.Sprintf("; deleting the failed snapshot failed: %v", delErr)
			default:
				m += "; the failed snapshot was deleted"
			}
			m += "; next attempt at " + next.Format(time.RFC3339)
			zerolog.Ctx(ctx).Error().Str("reason", m).Msg("rescue failed")
			r.event(ctx, cl, corev1.EventTypeWarning, "SnapshotFailed", "VolumeSnapshot "+name+": "+m)
			r.writeClaim(ctx, cl, claimPatch(cl.UID, classify.SnapshotFailed, &attemptWrite{Attempts: total, Next: next}))
			return Outcome{Snapshot: name, Action: ActionFailed, State: classify.SnapshotFailed, Message: m, Err: delErr}
		}
	}
}

// recheckClaim re-classifies the claim on a fresh read of its namespace. ok
// is false when it must not be snapshotted now; o then says why.
func (r *rescuer) recheckClaim(ctx context.Context, d *classify.Decision) (*classify.Decision, Outcome, bool) {
	cl := d.Claim
	inv, err := r.recheck.Inventory(ctx, r.inv, cl.Key())
	if err != nil {
		// Fail closed: without a fresh read, nothing is created.
		msg := "could not re-check the claim before the snapshot: " + err.Error()
		zerolog.Ctx(ctx).Error().Err(err).Msg("re-check failed; not snapshotted")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, Outcome{Action: ActionFailed, State: d.State, Message: msg, Err: err}, false
	}
	// Classified on the same clock as the scan (the upper bound its marks
	// were taken from), or a mark taken a moment ago would look like the
	// future and the claim like Grace; the create itself waits below
	// until the lower bound has passed the orphaned-since.
	now := r.c.Clock.Latest()
	if now.IsZero() {
		err := errors.New("the API server sent no Date header: cannot tell its time")
		r.count(func(c *Counts) { c.Failed++ })
		return nil, Outcome{Action: ActionFailed, State: d.State, Message: err.Error(), Err: err}, false
	}
	ds := classify.Classify(inv, r.o.Policy, now)
	r.clearUsed(ctx, ds)
	fd, ok, why := stillTarget(ds, cl.UID, r.o.Superseded)
	if !ok {
		state := d.State
		if fd != nil {
			state = fd.State
		}
		zerolog.Ctx(ctx).Info().Str("state", string(state)).Str("reason", why).Msg("not snapshotted")
		return nil, Outcome{Action: ActionSkipped, State: state, Message: why}, false
	}
	if fd.OrphanedSince == nil {
		// The scan wrote no mark yet (a dry run, or a failed write): no
		// rescue without the moment it rescues.
		return nil, Outcome{Action: ActionSkipped, State: classify.Grace,
			Message: "re-checked just before the snapshot: its orphaned-since is not known yet"}, false
	}
	return fd, Outcome{}, true
}

// clearUsed removes the marks of every claim the re-check read shows in use
// again, whichever claim it was read for (SPEC §3 Marks: a use the janitor
// sees restarts the clock; on a cluster without the Unused condition, the
// next scan may not see that use any more). A claim is cleared once per
// resourceVersion, however many re-checks share the read.
func (r *rescuer) clearUsed(ctx context.Context, ds []classify.Decision) {
	var used []classify.Decision
	r.mu.Lock()
	for i := range ds {
		d := &ds[i]
		if d.Marks.OrphanedSince != classify.Remove && d.Marks.Attempts != classify.Remove {
			continue
		}
		if r.cleared[d.Claim.UID] == d.Claim.ResourceVersion {
			continue
		}
		if r.cleared == nil {
			r.cleared = map[types.UID]string{}
		}
		r.cleared[d.Claim.UID] = d.Claim.ResourceVersion
		used = append(used, *d)
	}
	r.mu.Unlock()
	if len(used) == 0 {
		return
	}
	res := mark.Apply(ctx, r.c, used, mark.Options{Concurrency: 1, Retry: r.o.Retry})
	for _, err := range res.Errors {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("clear the marks of a claim in use again")
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

var errConflict = errors.New("name conflict")

// errDeleting: the snapshot of that name is ours but being deleted.
var errDeleting = errors.New("the snapshot is being deleted")

// ensure creates the snapshot, or finds the one an earlier run (or attempt)
// made. isNew reports whether this call created it.
func (r *rescuer) ensure(ctx context.Context, d *classify.Decision, name, class string, archive bool, attempt int) (*snapv1.VolumeSnapshot, bool, error) {
	cl := d.Claim
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cl.Namespace,
			Name:      name,
			Labels:    map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue},
			Annotations: map[string]string{
				inventory.AnnotationSourceUID:     string(cl.UID),
				inventory.AnnotationSourceName:    cl.Name,
				inventory.AnnotationOrphanedSince: d.OrphanedSince.UTC().Format(time.RFC3339),
				inventory.Prefix + "attempt":      fmt.Sprint(attempt),
			},
		},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &cl.Name},
			VolumeSnapshotClassName: &class,
		},
	}
	if r.o.WorkspaceLabel != "" && d.Workspace != "" {
		vs.Labels[r.o.WorkspaceLabel] = d.Workspace
	}
	if archive {
		vs.Labels[inventory.LabelSuperseded] = "true"
	}
	var got *snapv1.VolumeSnapshot
	err := r.o.Retry.Do(ctx, "create VolumeSnapshot "+cl.Namespace+"/"+name, func(ctx context.Context) error {
		var err error
		got, err = r.c.Snap.SnapshotV1().VolumeSnapshots(cl.Namespace).Create(ctx, vs, metav1.CreateOptions{})
		return err
	})
	if err == nil {
		return got, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, err
	}
	got, err = r.getSnapshot(ctx, cl.Namespace, name)
	if err != nil {
		return nil, false, err
	}
	if got == nil {
		// Gone between the create and the get: create it again (after
		// the next re-check).
		return &snapv1.VolumeSnapshot{}, false, errDeleting
	}
	if types.UID(got.Annotations[inventory.AnnotationSourceUID]) != cl.UID {
		return nil, false, fmt.Errorf("%w: VolumeSnapshot %s exists but is not this claim's (its %s is %q): nothing was overwritten",
			errConflict, name, inventory.AnnotationSourceUID, got.Annotations[inventory.AnnotationSourceUID])
	}
	if got.DeletionTimestamp != nil {
		return got, false, errDeleting
	}
	return got, false, nil
}

// remove deletes one snapshot of ours (the one looked at: UID precondition)
// and waits until it is gone, so that the name is free again and its
// finalizers are released.
func (r *rescuer) remove(ctx context.Context, ns, name string, uid types.UID) error {
	err := r.o.Retry.Do(ctx, "delete VolumeSnapshot "+ns+"/"+name, func(ctx context.Context) error {
		return r.c.Snap.SnapshotV1().VolumeSnapshots(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	// NotFound: already gone. Conflict: the UID differs, so ours is gone
	// and another took the name.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return r.gone(ctx, ns, name, uid)
}

// gone waits, bounded by --snapshot-timeout, until the snapshot with this
// UID no longer exists.
func (r *rescuer) gone(ctx context.Context, ns, name string, uid types.UID) error {
	deadline := time.Now().Add(r.o.Timeout)
	for {
		vs, err := r.getSnapshot(ctx, ns, name)
		if err == nil && (vs == nil || (uid != "" && vs.UID != uid)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("VolumeSnapshot %s/%s still exists after %s", ns, name, r.o.Timeout)
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// fail records a failure that is not a persisted snapshot error (those are
// recorded with the attempt record in one): Event, phase label, outcome.
func (r *rescuer) fail(ctx context.Context, cl *inventory.Claim, name, msg string, err error) Outcome {
	zerolog.Ctx(ctx).Error().Str("reason", msg).Msg("rescue failed")
	what := "VolumeSnapshot " + name + ": "
	if name == "" {
		what = "no snapshot: "
	}
	r.event(ctx, cl, corev1.EventTypeWarning, "SnapshotFailed", what+msg)
	r.writeClaim(ctx, cl, claimPatch(cl.UID, classify.SnapshotFailed, nil))
	return Outcome{Snapshot: name, Action: ActionFailed, State: classify.SnapshotFailed, Message: msg, Err: err}
}

func (r *rescuer) event(ctx context.Context, cl *inventory.Claim, typ, reason, msg string) {
	mark.Event(ctx, r.c, r.o.Retry, cl, typ, reason, msg)
}

// attemptWrite is a change to the claim's attempt record.
type attemptWrite struct {
	// Clear removes both keys (a successful rescue).
	Clear    bool
	Attempts int
	Next     time.Time
}

// claimPatch is the merge patch of the claim's phase label and, if a is
// set, its attempt record. It carries the claim's UID: the API server
// refuses it when the claim of that name is another one (recreated since),
// so that no claim is ever labelled for another's snapshot.
func claimPatch(uid types.UID, phase classify.State, a *attemptWrite) []byte {
	meta := map[string]any{
		"uid":    string(uid),
		"labels": map[string]any{inventory.LabelPhase: string(phase)},
	}
	if a != nil {
		ann := map[string]any{}
		if a.Clear {
			ann[inventory.AnnotationRescueAttempts] = nil
			ann[inventory.AnnotationNextAttempt] = nil
		} else {
			ann[inventory.AnnotationRescueAttempts] = fmt.Sprint(a.Attempts)
			ann[inventory.AnnotationNextAttempt] = a.Next.UTC().Format(time.RFC3339)
		}
		meta["annotations"] = ann
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta}) // maps of strings always marshal
	return b
}

// writeClaim applies a claim patch. A failure is logged, not fatal: the
// snapshot is what counts, and a claim that is gone or was replaced under
// its name must not be written at all.
func (r *rescuer) writeClaim(ctx context.Context, cl *inventory.Claim, patch []byte) {
	err := r.o.Retry.Do(ctx, "patch claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		_, err := r.c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Patch(ctx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		zerolog.Ctx(ctx).Info().Err(err).Msg("claim gone or replaced under its name; not written")
	default:
		zerolog.Ctx(ctx).Warn().Err(err).Msg("write claim phase and attempt record")
	}
}
