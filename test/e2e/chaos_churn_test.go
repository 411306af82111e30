//go:build integration

package cli_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The disturbances of TestChaos that move where a workspace's newest data
// lives (issue 23): clocks a second off, iterations that archive superseded
// claims, a backup tool's snapshots with deletionPolicy Delete, and
// restores, of a workspace's last claim and of an older copy with
// --allow-older. Each is judged by check's invariants, from ground truth.

// storageSkew is how far the driver's clock is off for a fifth of the
// volumes, either way, and apiServerSkew how far the proxy moves the API
// server's Date in a quarter of the iterations: together under the
// default --clock-skew (2s), the margin the contract states. Whole seconds
// for the storage clock, so that the test can take the offset back out of
// a cut time it reads (check judges true cut times).
const (
	storageSkew   = time.Second
	apiServerSkew = 500 * time.Millisecond
)

// drawCutOffsetLocked gives a fifth of the rescuable volumes a storage clock
// a second ahead or behind (csidriver.Fault.CutOffset) and records it.
// Called with mu held, before the claim's fault is written.
func (w *chaosWorld) drawCutOffsetLocked(fault *csidriver.Fault, handle string) *csidriver.Fault {
	if fault != nil && fault.PermanentError != "" || w.rng.Intn(5) != 0 {
		return fault
	}
	if fault == nil {
		fault = &csidriver.Fault{}
	}
	fault.CutOffset = storageSkew
	if w.rng.Intn(2) == 0 {
		fault.CutOffset = -storageSkew
	}
	w.cutOffset[handle] = fault.CutOffset
	return fault
}

// dateOffset draws the API server's clock for one iteration: off by half
// a second either way in a quarter of them.
func dateOffset(r interface{ Intn(int) int }) time.Duration {
	switch r.Intn(8) {
	case 0:
		return apiServerSkew
	case 1:
		return -apiServerSkew
	}
	return 0
}

// snapshots reads the ground truth of the namespace's snapshots with each
// cut time on the real clock: the driver's offset of the volume taken out.
func (w *chaosWorld) snapshots(ctx context.Context) ([]truthSnap, error) {
	snaps, err := truthSnapshots(ctx, w.f, w.ns)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range snaps {
		snaps[i].Cut = snaps[i].Cut.Add(-w.cutOffset[snaps[i].VolumeHandle])
	}
	return snaps, nil
}

// backupTool takes, as a backup product would, a snapshot of a live
// workspace claim with the Delete class and none of the janitor's marks.
// The janitor may take it as the claim's rescue (any intact snapshot cut
// late enough is one), so check's invariants hold it to the same rules;
// it is no episode of the janitor's (invariant 3 leaves it out).
func (w *chaosWorld) backupTool() {
	w.mu.Lock()
	var live []*chaosClaim
	for _, c := range w.aliveLocked() {
		if !c.outsider {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		w.mu.Unlock()
		return
	}
	c := live[w.rng.Intn(len(live))]
	name := fmt.Sprintf("backup-%d", w.nextBackup)
	w.nextBackup++
	w.foreign[name] = true
	w.mu.Unlock()
	if _, err := w.f.Snapshot(context.Background(), w.ns, name, c.name, testenv.SnapshotClassDelete, map[string]string{"backup.example.com/by": "chaos"}, nil); err != nil {
		w.t.Logf("backup tool: snapshot %s of %s: %v", name, c.name, err)
	}
}

// watchSnapshots records every snapshot of the namespace that it sees ready:
// its source claim, by UID. A claim deleted without an intact snapshot now
// can then be told from one deleted without any: its copy was there, ready,
// and went (retention pruned it, on newer data of its workspace).
func (w *chaosWorld) watchSnapshots(ctx context.Context) {
	record := func(s *snapv1.VolumeSnapshot) {
		if s.Status != nil && s.Status.Error != nil {
			w.mu.Lock()
			w.snapErred[s.UID] = true // never intact since (G7)
			w.mu.Unlock()
		}
		if s.Spec.Source.PersistentVolumeClaimName == nil || s.Status == nil || s.Status.ReadyToUse == nil || !*s.Status.ReadyToUse {
			return
		}
		w.mu.Lock()
		if _, ok := w.seenReady[s.UID]; !ok {
			w.seenReady[s.UID] = seenSnap{name: s.Name, source: *s.Spec.Source.PersistentVolumeClaimName, created: s.CreationTimestamp.Time}
		}
		w.mu.Unlock()
	}
	for ctx.Err() == nil {
		l, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range l.Items {
			record(&l.Items[i])
		}
		wi, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			continue
		}
		for ev := range wi.ResultChan() {
			if s, ok := ev.Object.(*snapv1.VolumeSnapshot); ok {
				record(s)
			}
		}
		wi.Stop()
	}
}

