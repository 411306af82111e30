// Package rescue takes the janitor's VolumeSnapshots of orphaned claims
// (docs/spec.md#rescue): a deterministic name from the claim's UID and the orphaned-since
// it rescues, an ownership check on AlreadyExists, the snapshot class of the
// claim's CSI driver, a re-check of the claim (use and supersession) just
// before each create, a bounded wait until the snapshot is intact with
// delete-and-recreate on a persistent error, and an attempt record on the
// claim so that failed attempts count across runs.
//
// The rules are pure functions (rules.go, and decide in wait.go) with the
// API server's clock passed in; the other files only do the I/O:
//   - rescue.go: the options, the outcomes and Rescue, which runs one
//     claim's rescue per target, concurrently;
//   - claim.go: one claim's rescue: the rounds of re-check, create and wait,
//     and what each verdict leads to (a rescue, another round, a failure);
//   - recheck.go: the re-classification of a claim just before a create;
//   - snapshot.go: create (or find), delete, and wait until gone;
//   - wait.go, watch.go, hub.go: the wait until a snapshot is intact
//     (decide is the rule, snapshotWatch follows the snapshot on the run's
//     one watch per namespace, snapshotHub);
//   - record.go: what is written on the claim (Events, phase label,
//     attempt record).
package rescue

import (
	"context"
	"fmt"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// DefaultClassAnnotation marks a VolumeSnapshotClass as its driver's default.
const DefaultClassAnnotation = "snapshot.storage.kubernetes.io/is-default-class"

// Superseded policies (--superseded), named where config can read them
// (classify).
const (
	SupersededKeep    = classify.SupersededKeep
	SupersededArchive = classify.SupersededArchive
	SupersededDiscard = classify.SupersededDiscard
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
	// PageSize is the limit of each list of the re-check (--page-size);
	// 0 reads each as one streamed response.
	PageSize    int64
	Concurrency int
	DryRun      bool
	// DeleteContents (--delete-contents): a Retain content is set to
	// Delete before the janitor deletes its snapshot (docs/spec.md#retention).
	DeleteContents bool
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
	// LeakedContents are the VolumeSnapshotContents this rescue's snapshot
	// deletions left behind: Retain ones without DeleteContents, and with
	// it any the snapshot controller did not delete (kube.ContentSettle).
	LeakedContents []string
}

// Failed reports whether the outcome is a failure of the run (exit 4): an
// action that failed, not a claim skipped by rule.
func (o Outcome) Failed() bool { return o.Action == ActionFailed || o.Action == ActionConflict }

// Targets returns the indexes of the decisions a rescue acts on, by the
// table (classify.StateRule.Targeted): Orphaned claims, claims whose own
// snapshot is pending or failed, and Superseded claims under the archive
// policy.
func Targets(ds []classify.Decision, superseded string) []int {
	var out []int
	for i := range ds {
		if classify.RuleFor(ds[i].State).Targeted(superseded) {
			out = append(out, i)
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
	err := c.Retry.Do(ctx, "get VolumeSnapshotClass "+o.Class, func(ctx context.Context) error {
		_, err := c.Snap.SnapshotV1().VolumeSnapshotClasses().Get(ctx, o.Class, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("--snapshot-class: VolumeSnapshotClass %q not found", o.Class)
	}
	return err
}

// SnapshotTargets snapshots the target claims and waits for their
// snapshots (janitor.Rescue, the snapshot command's pipeline, calls it).
// It returns one outcome per target, in target order.
func SnapshotTargets(ctx context.Context, c *kube.Clients, inv *inventory.Inventory, ds []classify.Decision, targets []int, o Options) ([]Outcome, error) {
	if o.Attempts < 1 {
		o.Attempts = 1
	}
	r := &rescuer{c: c, inv: inv, ds: ds, o: o, counts: Counts{Total: len(targets), Started: time.Now()}}
	r.recheck = kube.NewRechecker(c, kube.RecheckOptions{Selector: o.Selector, WorkspaceLabel: o.WorkspaceLabel,
		MaxAge: o.RecheckMaxAge, PageSize: o.PageSize})
	if err := r.loadClasses(ctx); err != nil {
		return nil, err
	}
	hctx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	r.hub = newSnapshotHub(hctx, c)
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
	hub     *snapshotHub // the run's watches of snapshots

	originsOnce sync.Once
	origins     *Origins // r.inv's snapshots by name, built at the first ask

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
	err := r.c.Retry.Do(ctx, "list VolumeSnapshotClasses", func(ctx context.Context) error {
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
