//go:build integration

package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The safety tests judge the janitor by ground truth only: the objects the
// API server holds and what the test itself did (the claims and pods it
// created and deleted, and when). Nothing here reads the janitor's labels,
// annotations or report: a janitor that marks or labels wrongly cannot make
// its own deletions look safe.

// truthSnap is a VolumeSnapshot and its VolumeSnapshotContent as the API
// server holds them.
type truthSnap struct {
	Name string
	UID  types.UID
	// Source is spec.source.persistentVolumeClaimName ("" when the snapshot
	// was pre-provisioned from a content).
	Source string
	// Content is the bound VolumeSnapshotContent's name ("" when unbound).
	Content string
	// VolumeHandle is the bound content's spec.source.volumeHandle: the CSI
	// volume the storage system snapshotted ("" when pre-provisioned).
	VolumeHandle string
	// Labels are kept for the workspace link the test set itself
	// (foreign snapshots); never read for the janitor's own keys.
	Labels map[string]string
	// Created is metadata.creationTimestamp; Cut is status.creationTime, the
	// moment the storage system took it (Created until that is known).
	Created, Cut time.Time
	// Intact: readyToUse, no status.error, no deletionTimestamp, bound to a
	// content that exists, points back to this snapshot's UID, has a
	// snapshotHandle and no deletionTimestamp (docs/spec.md#evidence).
	Intact bool
	// Why says why it is not intact.
	Why string
	// Gone: the snapshot has a deletionTimestamp.
	Gone bool
}

// truthSnapshots reads every VolumeSnapshot of ns and the contents they are
// bound to, and judges each one from those objects alone.
func truthSnapshots(ctx context.Context, f *testenv.Fixtures, ns string) ([]truthSnap, error) {
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	contents, err := f.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list contents: %w", err)
	}
	byName := map[string]*snapv1.VolumeSnapshotContent{}
	for i := range contents.Items {
		byName[contents.Items[i].Name] = &contents.Items[i]
	}
	out := make([]truthSnap, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, judgeSnapshot(&l.Items[i], byName))
	}
	return out, nil
}

func judgeSnapshot(s *snapv1.VolumeSnapshot, contents map[string]*snapv1.VolumeSnapshotContent) truthSnap {
	ts := truthSnap{Name: s.Name, UID: s.UID, Labels: s.Labels, Created: s.CreationTimestamp.Time,
		Cut: s.CreationTimestamp.Time, Gone: s.DeletionTimestamp != nil}
	if s.Spec.Source.PersistentVolumeClaimName != nil {
		ts.Source = *s.Spec.Source.PersistentVolumeClaimName
	}
	st := s.Status
	if st != nil && st.CreationTime != nil {
		ts.Cut = st.CreationTime.Time
	}
	var c *snapv1.VolumeSnapshotContent
	if st != nil && st.BoundVolumeSnapshotContentName != nil {
		ts.Content = *st.BoundVolumeSnapshotContentName
		c = contents[ts.Content]
	}
	if c != nil && c.Spec.Source.VolumeHandle != nil {
		ts.VolumeHandle = *c.Spec.Source.VolumeHandle
	}
	if c != nil && (st == nil || st.CreationTime == nil) && c.Status != nil && c.Status.CreationTime != nil {
		ts.Cut = time.Unix(0, *c.Status.CreationTime)
	}
	switch {
	case s.DeletionTimestamp != nil:
		ts.Why = "being deleted"
	case st == nil || st.ReadyToUse == nil || !*st.ReadyToUse:
		ts.Why = "not ready"
	case st.Error != nil:
		ts.Why = "ready with status.error"
	case st.BoundVolumeSnapshotContentName == nil:
		ts.Why = "bound to no content"
	case c == nil:
		ts.Why = "its content " + *st.BoundVolumeSnapshotContentName + " does not exist"
	case c.DeletionTimestamp != nil:
		ts.Why = "its content is being deleted"
	case c.Spec.VolumeSnapshotRef.UID != s.UID || c.Spec.VolumeSnapshotRef.Name != s.Name || c.Spec.VolumeSnapshotRef.Namespace != s.Namespace:
		ts.Why = "its content points to another snapshot"
	case (c.Status == nil || c.Status.SnapshotHandle == nil || *c.Status.SnapshotHandle == "") &&
		(c.Spec.Source.SnapshotHandle == nil || *c.Spec.Source.SnapshotHandle == ""):
		ts.Why = "its content has no snapshotHandle"
	default:
		ts.Intact = true
	}
	return ts
}