// foreignRescueLocked names the backup tool's snapshot a reaped claim's
// newest intact snapshot is (the one check holds the claim to: the janitor
// may have reaped on it), "" when that one is the janitor's. The bytes
// check restores it by name: it has no claim template, and a restore by
// claim name picks the janitor's own rescue, which may be older. Called
// with mu held.
func (w *chaosWorld) foreignRescueLocked(claim string, snaps []truthSnap) string {
	c := w.claims[claim]
	if c == nil {
		return ""
	}
	if s, ok := c.truth.rescueAfter(snaps, c.truth.Created); ok && w.foreign[s.Name] {
		return s.Name
	}
	return ""
}

// seenSnap is a snapshot the watch saw ready.
type seenSnap struct {
	name, source string
	created      time.Time
}

// prunedLocked reports whether a snapshot of c created after after that
// the watch saw ready is gone now, deleted by neither the second actor nor
// the test: retention (CHAOS_ARGS) pruned it. Only then may a claim deleted
// on a rescue or an archive be left without one, or with only an older
// one, and only on newer data of its workspace (check). Called with mu
// held.
func (w *chaosWorld) prunedLocked(c *chaosClaim, snaps []truthSnap, after time.Time) (string, bool) {
	if !w.retention {
		return "", false
	}
	live := map[types.UID]bool{}
	for _, s := range snaps {
		if !s.Gone {
			live[s.UID] = true
		}
	}
	// The newest pruned copy: the one the claim was reaped on, whose
	// descendants (a claim restored from it) hold the claim's data; an
	// older copy pruned for it has none of its own.
	name, newest := "", time.Time{}
	for uid, s := range w.seenReady {
		if s.source != c.name || s.created.Before(c.truth.Created) || !s.created.After(after) || live[uid] || w.foreign[s.name] || w.snapErred[uid] {
			continue
		}
		if d, byActor := w.actorDel[s.name]; byActor && d.snap.UID == uid {
			continue
		}
		if name == "" || s.created.After(newest) {
			name, newest = s.name, s.created
		}
	}
	return name, name != ""
}

// maybeRestore restores one copy (pickRestoreLocked) when the iteration
// drew a restore: after the bytes check, before archive removes the copies
// of the claims reaped.
func (w *chaosWorld) maybeRestore(fail func(string, ...any), snaps []truthSnap) {
	w.mu.Lock()
	if !w.restoreNext {
		w.mu.Unlock()
		return
	}
	w.restoreNext = false
	rc, ok := w.pickRestoreLocked(snaps)
	w.mu.Unlock()
	if ok {
		w.restoreOne(fail, rc)
	}
}

// restoreCase is one restore the churn asks `janitor restore` for.
type restoreCase struct {
	from       *chaosClaim // the reaped claim whose copy is restored
	snap       truthSnap   // that copy
	as         string
	allowOlder bool // the workspace has newer data: an older copy
}

// pickRestoreLocked chooses a restore among the claims reaped (with a copy
// of their own) since the last archive: the last claim of a workspace that
// has no live claim (its user comes back), or an older copy of a workspace
// whose newest data lives on (with --allow-older, as a user looking at old
// files). Called with mu held.
func (w *chaosWorld) pickRestoreLocked(snaps []truthSnap) (restoreCase, bool) {
	var cands []restoreCase
	for name := range w.rescued {
		c := w.claims[name]
		if c == nil || w.archived[name] || w.retired[name] || w.restoredOnce[name] {
			continue
		}
		// The janitor's copies only: a backup tool's has no claim
		// template, and a restore without one is labelled with the
		// workspace alone (outside the runs' selector).
		var own []truthSnap
		for _, x := range snaps {
			if !w.foreign[x.Name] {
				own = append(own, x)
			}
		}
		s, ok := c.truth.rescueAfter(own, c.truth.Created)
		if !ok {
			continue
		}
		rc := restoreCase{from: c, snap: s, as: fmt.Sprintf("%s-r%d", strings.SplitN(c.name, "-r", 2)[0], w.nextRestore)}
		for _, o := range w.aliveLocked() {
			if o.workspace == c.workspace && o != c {
				rc.allowOlder = true
			}
		}
		cands = append(cands, rc)
	}
	if len(cands) == 0 {
		return restoreCase{}, false
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].from.name < cands[j].from.name })
	// Three times in four, a copy older than a live claim of its
	// workspace when there is one: its restore is first refused (G9).
	var older []restoreCase
	for _, rc := range cands {
		if rc.allowOlder && w.newerClaimLocked(rc) != "" {
			older = append(older, rc)
		}
	}
	if len(older) > 0 && w.rng.Intn(4) != 0 {
		cands = older
	}
	rc := cands[w.rng.Intn(len(cands))]
	w.nextRestore++
	w.restoredOnce[rc.from.name] = true
	return rc, true
}

