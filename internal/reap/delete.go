package reap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// changedMsg opens the reason of a claim left alone because it changed
// after the read (tests and operators grep for it).
const changedMsg = "changed since it was read (delete precondition failed)"

// newDeleter starts the deletion of the claim of d.
func newDeleter(ctx context.Context, c *kube.Clients, d *classify.Decision, o Options, seen *uses) *deleter {
	cl := d.Claim
	return &deleter{ctx: ctx, c: c, d: d, o: o, seen: seen,
		out: Outcome{Namespace: cl.Namespace, Name: cl.Name, State: d.State},
		l:   zerolog.Ctx(ctx).With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Str("state", string(d.State)).Logger()}
}

// run deletes the claim with Preconditions{UID, ResourceVersion} of the
// re-read, settles a delete whose response was lost, and retries once
// after a change that says nothing about use (docs/spec.md#reap).
//
// checked says that the batch's checks (its re-read of the rescue, then
// its pod list, docs/spec.md#reap-batch) vouch for the first attempt;
// every other attempt (a retry after a backoff, the retry after a
// precondition failed) first checks for itself: a pod list of the
// namespace and a re-read of the rescue, as each attempt did before
// batches.
func (x *deleter) run(ev *Evidence, checked bool) Outcome {
	ctx, c, cl := x.ctx, x.c, x.d.Claim
	x.out.Evidence = ev
	rv := cl.ResourceVersion
	maybeApplied := false
	for try := 0; ; try++ {
		first := checked && try == 0
		check := attemptCheck(c, cl, ev, x.o, x.seen)
		applied, err := deleteClaim(ctx, c, cl, rv, func(ctx context.Context) error {
			if first {
				first = false
				return nil
			}
			return check(ctx)
		})
		maybeApplied = maybeApplied || applied
		if err == nil {
			return x.deleted("")
		}
		var used *errInUse
		if errors.As(err, &used) && !maybeApplied {
			// On a cluster without the Unused condition nothing moves
			// the claim's resourceVersion when a pod starts using it:
			// the precondition cannot see that use, the pod list can.
			return x.inUse(used.pods)
		}
		if r, ok := AsRereadRefusal(err); ok && !maybeApplied {
			return x.skip(r.Why + "; not deleted")
		}
		out, next, done := x.settle(err, rv, maybeApplied, try)
		if done {
			return out
		}
		rv = next
	}
}

// attemptCheck is the check of a delete attempt the batch does not vouch
// for: the pods of the namespace listed, and the rescue read again.
func attemptCheck(c *kube.Clients, cl *inventory.Claim, ev *Evidence, o Options, seen *uses) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := inUseNow(ctx, c, cl, o.Scope.PageSize, seen); err != nil {
			return err
		}
		if ev == nil {
			return nil
		}
		// The claim's preconditions cannot see its rescue: a user or
		// the workspace manager may have deleted it since the read
		// (docs/spec.md#reap-rescue-reread).
		return stillJustified(ctx, c, ev, o.Policy.WorkspaceLabel)
	}
}

// seenInUse skips a claim this run saw in use after its scan, anywhere
// (docs/spec.md#rule-use-restarts-clock): ok reports that it did.
func (x *deleter) seenInUse() (Outcome, bool) {
	c, cl := x.c, x.d.Claim
	if what, ok := c.Uses.Seen(cl.UID); ok {
		x.out.State = classify.InUse
		return x.skip("seen in use earlier in this run (" + what + "); not deleted"), true
	}
	return Outcome{}, false
}

// deleter is the deletion of one claim.
type deleter struct {
	ctx  context.Context
	c    *kube.Clients
	d    *classify.Decision
	o    Options
	l    zerolog.Logger
	seen *uses
	out  Outcome
	// later, when set, collects the Events instead of sending them: a
	// batch sends its Events after its last delete, so that nothing but
	// deletes stands between its pod list and them.
	later *[]func()
}

// event records an Event on the claim, now or, in a batch, after its
// deletes.
func (x *deleter) event(typ, reason, msg string) {
	ctx, c, cl := x.ctx, x.c, x.d.Claim
	send := func() { mark.Event(ctx, c, cl, typ, reason, msg) }
	if x.later != nil {
		*x.later = append(*x.later, send)
		return
	}
	send()
}

// skip leaves the claim alone, with the reason.
func (x *deleter) skip(msg string) Outcome {
	x.out.Action, x.out.Message = ActionSkipped, msg
	x.l.Info().Str("reason", msg).Msg("claim not deleted")
	x.event(corev1.EventTypeNormal, "ReapSkipped", msg)
	return x.out
}