// truthClaim is what the test knows of a claim it created: its identity
// (name, volume handle, creation time from the server's answer).
type truthClaim struct {
	Name, Handle string
	Created      time.Time
}

func truthOf(c *corev1.PersistentVolumeClaim, handle string) truthClaim {
	return truthClaim{Name: c.Name, Handle: handle, Created: c.CreationTimestamp.Time}
}

// of reports whether s is a snapshot of this claim: its spec.source names
// the claim, its content snapshotted the claim's volume, and it was created
// after the claim (a snapshot older than the claim is of an earlier claim of
// that name). Both timestamps have one-second resolution.
func (c truthClaim) of(s truthSnap) bool {
	return s.Source == c.Name && s.VolumeHandle == c.Handle && !s.Created.Before(c.Created)
}

// rescueAfter returns an intact snapshot of the claim that was cut after
// usedUntil, the moment the claim's last use is known to have ended (when
// the test started the delete of its last pod; the claim's creation when no
// pod ever used it). Cut times have one-second resolution: a snapshot is
// judged too early only when it was surely cut before usedUntil, that is
// when its cut second precedes usedUntil's.
func (c truthClaim) rescueAfter(snaps []truthSnap, usedUntil time.Time) (truthSnap, bool) {
	var best truthSnap
	found := false
	for _, s := range snaps {
		if !s.Intact || !c.of(s) || s.Cut.Before(usedUntil.Truncate(time.Second)) {
			continue
		}
		if !found || s.Cut.After(best.Cut) {
			best, found = s, true
		}
	}
	return best, found
}

// describeSnaps lists the snapshots of a claim, for failure messages.
func (c truthClaim) describeSnaps(snaps []truthSnap) string {
	out := ""
	for _, s := range snaps {
		if s.Source != c.Name {
			continue
		}
		why := "intact"
		if !s.Intact {
			why = s.Why
		}
		out += fmt.Sprintf("\n  snapshot %s (volume %q) created %s cut %s: %s", s.Name, s.VolumeHandle,
			s.Created.UTC().Format(time.RFC3339), s.Cut.UTC().Format(time.RFC3339), why)
	}
	if out == "" {
		out = "\n  no snapshot names it as its source"
	}
	return out
}

// claimDeleted reports whether the claim of this UID has been deleted: it
// has a deletionTimestamp or is gone (a claim deleted right after its rescue
// can stay Terminating for a long while, until the snapshot controller drops
// its pvc-as-source-protection finalizer). A claim of that name with
// another UID is a recreation: the original is gone.
func claimDeleted(ctx context.Context, f *testenv.Fixtures, ns, name string, uid types.UID) (bool, error) {
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return c.UID != uid || c.DeletionTimestamp != nil, nil
}

// syncDeletions waits (2 s at most) until a deletion watch has recorded
// every deletion a fresh list of ns shows; one it has not seen by then is
// recorded now, as late (later than it happened: invariant 2 is then weaker
// for it, invariant 1 is not). names lists the claims the test follows;
// deleted and late are guarded by mu. presentAt, when not nil, gets the
// time of the last list that showed each live claim (before the list was
// sent): a late deletion happened after it.
func syncDeletions(f *testenv.Fixtures, ns string, mu *sync.Mutex, names func() []string, deleted map[string]time.Time, late map[string]bool, presentAt map[string]time.Time) {
	ctx := context.Background()
	var missed []string
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		listed := time.Now()
		l, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		live := map[string]bool{}
		for _, c := range l.Items {
			live[c.Name] = c.DeletionTimestamp == nil
		}
		mu.Lock()
		defer mu.Unlock()
		missed = missed[:0]
		for _, name := range names() {
			if _, seen := deleted[name]; !seen && !live[name] {
				missed = append(missed, name)
			} else if presentAt != nil && live[name] {
				presentAt[name] = listed
			}
		}
		return len(missed) == 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, name := range missed {
		if _, seen := deleted[name]; !seen {
			deleted[name], late[name] = time.Now(), true
		}
	}
}