// restoreOne runs `janitor restore --from <copy> --as <name>` (the built
// binary, through the fault proxy, under the iteration's faults) and adopts
// the restored claim into the world once it is bound: a claim of the
// workspace, restored from rc.snap's data, whose volume holds the
// generation that copy held. The workspace's pods end first (the user
// switches to the restored claim). A restore that failed is counted, and
// whatever it left is cleaned up.
func (w *chaosWorld) restoreOne(fail func(string, ...any), rc restoreCase) {
	ctx := context.Background()
	w.mu.Lock()
	w.creating[rc.from.workspace] = true
	var ended []string
	for pod, p := range w.pods {
		if o := w.claims[p.claim]; o != nil && o.workspace == rc.from.workspace && p.deleted.IsZero() && p.deleteStart.IsZero() {
			ended = append(ended, pod)
		}
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.creating, rc.from.workspace)
		w.mu.Unlock()
	}()
	sort.Strings(ended)
	for _, pod := range ended {
		w.deletePod(pod)
	}
	args := []string{"restore", "--from", rc.snap.Name, "--as", rc.as, "-n", w.ns, "--workspace-label", "workspace",
		"--storage-class", testenv.ProvisionedStorageClassName, "--restore-timeout", "60s", "--kubeconfig", w.kubeconfig, "--log-format", "json"}
	kind := "returns"
	if newer := w.newerClaimThan(rc); rc.allowOlder && newer != "" {
		// G9: without --allow-older, a restore of a copy older than a
		// claim of its workspace (created after the copy was cut) is
		// refused: exit 2, one line, nothing written
		// (docs/spec.md#restore-refusals).
		r := startChaosProc(w.bin, append(slices.Clone(args), "--log-level", "error"), 0)
		w.mu.Lock()
		w.restores["refusalsChecked"]++
		w.blind[r.pid] = true // restore writes no marks: its reads are no use the janitor saw
		w.mu.Unlock()
		_, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, rc.as, metav1.GetOptions{})
		switch {
		case err == nil:
			fail("a restore that must be refused created %s (exit %d)", rc.as, r.code)
		case r.code == 1:
			// A read the faults broke for good: nothing to judge but
			// that nothing was written.
			w.mu.Lock()
			w.restores["refusalsChecked"]--
			w.restores["refusalsFailedRead"]++
			w.mu.Unlock()
		case r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0:
			fail("restore of %s (cut %s) as %s without --allow-older beside %s, created after it: exit %d, want 2 and one line:\n%s",
				rc.snap.Name, rc.snap.Cut.UTC().Format(time.RFC3339), rc.as, newer, r.code, r.stderr)
		}
		attempts, _ := w.oracle.peek(r.pid)
		if len(attempts) > 0 {
			fail("a refused restore (pid %d) sent %d writes: %v", r.pid, len(attempts), attempts[0])
		}
	}
	if rc.allowOlder {
		args = append(args, "--allow-older")
		kind = "olderCopies"
	}
	created := time.Now()
	r := startChaosProc(w.bin, args, 0)
	// Restore writes no marks (docs/spec.md#rule-last-used): a use only its
	// read showed is not one the janitor saw and wrote down.
	w.mu.Lock()
	w.blind[r.pid] = true
	w.mu.Unlock()
	if r.code == 2 {
		// Refused (the copy may be older than a backup of the claim):
		// nothing was created, nothing to wait for.
		if _, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, rc.as, metav1.GetOptions{}); err == nil {
			fail("a refused restore (exit 2) created %s: %s", rc.as, lastLine(r.stderr))
		}
		w.mu.Lock()
		w.restores[kind+"Refused"]++
		w.mu.Unlock()
		w.t.Logf("restore %s from %s refused: %s", rc.as, rc.snap.Name, lastLine(r.stderr))
		return
	}
	pvc, err := w.f.WaitClaim(ctx, w.ns, rc.as, func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
	if err != nil {
		w.mu.Lock()
		w.restores[kind+"Failed"]++
		w.mu.Unlock()
		w.t.Logf("restore %s from %s (exit %d): not bound: %v; %s", rc.as, rc.snap.Name, r.code, err, lastLine(r.stderr))
		_ = w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Delete(ctx, rc.as, metav1.DeleteOptions{})
		return
	}
	pv, err := w.f.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil {
		w.t.Fatalf("restore %s: read its volume %s: %v", rc.as, pvc.Spec.VolumeName, err)
	}
	got, err := w.f.ReadVolume(ctx, w.ns, rc.as, generationFile)
	inherited := ""
	if err == nil {
		inherited = string(got)
	}
	c := &chaosClaim{name: rc.as, uid: string(pvc.UID), workspace: rc.from.workspace, created: created, iteration: w.iteration,
		truth: truthOf(pvc, pv.Spec.CSI.VolumeHandle), restoredFrom: rc.from, restoredCopy: rc.snap.Created}
	w.gens.inherit(w.ns, rc.as, inherited)
	w.mu.Lock()
	w.claims[rc.as] = c
	w.presentAt[rc.as] = created
	w.restores[kind]++
	w.mu.Unlock()
}