// fail reports a delete that failed.
func (x *deleter) fail(err error) Outcome {
	x.out.Action, x.out.Message, x.out.Err = ActionFailed, err.Error(), err
	x.l.Error().Err(err).Msg("delete claim")
	x.event(corev1.EventTypeWarning, "ReapSkipped", "delete failed: "+err.Error())
	return x.out
}

// inUse skips a claim that pods use again, and restarts its clock.
func (x *deleter) inUse(pods []string) Outcome {
	if !x.o.DryRun {
		clear := func() {
			if _, err := mark.Clear(x.ctx, x.c, x.d.Claim, mark.Options{}); err != nil {
				x.l.Warn().Err(err).Msg("remove marks of a claim in use again")
			}
		}
		if x.later != nil {
			// After the batch's deletes, before its Events.
			*x.later = append(*x.later, clear)
		} else {
			clear()
		}
	}
	x.out.State = classify.InUse
	return x.skip("in use again since it was read (pod " + strings.Join(pods, ", ") + "); not deleted")
}

// settle decides after a delete at rv failed with err: the outcome (done),
// or the resourceVersion to retry at.
func (x *deleter) settle(err error, rv string, maybeApplied bool, try int) (Outcome, string, bool) {
	cl := x.d.Claim
	conflict := apierrors.IsConflict(err) || apierrors.IsNotFound(err)
	if !conflict && !maybeApplied {
		return x.fail(err), "", true
	}
	cur, gerr := getClaim(x.ctx, x.c, cl)
	if gerr != nil {
		if maybeApplied {
			return x.fail(fmt.Errorf("delete claim %s/%s: response lost and the claim cannot be read to settle it: %w", cl.Namespace, cl.Name, gerr)), "", true
		}
		return x.fail(gerr), "", true
	}
	switch Settle(cl.UID, maybeApplied, cur) {
	case Deleted:
		return x.deleted(" (the response to the delete was lost; a read shows it accepted)"), "", true
	case Gone:
		return x.skip("gone since it was read: deleted by someone else"), "", true
	case Terminating:
		return x.skip("being deleted by someone else since it was read"), "", true
	case Replaced:
		return x.skip("another claim now has this name (UID " + string(cur.UID) + "); not deleted"), "", true
	}
	if !conflict && cur.ResourceVersion == rv {
		// Unchanged: the delete never landed; the error stands.
		return x.fail(err), "", true
	}
	if try > 0 {
		return x.skip(changedMsg + " again after a retry; left for the next run"), "", true
	}
	return x.retryable(rv, cur)
}

// retryable allows one retry at cur's resourceVersion when only
// finalizers or bookkeeping changed since rv (the snapshot controller
// dropping pvc-as-source-protection, say), after checking for use again
// before trusting the decision with the new resourceVersion.
func (x *deleter) retryable(rv string, cur *corev1.PersistentVolumeClaim) (Outcome, string, bool) {
	cl := x.d.Claim
	before, berr := claimAt(x.ctx, x.c, cl, rv)
	if berr != nil {
		x.l.Info().Err(berr).Msg("cannot read the claim as it was classified")
		return x.skip(changedMsg + "; what changed cannot be told; left for the next run"), "", true
	}
	if ok, why := Unrelated(before, cur); !ok {
		return x.skip(changedMsg + ": " + why + "; left for the next run"), "", true
	}
	refs, perr := kube.PodClaims(x.ctx, x.c, cl.Namespace, x.o.Scope.PageSize)
	if perr != nil {
		x.l.Info().Err(perr).Msg("re-check for use")
		return x.skip(changedMsg + "; cannot re-check it for use: " + perr.Error()), "", true
	}
	x.seen.record(cl.Namespace, refs)
	if users := x.seen.of(cl.Key()); len(users) > 0 {
		return x.inUse(users), "", true
	}
	if x.ctx.Err() != nil {
		return x.skip(changedMsg + "; interrupted before the retry"), "", true
	}
	x.l.Info().Str("resource_version", cur.ResourceVersion).Msg("only finalizers or bookkeeping changed; retrying the delete once")
	return Outcome{}, cur.ResourceVersion, false
}

// deleted reports an accepted deletion. A deleted claim may stay
// Terminating for minutes (the snapshot controller's finalizer, the
// pvc-protection one): the words say deletion, never that it is gone.
func (x *deleter) deleted(note string) Outcome {
	d, out := x.d, x.out
	why := "rescued"
	switch classify.RuleFor(d.State).Reap {
	case classify.ReapOnRescue:
		if d.Snapshot != nil {
			why = "rescued by VolumeSnapshot " + d.Snapshot.Name
		}
	case classify.ReapOnDiscard:
		why = "superseded, discarded without a snapshot (--superseded=discard): " + d.DiscardReason
	case classify.NotReaped:
	}
	out.Action = ActionDeleted
	out.Message = "deleted (deletion accepted): " + why + note
	x.l.Info().Msg("claim deletion accepted")
	x.event(corev1.EventTypeNormal, "Reaped", out.Message)
	return out
}