// The bytes in the evidence: each use of a claim (each pod the tests
// create on it) writes a new generation into its volume while the use is
// live, and a claim the janitor reaped is restored from its rescue (through
// restore.Do, as a new claim) and must hold the last generation written by
// a use the safety checks hold the rescue to.

// generationFile is the file of a volume each use writes its generation to.
const generationFile = "generation"

// restorePrefix starts the names of the claims the bytes check restores:
// the tests' deletion watches ignore them.
const restorePrefix = "rst-"

// generation is one write of a use into its claim's volume.
type generation struct {
	n    int
	data string
	pod  string
	at   time.Time // when the write returned
}

// generations are the writes of the uses of every claim (by namespace and
// name). Writes are serialized, so a claim's volume holds the last one
// recorded.
type generations struct {
	mu      sync.Mutex
	next    map[string]int
	byClaim map[string][]generation // "<namespace>/<claim>"
	failed  int                     // writes that failed (the claim was gone): no generation
	took    time.Duration
}

func newGenerations() *generations {
	return &generations{next: map[string]int{}, byClaim: map[string][]generation{}}
}

// write writes the claim's next generation, "<claim>/<n>", as pod's use.
// Call it while the use is live: after the pod's create returned, before
// the test records the start of its delete.
func (g *generations) write(f *testenv.Fixtures, ns, claim, pod string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	start := time.Now()
	defer func() { g.took += time.Since(start) }()
	key := ns + "/" + claim
	g.next[key]++
	n := g.next[key]
	data := fmt.Sprintf("%s/%d", claim, n)
	if err := f.WriteVolume(context.Background(), ns, claim, generationFile, []byte(data)); err != nil {
		g.failed++ // a pod on a claim already gone: nothing written
		return
	}
	g.byClaim[key] = append(g.byClaim[key], generation{n: n, data: data, pod: pod, at: time.Now()})
}

func (g *generations) of(ns, claim string) []generation {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.byClaim[ns+"/"+claim])
}

func (g *generations) written() (ok, failed int, took time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, l := range g.byClaim {
		ok += len(l)
	}
	return ok, g.failed, g.took
}

// heldOnly keeps the generations written by a use the rescue is held to
// (held reports those, by pod).
func heldOnly(gens []generation, held func(pod string) bool) []generation {
	var out []generation
	for _, g := range gens {
		if held(g.pod) {
			out = append(out, g)
		}
	}
	return out
}

// lastOf is the newest of gens written in a second before the second
// before (any second when before is zero).
func lastOf(gens []generation, before time.Time) (generation, bool) {
	var last generation
	found := false
	for _, g := range gens {
		if (before.IsZero() || g.at.Truncate(time.Second).Before(before)) && (!found || g.n > last.n) {
			last, found = g, true
		}
	}
	return last, found
}

// bytesFigures are the figures of the bytes check.
type bytesFigures struct {
	Restores   int `json:"restores"`
	Bytes      int `json:"bytesCompared"`
	Mismatches int `json:"mismatches"`
	// NotSampled: reaped claims left out of the sample (every
	// PVC_JANITOR_BYTES_EVERY-th is restored).
	NotSampled int `json:"reapedNotSampled"`
	// Newer: restores that held a newer generation than the last one
	// required (written by a use nobody had to see, or one that overlapped
	// the deletion).
	Newer int `json:"newerThanRequired"`
	// NoGeneration: restores of claims no held use ever wrote to (the
	// volume must then hold no generation, or a newer unheld one).
	NoGeneration int `json:"withoutRequiredGeneration"`
	// CutSecond: restores without the last generation of a held use,
	// written in the very second the rescue was cut. Cut times, like the
	// Unused condition's lastTransitionTime and the orphaned-since marks,
	// are whole seconds: the safety invariants accept a rescue cut in the
	// second its claim's last use ended, and so does this check; the
	// figure counts the writes that slack lost.
	CutSecond int `json:"lastWriteLostInTheCutSecond"`
	// Last: restores that held the last generation written to the claim
	// at all (held or not).
	Last               int    `json:"holdingTheLastGenerationWritten"`
	GenerationsWritten int    `json:"generationsWritten"`
	WritesFailed       int    `json:"generationWritesOnGoneClaims"`
	WriteTime          string `json:"generationWriteTime"`
	Time               string `json:"restoreTime"`
	time               time.Duration
}