// newerClaimThan names a live claim of rc's workspace that the test
// created surely after rc's copy was cut (past --clock-skew): a restore of
// the copy must then say it is older; "" when there is none.
func (w *chaosWorld) newerClaimThan(rc restoreCase) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newerClaimLocked(rc)
}

// newerClaimLocked is newerClaimThan with mu held.
func (w *chaosWorld) newerClaimLocked(rc restoreCase) string {
	for _, o := range w.aliveLocked() {
		if o != rc.from && !o.outsider && o.workspace == rc.from.workspace && o.created.After(rc.snap.Cut.Add(3*time.Second)) {
			return o.name
		}
	}
	return ""
}

// holdsNewerDataLocked reports whether claim b holds newer data of its
// workspace than c, whose last use ended at ended: a claim created after
// that (the test ends a session's pods before it creates the next claim);
// a restored claim only when the claim it was restored from does (a
// restore is its source's data, however late it was made or used:
// docs/spec.md#rule-restored-data-time). Called with mu held.
func (w *chaosWorld) holdsNewerDataLocked(b, c *chaosClaim, ended time.Time) bool {
	for b.restoredFrom != nil {
		if b.restoredFrom == c {
			return false // c's own data, not newer
		}
		b = b.restoredFrom
	}
	return b != c && b.created.After(ended)
}

// inherit records the generation a restored claim's volume started with
// (the copy's), as generation 0 of no pod: the bytes check takes it as the
// claim's data until a use of it writes.
func (g *generations) inherit(ns, claim, data string) {
	if data == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	key := ns + "/" + claim
	g.byClaim[key] = append(g.byClaim[key], generation{n: 0, data: data, pod: "", at: time.Now()})
}

// restoreBeside runs, with retention on (CHAOS_ARGS: the runs prune), half
// the iterations' restores beside their runs instead of after them (G9
// beside prune), 0 to 2 s after the runs start: the restore's copy, chosen
// before the runs, may be pruned, or be the one a run keeps, while the
// restore reads it. Judged as every restore is (restoreOne: a refusal
// without --allow-older writes nothing; the restored claim holds its
// copy's data). Not in iterations whose percentage blast radius bites: a
// claim restored while the runs go would change the scope they count. The
// returned wait ends the restore; nil when none was drawn.
func (c *chaosTest) restoreBeside(it chaosIteration) func() {
	w := c.w
	w.mu.Lock()
	next := w.restoreNext && w.retention
	w.mu.Unlock()
	if !next || c.rng.Intn(2) != 0 || strings.Count(strings.Join(it.args, " "), "--max-deletion-percent") > 1 {
		return nil
	}
	snaps, err := w.snapshots(context.Background())
	if err != nil {
		c.t.Fatalf("restore beside the runs: read the snapshots: %v", err)
	}
	w.mu.Lock()
	w.restoreNext = false
	rc, ok := w.pickRestoreLocked(snaps)
	w.mu.Unlock()
	if !ok {
		c.t.Logf("iteration %d: no copy to restore beside the runs", w.iteration)
		return nil
	}
	delay := time.Duration(c.rng.Intn(2000)) * time.Millisecond
	c.t.Logf("iteration %d: restore %s from %s beside the runs, %s after they start (older copy: %v)", w.iteration, rc.as,
		rc.snap.Name, delay, rc.allowOlder)
	var mu sync.Mutex
	var msgs []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(delay)
		w.restoreOne(func(format string, a ...any) {
			mu.Lock()
			msgs = append(msgs, fmt.Sprintf(format, a...))
			mu.Unlock()
		}, rc)
	}()
	return func() {
		<-done
		w.mu.Lock()
		w.restores["besideRuns"]++
		w.mu.Unlock()
		if len(msgs) > 0 {
			c.fail("a restore beside the runs (%s from %s): %s", rc.as, rc.snap.Name, strings.Join(msgs, "; "))
		}
	}
}