// deleteClaim sends the delete, with the retry policy. applied reports
// whether an attempt may have reached the server although the call did not
// report success: one whose response was lost (a timeout, a reset) or that
// failed with a 5xx, after which a retry meets the first attempt's result.
//
// check runs before every attempt (a retry after a backoff included): the
// delete is sent only when it passes.
func deleteClaim(ctx context.Context, c *kube.Clients, cl *inventory.Claim, rv string, check func(context.Context) error) (applied bool, err error) {
	uid := cl.UID
	err = c.Retry.Do(ctx, "delete claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		if check != nil {
			if err := check(ctx); err != nil {
				return err
			}
		}
		err := c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if mayHaveApplied(err) {
			applied = true
		}
		return err
	})
	return applied, err
}

// errInUse: a pod listed just before the delete references the claim.
type errInUse struct{ pods []string }

func (e *errInUse) Error() string { return "in use by pod " + strings.Join(e.pods, ", ") }

// uses remembers every claim that a pod list of this reap showed in use,
// whichever claim the list was made for: a pod that uses a claim waiting
// for its turn to be deleted, and is gone by that turn, was still a use
// the janitor saw (on a cluster without the Unused condition, nothing else
// would remember it).
type uses struct {
	mu   sync.Mutex
	pods map[inventory.Key][]string
}

func (u *uses) record(ns string, refs map[string][]inventory.Referrer) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pods == nil {
		u.pods = map[inventory.Key][]string{}
	}
	for claim, rs := range refs {
		k := inventory.Key{Namespace: ns, Name: claim}
		for _, r := range rs {
			u.pods[k] = append(u.pods[k], r.Name)
		}
	}
}

func (u *uses) of(k inventory.Key) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pods[k]
}

// inUseNow reads the pods of the claim's namespace (one streamed list, or
// pages under --page-size, read as the batch's list is: kube.PodClaims)
// and fails with errInUse when one references the claim, or when an
// earlier list of this reap showed one doing so. A list that still fails
// after the reader's own retries is returned as it is (the delete's retry
// policy decides), so that a claim is never deleted on a use check that
// did not happen.
func inUseNow(ctx context.Context, c *kube.Clients, cl *inventory.Claim, pageSize int64, seen *uses) error {
	refs, err := kube.PodClaims(ctx, c, cl.Namespace, pageSize)
	if err != nil {
		return err
	}
	seen.record(cl.Namespace, refs)
	if users := seen.of(cl.Key()); len(users) > 0 {
		return &errInUse{pods: users}
	}
	return nil
}

// mayHaveApplied reports whether a failed call may still have been applied:
// everything but a clean answer that refuses it (4xx, which includes 429).
func mayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		code := s.Status().Code
		return code == 0 || code >= 500
	}
	return true // no answer: a timeout, a reset, a cancelled call
}

func getClaim(ctx context.Context, c *kube.Clients, cl *inventory.Claim) (*corev1.PersistentVolumeClaim, error) {
	var cur *corev1.PersistentVolumeClaim
	err := c.Retry.Do(ctx, "get claim "+cl.Namespace+"/"+cl.Name, func(ctx context.Context) error {
		var err error
		cur, err = c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Get(ctx, cl.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cur, err
}

// claimAt reads the claim exactly as it was at resourceVersion rv (the
// version the decision classified), to tell what changed since. A list at
// an exact resourceVersion is the API's way to read the past; past the
// server's compaction window it fails (410), and the caller then cannot
// tell what changed.
func claimAt(ctx context.Context, c *kube.Clients, cl *inventory.Claim, rv string) (*corev1.PersistentVolumeClaim, error) {
	var list *corev1.PersistentVolumeClaimList
	err := c.Retry.Do(ctx, "read claim "+cl.Namespace+"/"+cl.Name+" at resourceVersion "+rv, func(ctx context.Context) error {
		var err error
		list, err = c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector:        fields.OneTermEqualSelector("metadata.name", cl.Name).String(),
			ResourceVersion:      rv,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.UID == cl.UID && p.ResourceVersion == rv {
			return p, nil
		}
	}
	return nil, fmt.Errorf("read claim %s/%s at resourceVersion %s: not found in that version", cl.Namespace, cl.Name, rv)
}
