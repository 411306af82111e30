//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// podLife is one pod of the churn: which claim it uses and when (local
// clock; the API server runs on this host) it was created and deleted.
type podLife struct {
	claim            string
	created, deleted time.Time
	// deleteStart is when the test started its delete: the pod's use of the
	// claim surely lasted until then.
	deleteStart time.Time
	// createdDone is when the create call returned: the pod surely
	// existed from then on.
	createdDone time.Time
}

// safetyWorld tracks one scenario.
type safetyWorld struct {
	t   *testing.T
	f   *testenv.Fixtures
	ns  string
	rng *rand.Rand

	mu       sync.Mutex
	pods     map[string]*podLife
	nextPod  int
	deleted  map[string]time.Time // claim -> when its deletion was first seen
	uids     map[string]string
	truth    map[string]truthClaim // claim -> what the test knows of it
	late     map[string]bool       // deletion found by a list, not the watch: its time is an upper bound
	churnOps int
	// req are the janitor's pod lists and claim deletions as they reached
	// the API server, invisible the pod uses that neither it nor anything
	// else could see, unattributed the deletions without an applied
	// DELETE seen (judged by the fallback).
	req          janitorRequests
	invisible    map[string]bool
	unattributed map[string]bool
	gens         *generations // what each use wrote into its claim's volume
	// deletedObj is each claim as its deletion was first seen.
	deletedObj map[string]*corev1.PersistentVolumeClaim
	// broken are the claims whose volume cannot be snapshotted (a
	// permanent fault): never rescued, never deleted.
	broken map[string]bool
	// workspace is each claim's workspace label.
	workspace map[string]string
}