// bytesCheck restores rescues of reaped claims with a direct client (never
// through a fault proxy) and compares their bytes.
type bytesCheck struct {
	f     *testenv.Fixtures
	c     *kube.Clients
	ns    string
	every int
	seen  int
	fig   bytesFigures
	// logf, when set, tells of each restore that passed without the last
	// generation written (that of a use the rescue is not held to).
	logf func(string, ...any)
	// about, when set, tells more of a claim in those messages.
	about func(claim string) string
	// cutOffset, when set, is how far the storage clock of a claim's
	// volume is off: taken out of the rescue's cut time.
	cutOffset func(claim string) time.Duration
}

// newBytesCheck restores every every-th reaped claim it is shown.
func newBytesCheck(f *testenv.Fixtures, ns string, every int) (*bytesCheck, error) {
	c, err := kube.NewClients(env.Config, kube.ClientOptions{QPS: 100, Burst: 200,
		Retry: kube.RetryPolicy{Initial: 100 * time.Millisecond, Max: time.Second, MaxElapsed: 20 * time.Second}})
	if err != nil {
		return nil, err
	}
	return &bytesCheck{f: f, c: c, ns: ns, every: every}, nil
}

// bytesEvery is the sample of reaped claims restored: all of them in the
// short profiles, every 10th in the long ones; PVC_JANITOR_BYTES_EVERY
// overrides.
func bytesEvery(long bool) int {
	def := 1
	if long {
		def = 10
	}
	return envInt("PVC_JANITOR_BYTES_EVERY", def)
}

// verify restores the newest rescue of a reaped claim (restore.Do, Claim:
// claim, As: a fresh name) and reads its generation: it must be the last
// generation of held (those of the uses the rescue is held to) written in
// a second before the rescue's cut second, or a newer one of gens; none at
// all only when there is no such generation. It returns "" or why not. Claims not in the sample are
// counted and skipped. The restored claim is deleted (its class deletes
// its volume) and waited for until gone, so no run of the janitor ever
// sees it.
func (b *bytesCheck) verify(claim string, gens, held []generation) (string, error) {
	return b.verifyFrom(claim, "", gens, held)
}

