// Package rescue takes the janitor's VolumeSnapshots of orphaned claims
// (SPEC §5): a deterministic name from the claim's UID, an ownership check on
// AlreadyExists, the snapshot class of the claim's CSI driver, a re-check
// that no pod uses the claim just before creating, and a bounded wait for
// readyToUse with delete-and-recreate on a persistent error.
package rescue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
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
	ActionFailed   = "snapshot-failed"     // error, attempts or time ran out
	ActionPending  = "snapshot-pending"    // interrupted while waiting
	ActionSkipped  = "snapshot-skipped"    // a pod started using the claim
	ActionConflict = "snapshot-conflict"   // the name is taken by another claim's snapshot
	ActionArchived = "superseded-archived" // archive snapshot of a superseded claim is ready
)

// Options configure a rescue.
type Options struct {
	// Class is --snapshot-class; empty: the driver's default class.
	Class string
	// Superseded is the --superseded policy.
	Superseded     string
	WorkspaceLabel string
	Timeout        time.Duration // --snapshot-timeout: the wait for readyToUse
	ErrorGrace     time.Duration // --snapshot-error-grace
	Attempts       int           // --snapshot-attempts
	Concurrency    int
	DryRun         bool
	Retry          kube.RetryPolicy
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
	// or Snapshotting.
	State classify.State
	Ready bool
	// Message explains a failure or a skip (the driver's error included).
	Message string
	Err     error
}

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
	r := &rescuer{c: c, inv: inv, ds: ds, o: o, counts: Counts{Total: len(targets), Started: time.Now()}}
	if err := r.loadClasses(ctx); err != nil {
		return nil, err
	}
	out := make([]Outcome, len(targets))
	// Claims are handled namespace by namespace so that the pods of a
	// namespace are re-listed once, just before its snapshots are created.
	byNS := map[string][]int{}
	var nss []string
	for j, i := range targets {
		ns := ds[i].Claim.Namespace
		if _, ok := byNS[ns]; !ok {
			nss = append(nss, ns)
		}
		byNS[ns] = append(byNS[ns], j)
	}
	sort.Strings(nss)
	sem := make(chan struct{}, max(o.Concurrency, 1))
	var wg sync.WaitGroup
	for _, ns := range nss {
		if ctx.Err() != nil {
			break
		}
		var used map[string]string
		if !o.DryRun {
			var err error
			if used, err = r.podRefs(ctx, ns); err != nil {
				// Fail closed: without the pod list, nothing in this
				// namespace is snapshotted.
				for _, j := range byNS[ns] {
					out[j] = Outcome{Index: targets[j], Action: ActionFailed, State: classify.SnapshotFailed,
						Message: "could not re-check pods: " + err.Error(), Err: err}
				}
				continue
			}
		}
		for _, j := range byNS[ns] {
			i := targets[j]
			if ctx.Err() != nil {
				out[j] = Outcome{Index: i, Action: ActionPending, State: ds[i].State, Message: "interrupted before starting"}
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				out[j] = r.one(ctx, i, used)
				out[j].Index = i
			}()
		}
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

	mu     sync.Mutex
	counts Counts
	seq    atomic.Int64
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

// class picks the snapshot class for a claim's PV: --snapshot-class, else
// the one default class of its CSI driver. Never a guess.
func (r *rescuer) class(cl *inventory.Claim) (string, error) {
	if r.o.Class != "" {
		return r.o.Class, nil
	}
	pv, ok := r.inv.PVs[cl.VolumeName]
	if !ok {
		return "", fmt.Errorf("PersistentVolume %q of the claim was not found", cl.VolumeName)
	}
	if pv.CSIDriver == "" {
		return "", fmt.Errorf("PersistentVolume %q is not a CSI volume: it cannot be snapshotted", pv.Name)
	}
	var defaults []string
	for _, c := range r.classes {
		if c.Driver == pv.CSIDriver && c.Annotations[DefaultClassAnnotation] == "true" {
			defaults = append(defaults, c.Name)
		}
	}
	switch len(defaults) {
	case 0:
		return "", fmt.Errorf("no default VolumeSnapshotClass for CSI driver %s (set --snapshot-class)", pv.CSIDriver)
	case 1:
		return defaults[0], nil
	default:
		sort.Strings(defaults)
		return "", fmt.Errorf("several default VolumeSnapshotClasses for CSI driver %s (%v): set --snapshot-class", pv.CSIDriver, defaults)
	}
}

// podRefs re-lists the pods of a namespace and returns, per claim name, one
// pod that references it (by volume or generic ephemeral volume).
func (r *rescuer) podRefs(ctx context.Context, ns string) (map[string]string, error) {
	used := map[string]string{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		var l *corev1.PodList
		err := r.o.Retry.Do(ctx, fmt.Sprintf("list pods in %q", ns), func(ctx context.Context) error {
			var err error
			l, err = r.c.Kube.CoreV1().Pods(ns).List(ctx, opts)
			return err
		})
		if apierrors.IsResourceExpired(err) && opts.Continue != "" {
			clear(used)
			opts.Continue = ""
			continue
		}
		if err != nil {
			return nil, err
		}
		for i := range l.Items {
			p := &l.Items[i]
			for _, v := range p.Spec.Volumes {
				switch {
				case v.PersistentVolumeClaim != nil:
					used[v.PersistentVolumeClaim.ClaimName] = p.Name
				case v.Ephemeral != nil:
					used[p.Name+"-"+v.Name] = p.Name
				}
			}
		}
		if l.Continue == "" {
			return used, nil
		}
		opts.Continue = l.Continue
	}
}

// one rescues one claim.
func (r *rescuer) one(ctx context.Context, i int, used map[string]string) Outcome {
	d := &r.ds[i]
	cl := d.Claim
	name := Name(cl.Name, cl.UID)
	// A claim whose own snapshot already exists (pending or failed, perhaps
	// under another name from an older version) keeps that snapshot: at
	// most one janitor snapshot per claim.
	if s := d.Snapshot; s != nil && (d.State == classify.Snapshotting || d.State == classify.SnapshotFailed) &&
		s.ManagedByJanitor && s.SourceUID == cl.UID {
		name = s.Name
	}
	log := zerolog.Ctx(ctx).With().Str("namespace", cl.Namespace).Str("claim", cl.Name).Str("snapshot", name).Logger()
	ctx = log.WithContext(ctx)
	archive := d.State == classify.Superseded
	class, err := r.class(cl)
	if err != nil {
		r.count(func(c *Counts) { c.Failed++ })
		return r.fail(ctx, cl, name, err.Error(), err)
	}
	if r.o.DryRun {
		log.Info().Bool("dry_run", true).Str("class", class).Msg("would create snapshot")
		return Outcome{Snapshot: name, Action: ActionWould, State: d.State}
	}
	if pod, ok := used[cl.Name]; ok {
		log.Info().Str("pod", pod).Msg("claim in use again; not snapshotted")
		return Outcome{Snapshot: name, Action: ActionSkipped, State: classify.InUse,
			Message: "pod " + pod + " references the claim since the scan"}
	}
	r.count(func(c *Counts) { c.Pending++ })
	defer r.count(func(c *Counts) { c.Pending-- })
	created := false
	for attempt := 1; ; attempt++ {
		vs, isNew, err := r.ensure(ctx, d, name, class, archive, attempt)
		if errors.Is(err, errStale) {
			// One janitor snapshot per claim: the stale one goes (the claim
			// still holds all its data), a fresh one is taken.
			log.Info().Time("snapshot_created", vs.CreationTimestamp.Time).Msg("own snapshot predates the claim's orphaned-since; replacing it")
			if err = r.remove(ctx, vs); err == nil {
				vs, isNew, err = r.ensure(ctx, d, name, class, archive, attempt)
			}
		}
		if err != nil {
			r.count(func(c *Counts) { c.Failed++ })
			if errors.Is(err, errConflict) {
				o := r.fail(ctx, cl, name, err.Error(), err)
				o.Action = ActionConflict
				return o
			}
			return r.fail(ctx, cl, name, err.Error(), err)
		}
		if isNew {
			created = true
			r.count(func(c *Counts) { c.Created++ })
			r.event(ctx, cl, corev1.EventTypeNormal, "SnapshotCreated", fmt.Sprintf("created VolumeSnapshot %s (class %s, attempt %d)", name, class, attempt))
			r.phase(ctx, cl, classify.Snapshotting)
		}
		res, msg := r.wait(ctx, vs)
		switch res {
		case waitReady:
			r.count(func(c *Counts) { c.Ready++ })
			r.event(ctx, cl, corev1.EventTypeNormal, "SnapshotReady", "VolumeSnapshot "+name+" is ready to use")
			r.phase(ctx, cl, classify.Rescued)
			action := ActionReady
			if created {
				action = ActionCreated
			}
			if archive {
				action = ActionArchived
			}
			log.Info().Int("attempt", attempt).Msg("snapshot ready")
			return Outcome{Snapshot: name, Action: action, State: classify.Rescued, Ready: true}
		case waitInterrupted:
			return Outcome{Snapshot: name, Action: ActionPending, State: classify.Snapshotting, Message: "interrupted while waiting"}
		case waitTimeout:
			r.count(func(c *Counts) { c.Failed++ })
			m := fmt.Sprintf("not ready after %s", r.o.Timeout)
			if msg != "" {
				m += ": " + msg
			}
			return r.fail(ctx, cl, name, m, nil)
		case waitError:
			log.Warn().Int("attempt", attempt).Str("error", msg).Msg("snapshot error persisted")
			if attempt >= r.o.Attempts {
				r.count(func(c *Counts) { c.Failed++ })
				return r.fail(ctx, cl, name, fmt.Sprintf("failed after %d attempts: %s", attempt, msg), nil)
			}
			if err := r.remove(ctx, vs); err != nil {
				r.count(func(c *Counts) { c.Failed++ })
				return r.fail(ctx, cl, name, fmt.Sprintf("delete failed snapshot for attempt %d: %v (driver error: %s)", attempt+1, err, msg), err)
			}
		}
	}
}

var errConflict = errors.New("name conflict")

// errStale: the claim's own snapshot predates its orphaned-since.
var errStale = errors.New("own snapshot predates the claim's orphaned-since")

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
				inventory.AnnotationSourceUID:  string(cl.UID),
				inventory.AnnotationSourceName: cl.Name,
				inventory.Prefix + "attempt":   fmt.Sprint(attempt),
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
	if d.OrphanedSince != nil {
		vs.Annotations[inventory.AnnotationOrphanedSince] = d.OrphanedSince.UTC().Format(time.RFC3339)
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
	err = r.o.Retry.Do(ctx, "get VolumeSnapshot "+cl.Namespace+"/"+name, func(ctx context.Context) error {
		var err error
		got, err = r.c.Snap.SnapshotV1().VolumeSnapshots(cl.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if types.UID(got.Annotations[inventory.AnnotationSourceUID]) != cl.UID {
		return nil, false, fmt.Errorf("%w: VolumeSnapshot %s exists but is not this claim's (its %s is %q): nothing was overwritten",
			errConflict, name, inventory.AnnotationSourceUID, got.Annotations[inventory.AnnotationSourceUID])
	}
	// Ours, but taken before the claim's current orphaned-since: the claim
	// was used again since, so this snapshot lacks its last data and can
	// never be its rescue (the classifier agrees). It must be replaced.
	if d.OrphanedSince != nil && got.CreationTimestamp.Time.Before(*d.OrphanedSince) {
		return got, false, errStale
	}
	return got, false, nil
}

// remove deletes a failed snapshot (only the one we looked at: UID
// precondition) and waits until it is gone, so the name is free again.
func (r *rescuer) remove(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	uid := vs.UID
	err := r.o.Retry.Do(ctx, "delete VolumeSnapshot "+vs.Namespace+"/"+vs.Name, func(ctx context.Context) error {
		return r.c.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(r.o.Timeout)
	for {
		_, err := r.c.Snap.SnapshotV1().VolumeSnapshots(vs.Namespace).Get(ctx, vs.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("VolumeSnapshot %s/%s still exists after %s", vs.Namespace, vs.Name, r.o.Timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *rescuer) fail(ctx context.Context, cl *inventory.Claim, name, msg string, err error) Outcome {
	zerolog.Ctx(ctx).Error().Str("reason", msg).Msg("rescue failed")
	r.event(ctx, cl, corev1.EventTypeWarning, "SnapshotFailed", "VolumeSnapshot "+name+": "+msg)
	r.phase(ctx, cl, classify.SnapshotFailed)
	return Outcome{Snapshot: name, Action: ActionFailed, State: classify.SnapshotFailed, Message: msg, Err: err}
}

func (r *rescuer) event(ctx context.Context, cl *inventory.Claim, typ, reason, msg string) {
	if err := r.c.Event(ctx, r.o.Retry, cl, typ, reason, msg); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("reason", reason).Msg("record event")
	}
}

// phase keeps the claim's phase label in step with the rescue. A failure is
// logged: the label is informative, the snapshot is what counts.
func (r *rescuer) phase(ctx context.Context, cl *inventory.Claim, s classify.State) {
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, inventory.LabelPhase, s))
	err := r.o.Retry.Do(ctx, "label claim", func(ctx context.Context) error {
		_, err := r.c.Kube.CoreV1().PersistentVolumeClaims(cl.Namespace).Patch(ctx, cl.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		zerolog.Ctx(ctx).Warn().Err(err).Str("state", string(s)).Msg("set phase label")
	}
}