// saw reports whether a janitor pod list surely saw pod p: its creation
// had returned before the list was sent, and its delete began after the
// answer ended.
func (w *safetyWorld) saw(p *podLife) bool {
	_, ok := w.req.listed(p.createdDone, p.deleteStart, nil)
	return ok
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestRandomizedSafety builds mixed cluster states and runs `janitor run`
// repeatedly while pods appear and disappear between and during runs. After
// every run it asserts the safety invariants, from ground truth only (the
// pods the test created and deleted, the snapshots and contents the API
// server holds; never the janitor's marks, labels or annotations):
//   - every deleted claim (deletionTimestamp set, or gone) has an intact
//     snapshot of its own (spec.source names it, its content snapshotted
//     its volume, created after it) cut after the last pod the test
//     deleted had gone;
//   - no claim referenced by a pod at the moment of its deletion was deleted;
//   - no claim has more snapshots than orphan episodes (a rerun finds its
//     rescue instead of taking another);
//   - the bytes: each pod writes a new generation into its claim's volume
//     before the test deletes it; at the end of each scenario every deleted
//     claim is restored from its rescue (restore.Do, as a new claim) and
//     must hold the last generation of a use the first invariant holds the
//     rescue to, or a newer one (checkBytes).
//
// The runs must delete, or a janitor that never deletes would pass: each
// scenario ends quiet (no churn, up to quietRuns runs), and every claim
// then idle (no pod, its volume not broken; at least one while one is
// left) must be deleted by its end, under make race too; and at least one
// claim in the whole test (PVC_JANITOR_SAFETY_MIN_DELETIONS overrides).
//
// Reproduce a failure with PVC_JANITOR_SEED=<seed from the message>;
// PVC_JANITOR_SAFETY_SCENARIOS and PVC_JANITOR_SAFETY_RUNS scale it; beyond
// the default 3 x 5 runs only every 10th deleted claim is restored
// (PVC_JANITOR_BYTES_EVERY=k: every k-th).
func TestRandomizedSafety(t *testing.T) {
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("PVC_JANITOR_SEED"), 10, 64); err == nil {
		seed = v
	}
	scenarios := envInt("PVC_JANITOR_SAFETY_SCENARIOS", 3)
	runs := envInt("PVC_JANITOR_SAFETY_RUNS", 5)
	totalRuns, totalDeleted, totalChurn, totalInvisible, totalUnattributed, totalIdle := 0, 0, 0, 0, 0, 0
	var bc *bytesCheck
	gens := newGenerations() // one for all scenarios: the figures count every write
	for s := 0; s < scenarios; s++ {
		sseed := seed + int64(s)
		w := &safetyWorld{t: t, rng: rand.New(rand.NewSource(sseed)), pods: map[string]*podLife{},
			deleted: map[string]time.Time{}, uids: map[string]string{}, truth: map[string]truthClaim{}, late: map[string]bool{},
			invisible: map[string]bool{}, unattributed: map[string]bool{}, gens: gens, deletedObj: map[string]*corev1.PersistentVolumeClaim{},
			broken: map[string]bool{}, workspace: map[string]string{}}
		w.f = fixtures(t)
		w.ns = env.Namespace(t)
		if bc == nil {
			var err error
			if bc, err = newBytesCheck(w.f, w.ns, bytesEvery(scenarios*runs > 15)); err != nil {
				t.Fatal(err)
			}
			bc.logf = t.Logf
		}
		bc.f, bc.ns = w.f, w.ns
		bc.about = func(claim string) string {
			w.mu.Lock()
			defer w.mu.Unlock()
			return unusedCondition(w.deletedObj[claim])
		}
		// A proxy without faults, to know when the janitor listed pods
		// and which of its DELETEs the server applied.
		p := env.StartFaultProxy(t, sseed)
		w.req.attach(p)
		kubeconfig := p.Kubeconfig
		fail := func(format string, a ...any) {
			t.Fatalf("seed %d (scenario %d, PVC_JANITOR_SEED=%d reproduces): %s", seed, s, seed, fmt.Sprintf(format, a...))
		}
		runJanitor := func(extra ...string) (int, string, string) {
			var outBuf, errBuf bytes.Buffer
			code := runWith(append(append(reapArgs("run", w.ns, "--yes", "--max-deletion-percent", "100", "--max-deletions", "1000",
				"--snapshot-timeout", "8s", "--snapshot-error-grace", "1s", "--snapshot-attempts", "2", "--concurrency", "4"),
				"--kubeconfig", kubeconfig, "--log-format", "json"), extra...), &outBuf, &errBuf)
			return code, outBuf.String(), errBuf.String()
		}
		w.build(fail)
		stopWatch := w.watchDeletions(fail)
		for r := 0; r < runs; r++ {
			w.churn(3 + w.intn(4))
			// Churn during the run; the goroutine ends before the checks
			// read what it wrote (stopped), and it draws from w.rng only
			// under the lock, as churn does.
			done, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-done:
						return
					case <-time.After(time.Duration(50+w.intn(300)) * time.Millisecond):
						w.churn(1)
					}
				}
			}()
			code, out, stderr := runJanitor()
			close(done)
			<-stopped
			if code != 0 && code != 4 {
				fail("run %d: exit %d\n%s\n%s", r, code, out, stderr)
			}
			w.syncDeletions()
			w.check(fail, r)
			totalRuns++
		}
		totalIdle += w.quiet(fail, runs, runJanitor)
		stopWatch()
		w.checkBytes(fail, bc)
		w.mu.Lock()
		totalDeleted += len(w.deleted)
		totalChurn += w.churnOps
		totalInvisible += len(w.invisible)
		totalUnattributed += len(w.unattributed)
		w.mu.Unlock()
	}
	fig := bc.figures(gens)
	t.Logf("safety: seed %d, %d scenarios, %d runs, %d claims deleted (%d without their DELETE seen; %d idle at the quiet ends, all deleted), %d pod churn operations, %d uses no one could see, 0 violations",
		seed, scenarios, totalRuns, totalDeleted, totalUnattributed, totalIdle, totalChurn, totalInvisible)
	t.Logf("safety bytes: %d generations written in %s (%d writes on claims already gone), %d reaped claims restored in %s (%d not sampled), %d bytes compared, %d holding the last generation written, %d newer than required, %d without a required generation, %d whose last held write was lost in the second of the cut, %d mismatches",
		fig.GenerationsWritten, fig.WriteTime, fig.WritesFailed, fig.Restores, fig.Time, fig.NotSampled, fig.Bytes, fig.Last, fig.Newer, fig.NoGeneration, fig.CutSecond, fig.Mismatches)
	// At least one deletion in the whole test: a janitor that never
	// deletes would pass. Each scenario's quiet end already asks for one
	// (it ends one claim's pods when none is idle), make race's one short
	// scenario included; this counts the whole test.
	// PVC_JANITOR_SAFETY_MIN_DELETIONS=N asks for N (0: none, for
	// experiments); envInt would read 0 as unset.
	min := 1
	if v, err := strconv.Atoi(os.Getenv("PVC_JANITOR_SAFETY_MIN_DELETIONS")); err == nil && v >= 0 {
		min = v
	}
	if totalDeleted < min {
		t.Fatalf("seed %d: %d claims deleted in %d runs, want at least %d: a run that deletes nothing proves nothing",
			seed, totalDeleted, totalRuns, min)
	}
}