// verifyFrom is verify restoring from the named snapshot of the claim
// (restore's --from) when from is set: a snapshot that is not the
// janitor's (a backup tool's) has no claim template, so a restore by claim
// name does not find it.
func (b *bytesCheck) verifyFrom(claim, from string, gens, held []generation) (string, error) {
	b.seen++
	if (b.seen-1)%b.every != 0 {
		b.fig.NotSampled++
		return "", nil
	}
	ctx := context.Background()
	start := time.Now()
	defer func() { b.fig.time += time.Since(start); b.fig.Time = b.fig.time.Round(10 * time.Millisecond).String() }()
	as := fmt.Sprintf("%s%s-%d", restorePrefix, claim, b.seen)
	req := restore.Request{Namespace: b.ns, Claim: claim, As: as, AllowOlder: true, StorageClass: testenv.ProvisionedStorageClassName}
	if from != "" {
		req.Claim, req.From, req.Size = "", from, "1Gi"
	}
	out, err := restore.Do(ctx, b.c, req, restore.Options{
		Policy:  classify.Policy{WorkspaceLabel: "workspace", MinAge: time.Minute, GracePeriod: time.Hour},
		Timeout: time.Minute, Poll: 50 * time.Millisecond,
	})
	defer b.remove(as)
	if err != nil {
		return "", fmt.Errorf("restore %s as %s: %w", claim, as, err)
	}
	if !out.Bound {
		return "", fmt.Errorf("restore %s as %s: not bound: %s", claim, as, out.Message)
	}
	b.fig.Restores++
	from = out.Plan.Snapshot.Name
	cut := classify.CutTime(&out.Plan.Snapshot.Snapshot)
	if b.cutOffset != nil {
		cut = cut.Add(-b.cutOffset(claim)) // the storage clock's offset, taken out
	}
	cut = cut.Truncate(time.Second)
	want, hasWant := lastOf(held, cut)
	lastHeld, hasLastHeld := lastOf(held, time.Time{})
	if hasLastHeld && lastHeld.at.Truncate(time.Second).After(cut) {
		// Written in a second after the cut: no slack excuses it.
		want, hasWant = lastHeld, true
	}
	got, err := b.f.ReadVolume(ctx, b.ns, as, generationFile)
	absent := errors.Is(err, fs.ErrNotExist)
	if err != nil && !absent {
		return "", fmt.Errorf("read %s (restored from %s): %w", as, from, err)
	}
	b.fig.Bytes += len(got)
	var have *generation
	for i := range gens {
		if !absent && gens[i].data == string(got) {
			have = &gens[i]
		}
	}
	last := (len(gens) == 0 && absent) || (len(gens) > 0 && have != nil && have.n == gens[len(gens)-1].n)
	if last {
		b.fig.Last++
	}
	var wrote strings.Builder
	for _, g := range gens {
		fmt.Fprintf(&wrote, "\n  generation %q by pod %s, written %s", g.data, g.pod, g.at.UTC().Format("15:04:05.000"))
	}
	passed := false
	switch {
	case !hasWant && (absent || have != nil):
		b.fig.NoGeneration++
		passed = true
	case hasWant && have != nil && have.n >= want.n:
		if have.n > want.n {
			b.fig.Newer++
		}
		passed = true
	}
	if passed && hasLastHeld && (have == nil || have.n < lastHeld.n) {
		// The janitor dates a use that the Unused condition records (to
		// the second) by the end of that second: a rescue cut within it
		// no longer counts, so a write of the cut's second is never lost.
		b.fig.CutSecond++
		b.fig.Mismatches++
		more := ""
		if b.about != nil {
			more = b.about(claim)
		}
		return fmt.Sprintf("%s restored from %s (cut %s, orphaned-since %s) holds %s, not %q, written by pod %s at %s, in the second of the cut%s%s",
			claim, from, cut.UTC().Format(time.RFC3339), fmtTime(out.Plan.Snapshot.OrphanedSince), describeGot(got, absent),
			lastHeld.data, lastHeld.pod, lastHeld.at.UTC().Format("15:04:05.000"), more, wrote.String()), nil
	}
	if passed {
		if !last && b.logf != nil {
			g := gens[len(gens)-1]
			b.logf("bytes: %s restored from %s holds %s, not the last generation written, %q by pod %s at %s (a use its rescue is not held to)",
				claim, from, describeGot(got, absent), g.data, g.pod, g.at.UTC().Format("15:04:05.000"))
		}
		return "", nil
	}
	b.fig.Mismatches++
	holds := describeGot(got, absent)
	wants := "no generation or one written by a use nobody had to see"
	if hasWant {
		wants = fmt.Sprintf("%q (written by pod %s at %s) or newer", want.data, want.pod, want.at.UTC().Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s was reaped, but its rescue %s (cut %s) restored (as %s) holds %s, want %s; what its uses wrote:%s",
		claim, from, cut.UTC().Format(time.RFC3339), as, holds, wants, wrote.String()), nil
}

func describeGot(got []byte, absent bool) string {
	if absent {
		return "no generation"
	}
	return fmt.Sprintf("%q", got)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339)
}

// unusedCondition describes the Unused condition of a claim as deleted.
func unusedCondition(c *corev1.PersistentVolumeClaim) string {
	if c == nil {
		return "; its deletion not seen by the watch"
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Unused" {
			return fmt.Sprintf("; as deleted, Unused=%s since %s", cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339))
		}
	}
	return "; as deleted, no Unused condition"
}

// remove deletes a restored claim and waits until it is gone (30 s at most).
func (b *bytesCheck) remove(name string) {
	ctx := context.Background()
	claims := b.c.Kube.CoreV1().PersistentVolumeClaims(b.ns)
	if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	}
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// figures are the bytes check's figures, with the writes of gens.
func (b *bytesCheck) figures(gens *generations) bytesFigures {
	fig := b.fig
	var took time.Duration
	fig.GenerationsWritten, fig.WritesFailed, took = gens.written()
	fig.WriteTime = took.Round(10 * time.Millisecond).String()
	return fig
}