func (w *safetyWorld) build(fail func(string, ...any)) {
	ctx := context.Background()
	n := 8 + w.rng.Intn(6)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ws-%02d", i)
		handle := w.ns + "-" + name
		// Slow, flaky and broken volumes: a fault that cannot be set fails
		// the test rather than leaving a plain volume in its place.
		var fault *csidriver.Fault
		switch w.rng.Intn(6) {
		case 0:
			fault = &csidriver.Fault{ReadyAfter: time.Duration(1+w.rng.Intn(3)) * time.Second}
		case 1:
			fault = &csidriver.Fault{TransientFailures: 1 + w.rng.Intn(2)}
		case 2:
			fault = &csidriver.Fault{PermanentError: "broken " + name}
			w.broken[name] = true
		}
		if fault != nil {
			if err := csidriver.SetFault(env.DriverStateDir, handle, *fault); err != nil {
				fail("set the driver fault of %s: %v", name, err)
			}
		}
		labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": fmt.Sprintf("w%d", i%5)}
		c, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: name, Labels: labels, VolumeHandle: handle})
		if err != nil {
			fail("seed claim: %v", err)
		}
		w.uids[name] = string(c.UID)
		w.truth[name] = truthOf(c, handle)
		w.workspace[name] = labels["workspace"]
	}
	w.churn(n / 2)
}

// churn creates or deletes k pods at random.
// intn draws from the world's random source under its lock: the churn
// goroutine and the test's own goroutine both draw.
func (w *safetyWorld) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Intn(n)
}

func (w *safetyWorld) churn(k int) {
	ctx := context.Background()
	for i := 0; i < k; i++ {
		w.mu.Lock()
		var alive []string
		for name, p := range w.pods {
			if p.deleted.IsZero() {
				alive = append(alive, name)
			}
		}
		create := len(alive) == 0 || w.rng.Intn(2) == 0
		claim := fmt.Sprintf("ws-%02d", w.rng.Intn(len(w.uids)))
		podName := fmt.Sprintf("p-%d", w.nextPod)
		w.nextPod++
		var victim string
		victimClaim := ""
		if !create {
			victim = alive[w.rng.Intn(len(alive))]
			victimClaim = w.pods[victim].claim
		}
		scheduled := w.rng.Intn(2) == 0
		w.churnOps++
		w.mu.Unlock()
		if create {
			// The pod counts from before the API call: the janitor may see
			// it from the moment the call starts.
			start := time.Now()
			if _, err := w.f.Pod(ctx, testenv.PodSpec{Namespace: w.ns, Name: podName, Claims: []string{claim}, Scheduled: scheduled}); err == nil {
				w.mu.Lock()
				w.pods[podName] = &podLife{claim: claim, created: start, createdDone: time.Now()}
				w.mu.Unlock()
			}
			continue
		}
		w.endPod(victim, victimClaim)
	}
}

// endPod ends the churn's pod victim, a use of claim. Called without w.mu.
func (w *safetyWorld) endPod(victim, claim string) {
	// The use writes its generation while it is surely live: before
	// the delete's recorded start.
	w.gens.write(w.f, w.ns, claim, victim)
	start := time.Now()
	if err := w.f.ForceDeletePod(context.Background(), w.ns, victim); err == nil {
		w.mu.Lock()
		w.pods[victim].deleteStart = start
		w.pods[victim].deleted = time.Now() // after the call: the pod may count until then
		w.mu.Unlock()
	}
}

// quietRuns bounds the runs of a scenario's quiet end.
const quietRuns = 5

// quiet ends a scenario without churn: every claim that no pod references
// and whose volume is not broken (idle) must be deleted within quietRuns
// runs of the janitor, run with --clock-skew 0s (one host, one clock: a
// rescue need not wait out a skew). It is the scenario's deletion floor,
// from ground truth: a janitor that deletes nothing, or leaves an idle
// claim behind, fails here, whatever the churn interrupted before. When no
// claim is idle, the pods of one claim that is not broken end first, so
// the floor is not zero while such a claim is left. It returns how many
// claims were idle; run is one janitor run, the first numbered from.
func (w *safetyWorld) quiet(fail func(string, ...any), from int, run func(extra ...string) (int, string, string)) int {
	idle := w.idle()
	if len(idle) == 0 {
		w.mu.Lock()
		var victims []string
		claim := ""
		for _, name := range claimNames(w.truth) {
			if _, gone := w.deleted[name]; !gone && !w.broken[name] {
				claim = name
				break
			}
		}
		for name, p := range w.pods {
			if p.claim == claim && p.deleted.IsZero() {
				victims = append(victims, name)
			}
		}
		w.mu.Unlock()
		sort.Strings(victims)
		for _, v := range victims {
			w.endPod(v, claim)
		}
		idle = w.idle()
	}
	deletedAll := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, name := range idle {
			if _, ok := w.deleted[name]; !ok {
				return false
			}
		}
		return true
	}
	r := 0
	for ; r < quietRuns && !deletedAll(); r++ {
		code, out, stderr := run("--clock-skew", "0s")
		if code != 0 && code != 4 {
			fail("quiet run %d: exit %d\n%s\n%s", r, code, out, stderr)
		}
		w.syncDeletions()
		w.check(fail, from+r)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, name := range idle {
		if _, ok := w.deleted[name]; !ok {
			fail("the quiet end: %s was idle (no pod, its volume not broken) through %d runs and is not deleted: the deletion floor of the scenario is its %d idle claims",
				name, r, len(idle))
		}
	}
	return len(idle)
}

// claimNames are the scenario's claims, sorted.
func claimNames(m map[string]truthClaim) []string {
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// idle lists the claims not deleted, not broken and referenced by no pod
// that has not ended, and whose workspace has no such broken claim: a
// broken claim with no pod is never rescued, and its workspace's other
// claims wait for it (docs/spec.md#reap-workspace-first). Called without
// w.mu.
func (w *safetyWorld) idle() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	used := map[string]bool{}
	for _, p := range w.pods {
		if p.deleted.IsZero() {
			used[p.claim] = true
		}
	}
	waits := map[string]bool{}
	for _, name := range claimNames(w.truth) {
		if _, gone := w.deleted[name]; !gone && w.broken[name] && !used[name] {
			waits[w.workspace[name]] = true
		}
	}
	var out []string
	for _, name := range claimNames(w.truth) {
		if _, gone := w.deleted[name]; !gone && !w.broken[name] && !used[name] && !waits[w.workspace[name]] {
			out = append(out, name)
		}
	}
	return out
}

// watchDeletions records when each claim was first seen being deleted.
func (w *safetyWorld) watchDeletions(fail func(string, ...any)) func() {
	wi, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		fail("watch claims: %v", err)
	}
	go func() {
		for ev := range wi.ResultChan() {
			c, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok {
				continue
			}
			if strings.HasPrefix(c.Name, restorePrefix) {
				continue // the bytes check's own restores
			}
			if ev.Type == watch.Deleted || c.DeletionTimestamp != nil {
				w.mu.Lock()
				if _, seen := w.deleted[c.Name]; !seen {
					w.deleted[c.Name] = time.Now()
					w.deletedObj[c.Name] = c
				}
				w.mu.Unlock()
			}
		}
	}()
	return wi.Stop
}

// syncDeletions: see the shared syncDeletions. Called without w.mu.
func (w *safetyWorld) syncDeletions() {
	syncDeletions(w.f, w.ns, &w.mu, func() []string {
		names := make([]string, 0, len(w.truth))
		for name := range w.truth {
			names = append(names, name)
		}
		return names
	}, w.deleted, w.late, nil)
}

func (w *safetyWorld) check(fail func(string, ...any), run int) {
	snaps, err := truthSnapshots(context.Background(), w.f, w.ns)
	if err != nil {
		fail("run %d: %v", run, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	// No duplicates: a claim gets at most one live snapshot per orphan
	// episode (its creation, then each pod the test deleted).
	for name, c := range w.truth {
		live, episodes := 0, 1
		for _, s := range snaps {
			if c.of(s) && !s.Gone {
				live++
			}
		}
		for _, p := range w.pods {
			if p.claim == name && !p.deleteStart.IsZero() {
				episodes++
			}
		}
		if live > episodes {
			fail("run %d: %s has %d snapshots for %d orphan episodes:%s", run, name, live, episodes, c.describeSnaps(snaps))
		}
	}
	for claim, at := range w.deleted {
		c := w.truth[claim]
		usedUntil := c.Created
		for name, p := range w.pods {
			if p.claim != claim {
				continue
			}
			// 2. The pod was in the last pod list the deleting run heard
			// before its DELETE (the fallback, without that DELETE seen:
			// created over a second before the deletion was seen).
			held, attributed := w.req.heldAt(claim, p.createdDone, p.created, p.deleteStart, p.deleted, at, at)
			if !attributed {
				w.unattributed[claim] = true
				held = held && !w.late[claim]
			}
			if held {
				fail("run %d: %s was deleted (seen at %s) while pod %s [%s, %s] referenced it", run, claim,
					at.Format(time.RFC3339Nano), name, p.createdDone.Format(time.RFC3339Nano), p.deleteStart.Format(time.RFC3339Nano))
			}
			if !p.deleteStart.IsZero() && p.deleteStart.Before(at) && p.deleteStart.After(usedUntil) {
				// Without the Unused condition, a pod that came and went
				// between two of the janitor's pod lists is a use nobody
				// can see (README: the grace period is the guard): it is
				// counted, not judged. With the condition, the controller
				// manager sees every pod, and so must the janitor.
				if !w.f.UnusedCondition && !w.saw(p) {
					w.invisible[claim+"/"+name] = true
					continue
				}
				usedUntil = p.deleteStart
			}
		}
		if _, ok := c.rescueAfter(snaps, usedUntil); !ok {
			fail("run %d: %s was deleted (seen at %s) without an intact snapshot of it cut after its last use ended at %s:%s", run, claim,
				at.UTC().Format(time.RFC3339Nano), usedUntil.UTC().Format(time.RFC3339Nano), c.describeSnaps(snaps))
		}
	}
}

// checkBytes restores (a sample of) the claims the janitor reaped in this
// scenario from their rescues (bc: through restore.Do, as new claims): each
// must hold the last generation written by a use that check holds the
// rescue to (one whose delete started before the claim's deletion was seen
// and, on a stack without the Unused condition, that a janitor pod list
// saw), or a newer one. A held use's write in the very second of the
// rescue's cut is only counted when it is missing (see
// bytesFigures.CutSecond). Every deletion of this test is the janitor's
// (the test deletes no claim). Called after the deletion watch stopped.
func (w *safetyWorld) checkBytes(fail func(string, ...any), bc *bytesCheck) {
	type reaped struct {
		name string
		at   time.Time
	}
	w.mu.Lock()
	var todo []reaped
	for name, at := range w.deleted {
		todo = append(todo, reaped{name, at})
	}
	w.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].name < todo[j].name })
	for _, r := range todo {
		gens := w.gens.of(w.ns, r.name)
		w.mu.Lock()
		held := heldOnly(gens, func(pod string) bool {
			p := w.pods[pod]
			return p != nil && !p.deleteStart.IsZero() && p.deleteStart.Before(r.at) && (w.f.UnusedCondition || w.saw(p))
		})
		w.mu.Unlock()
		why, err := bc.verify(r.name, gens, held)
		if err != nil {
			fail("bytes: %v", err)
		}
		if why != "" {
			fail("bytes: %s\n%s", why, w.describe(r.name, r.at))
		}
	}
}

// describe tells what the test knows of a deleted claim, for failure
// messages: when its deletion was seen, its pods, its snapshots.
func (w *safetyWorld) describe(claim string, at time.Time) string {
	var b strings.Builder
	ts := func(t time.Time) string { return t.UTC().Format("15:04:05.000") }
	w.mu.Lock()
	fmt.Fprintf(&b, "  deletion seen at %s (late: %v)\n", ts(at), w.late[claim])
	for name, p := range w.pods {
		if p.claim == claim {
			fmt.Fprintf(&b, "  pod %s created [%s, %s] delete [%s, %s] seen by a janitor pod list: %v\n", name, ts(p.created), ts(p.createdDone),
				ts(p.deleteStart), ts(p.deleted), w.saw(p))
		}
	}
	w.mu.Unlock()
	l, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, s := range l.Items {
			if s.Spec.Source.PersistentVolumeClaimName == nil || *s.Spec.Source.PersistentVolumeClaimName != claim {
				continue
			}
			cut := ""
			if s.Status != nil && s.Status.CreationTime != nil {
				cut = s.Status.CreationTime.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(&b, "  snapshot %s created %s cut %s annotations %v\n", s.Name, s.CreationTimestamp.UTC().Format(time.RFC3339), cut, s.Annotations)
		}
	}
	return b.String()
}
