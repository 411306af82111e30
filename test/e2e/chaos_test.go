//go:build integration

package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvc-janitor/pvc-janitor/internal/lock"
	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// proxyRun runs a command line in-process through a fault proxy.
func proxyRun(p *testenv.FaultProxy, args ...string) (int, string, string) {
	var out, errOut strings.Builder
	code := runWith(append(args, "--kubeconfig", p.Kubeconfig, "--log-format", "json", "--log-level", "error"), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestGoneMidPaginationRestartsTheList: with --page-size 2 every list is
// paginated; the proxy answers the first continuations of the claims, pods
// and snapshots lists with 410 Gone. Each list restarts from its first page.
func TestGoneMidPaginationRestartsTheList(t *testing.T) {
	scanThroughBrokenLists(t, 410, testenv.KindGone, testenv.Faults{RateGone: 1},
		map[string]int{"pods": 3, "persistentvolumeclaims": 2, "volumesnapshots": 1}, "--page-size", "2")
}

// TestTruncatedListsAreReadAgain: lists are read as one streamed response
// each (the default, no --page-size); the proxy cuts the first responses of
// the claims, pods and snapshots lists at a random byte. Each cut list is
// read again from the start.
func TestTruncatedListsAreReadAgain(t *testing.T) {
	scanThroughBrokenLists(t, 412, testenv.KindTruncate, testenv.Faults{RateTruncate: 1},
		map[string]int{"pods": 3, "persistentvolumeclaims": 2, "volumesnapshots": 2})
}

// scanThroughBrokenLists scans six workspace claims while the proxy breaks
// the first times[resource] lists of each resource with faults (of kind),
// and checks that no claim is lost or counted twice, and that the pod that
// references the last claim, last of nine pods in name order (so on the
// last page when paginated), still makes it InUse.
func scanThroughBrokenLists(t *testing.T, seed int64, kind string, faults testenv.Faults, times map[string]int, args ...string) {
	t.Helper()
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	for i := 0; i < 6; i++ {
		orphan(t, f, ns, fmt.Sprintf("ws-%d", i), fmt.Sprintf("w%d", i), "")
	}
	for i := 0; i < 8; i++ {
		if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: fmt.Sprintf("a-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "z-ide", Claims: []string{"ws-5"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := f.Snapshot(ctx, ns, fmt.Sprintf("manual-%d", i), fmt.Sprintf("ws-%d", i), "", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	p := env.StartFaultProxy(t, seed)
	var rules []testenv.Rule
	for res, n := range times {
		rules = append(rules, testenv.Rule{Verbs: []string{"list"}, Resources: []string{res}, Times: n, Faults: faults})
	}
	p.Set(testenv.Faults{Rules: rules})
	code, out, stderr := proxyRun(p, append([]string{"scan", "-n", ns, "-l", wsSel, "--workspace-label", "workspace",
		"--min-age", "0s", "--grace-period", "0s", "-o", "json", "--dry-run"}, args...)...)
	if code != 0 {
		t.Fatalf("scan through broken lists (%s): exit %d: %s", kind, code, stderr)
	}
	detail := p.InjectedDetail()
	for res, want := range times {
		if key := kind + " list " + res; detail[key] != want {
			t.Fatalf("the proxy injected %v, want %s=%d: the test proves nothing", detail, key, want)
		}
	}
	r := parse(t, out)
	names := map[string]int{}
	for _, c := range r.Claims {
		names[c.Name]++
	}
	if r.Summary.Claims != 6 || len(names) != 6 {
		t.Fatalf("report has %d claims (%v), want each of the 6 exactly once", r.Summary.Claims, names)
	}
	if st, _, reason := entry(t, r, "ws-5"); st != "InUse" || !strings.Contains(reason, "z-ide") {
		t.Errorf("ws-5 (used by the last pod): %s %q, want InUse by z-ide", st, reason)
	}
	t.Logf("injected %s", testenv.FormatCounts(detail))
}

// TestGoneForeverFailsClosed: a pods list that keeps answering 410 Gone is
// never used half-read: after its restarts the run fails.
func TestGoneForeverFailsClosed(t *testing.T) {
	podsListFailsClosed(t, 411, testenv.KindGone, testenv.Faults{RateGone: 1}, "--page-size", "1")
}

// TestTruncatedForeverFailsClosed: a pods list that is cut every time is
// never used half-read: the run fails once its retries are spent.
func TestTruncatedForeverFailsClosed(t *testing.T) {
	podsListFailsClosed(t, 413, testenv.KindTruncate, testenv.Faults{RateTruncate: 1}, "--api-timeout", "3s")
}

// podsListFailsClosed runs `run --yes` over three claims in use while every
// pods list is broken by faults (of kind): the run must fail (exit 1) with
// one line naming the read, print no report, write nothing but its own
// Lease, and release that.
func podsListFailsClosed(t *testing.T, seed int64, kind string, faults testenv.Faults, args ...string) {
	t.Helper()
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	for i := 0; i < 3; i++ {
		orphan(t, f, ns, fmt.Sprintf("ws-%d", i), fmt.Sprintf("w%d", i), "")
		if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: fmt.Sprintf("p-%d", i), Claims: []string{fmt.Sprintf("ws-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	p := env.StartFaultProxy(t, seed)
	p.Set(testenv.Faults{Rules: []testenv.Rule{{Verbs: []string{"list"}, Resources: []string{"pods"}, Faults: faults}}})
	code, out, stderr := proxyRun(p, append([]string{"run", "--yes", "-n", ns, "-l", wsSel, "--min-age", "0s", "--grace-period", "0s",
		"-o", "json", "--lock-namespace", ns}, args...)...)
	if code != 1 || !strings.HasPrefix(stderr, "error: read pods") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q: want 1 and one line naming the pods read", code, stderr)
	}
	if out != "" {
		t.Errorf("a failed read printed a report: %q", out)
	}
	if w := claimWrites(p.Writes()); len(w) > 0 {
		t.Errorf("a run that could not read its pods wrote %v", w)
	}
	leaseReleased(t, ns)
	if n := p.InjectedByKind()[kind]; n < 2 {
		t.Errorf("only %d %s faults injected", n, kind)
	}
}

// claimWrites drops the writes of the run's own Lease (taken before the
// first read, released at the end): what is left changed the cluster.
func claimWrites(writes []string) []string {
	var out []string
	for _, w := range writes {
		if !strings.Contains(w, "/apis/coordination.k8s.io/v1/namespaces/") {
			out = append(out, w)
		}
	}
	return out
}

// leaseReleased fails the test when the janitor's Lease in ns still exists.
func leaseReleased(t *testing.T, ns string) {
	t.Helper()
	_, err := env.Clientset(t).CoordinationV1().Leases(ns).Get(context.Background(), lock.Name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the lease in %s was not released: %v", ns, err)
	}
}

// TestChaos runs `janitor run` as a process, many times, through the fault
// proxy at fault rates of up to 20% per request (429, 500, 503, connection
// resets before and after the server applied the request, hangs, added
// latency, 410 Gone on list continuations, watch streams cut), while pods
// come and go, new claims appear, two runs sometimes start together and runs
// are SIGKILLed at random moments. After every iteration it asserts the
// safety invariants, judged from ground truth only (the pods and claims the
// test created and deleted, the API server's snapshots and contents, the
// pod lists the proxy saw the janitor send, the controller manager's Unused
// condition), never from the janitor's marks, labels, annotations or report
// (docs/reliability.md has the details):
//   - every deleted claim (deletionTimestamp set, or gone) has an intact
//     snapshot of its own (spec.source names it, its content snapshotted
//     its volume, created after it), cut after the controller manager saw
//     its last use end, after the release of any pod a janitor pod list
//     saw and after the end of any attachment without a pod that a janitor
//     VolumeAttachment list saw (uses nobody could see are counted, not
//     failed); or, deleted
//     without one (a quarter of the iterations discard), a newer claim of
//     its workspace, created after its last use, holds newer data;
//   - no claim was deleted while a pod referenced it;
//   - no more live snapshots of a claim than its orphan episodes;
//   - no claim outside the selector is ever marked, snapshotted, given an
//     Event or deleted;
//   - the bytes: each pod writes a new generation into its claim's volume
//     before the test deletes it, and every claim the janitor reaped with
//     a rescue (not those the test retired, nor those discarded) is
//     restored from it through restore.Do, as a new claim, after the
//     iteration's checks, with a direct client: it must hold the last
//     generation of a use the checks above hold the rescue to, or a newer
//     one (checkBytes; figures under "bytes");
//   - the rules chaos_oracle_test.go judges per run from the proxy log
//     (issue 40): grace period and min-age, blast radius, one writing run
//     at a time, Held/Terminating/Unbound claims untouched, only
//     pvc-janitor.io/ keys on claims, prunes by descent, live rescues
//     kept, contents Retain, restore refusals, no delete after the run's
//     own pod list showed a use.
//
// The world is a workspace manager's: pods mount only the newest claim of a
// workspace, and the old session's pods go before a newer claim is made.
// Where a workspace's newest data lives moves too (chaos_churn_test.go):
// storage and API server clocks a second off, iterations that archive
// superseded claims, a backup tool's Delete-class snapshots, and restores
// (of a workspace's last claim, and of an older copy with --allow-older).
// Then the faults stop, the pods go, and the final runs must converge (one
// usually does; a claim whose delete precondition failed is reaped by the
// next; three at most): every claim left is on a volume whose driver always
// fails, or has newer data of its workspace elsewhere (Superseded under
// --sessions-carry-data and kept by policy; the final runs go by descent,
// which may reap it on its own rescue); every other one was deleted.
//
// PVC_JANITOR_CHAOS_RUNS (default 12) sets the iterations,
// PVC_JANITOR_CHAOS_SEED reproduces a run (the seed is printed on failure),
// PVC_JANITOR_CHAOS_MAX_RATE (default 0.2) caps the fault rates, and
// PVC_JANITOR_CHAOS_REPORT names a file for the figures (JSON). Every reaped
// claim is restored when the runs are 50 or fewer, every 10th beyond;
// PVC_JANITOR_BYTES_EVERY=k restores every k-th.
func TestChaos(t *testing.T) {
	c := newChaosTest(t)
	for i := 0; i < c.runs; i++ {
		c.iteration(i)
	}
	c.quiesce()
	c.converge()
	c.report()
}

// chaosTest is one TestChaos: the world, the proxy in front of the API
// server, the runs' flags and the figures. Its steps are its methods, in
// the order TestChaos calls them.
type chaosTest struct {
	t         *testing.T
	seed      int64
	runs      int
	maxRate   float64
	actorRate float64
	bin       string
	started   time.Time
	stats     chaosStats
	rng       *rand.Rand // the test's choices: faults, kills, concurrency
	w         *chaosWorld
	p         *testenv.FaultProxy
	base      []string // every run's flags
	cmPID     int      // kube-controller-manager, when its pauses matter
	notice    noticeStreak
}

// fail counts a violation and ends the test with the seed that reproduces
// it.
func (c *chaosTest) fail(format string, a ...any) {
	c.t.Helper()
	c.stats.Violations++
	c.t.Fatalf("seed %d (PVC_JANITOR_CHAOS_SEED=%d reproduces): %s", c.seed, c.seed, fmt.Sprintf(format, a...))
}

// newChaosTest builds the world (claims, outsiders, first pods), the fault
// proxy that records the janitor's pod lists and deletions, and the flags
// of every run.
func newChaosTest(t *testing.T) *chaosTest {
	c := &chaosTest{t: t, seed: time.Now().UnixNano(), runs: envInt("PVC_JANITOR_CHAOS_RUNS", 12),
		maxRate: envFloat("PVC_JANITOR_CHAOS_MAX_RATE", 0.2), bin: binary(t), started: time.Now(),
		// PVC_JANITOR_CHAOS_ACTOR is the share of iterations in which a
		// second actor deletes a snapshot between runs, and again during
		// one.
		actorRate: envFloat("PVC_JANITOR_CHAOS_ACTOR", 0.2)}
	if v, err := strconv.ParseInt(os.Getenv("PVC_JANITOR_CHAOS_SEED"), 10, 64); err == nil {
		c.seed = v
	}
	c.stats = chaosStats{Seed: c.seed, Exits: map[string]int{}, RuntimeErrors: map[string]int{}, MaxRate: c.maxRate,
		FinalStates: map[string]int{}, ActorJudged: map[string]int{}}
	c.rng = rand.New(rand.NewSource(c.seed))
	w := &chaosWorld{t: t, rng: rand.New(rand.NewSource(c.seed + 1)), claims: map[string]*chaosClaim{},
		pods: map[string]*chaosPod{}, deleted: map[string]time.Time{}, late: map[string]bool{}, archived: map[string]bool{},
		retired: map[string]bool{}, archivedAt: map[string]time.Time{}, deletedObj: map[string]*corev1.PersistentVolumeClaim{},
		invisible: map[string]bool{}, unattributed: map[string]bool{}, blind: map[int]bool{}, creating: map[string]bool{}, leaked: map[bool]int{}, discards: map[string]string{}, prunedOnNewer: map[string]bool{},
		rescued: map[string]bool{}, bytesDone: map[string]bool{}, gens: newGenerations(),
		presentAt: map[string]time.Time{}, actorDel: map[string]actorDeletion{}, actorJudged: map[string]string{},
		cutOffset: map[string]time.Duration{}, foreign: map[string]bool{}, seenReady: map[types.UID]seenSnap{},
		restoredOnce: map[string]bool{}, restores: map[string]int{},
		specials: map[string]string{}, specialWrites: map[string]int{}, deletedContents: map[string]bool{}, snapErred: map[types.UID]bool{},
		prunedCarry: map[string]bool{}, goneAt: map[string]int{}}
	c.w = w
	w.g10.init()
	c.stats.G10.GuardExits = map[string]int{}
	w.f = fixtures(t)
	w.ns = env.Namespace(t)
	var err error
	if w.bytes, err = newBytesCheck(w.f, w.ns, bytesEvery(c.runs > 50)); err != nil {
		t.Fatal(err)
	}
	w.bytes.logf = t.Logf
	w.bytes.about = func(claim string) string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return unusedCondition(w.deletedObj[claim])
	}
	w.bytes.cutOffset = func(claim string) time.Duration {
		w.mu.Lock()
		defer w.mu.Unlock()
		if cl := w.claims[claim]; cl != nil {
			return w.cutOffset[cl.truth.Handle]
		}
		return 0
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go w.watchDeletions(ctx)
	go w.watchSnapshots(ctx)
	for i := 0; i < 8; i++ {
		w.addClaim(c.fail, false)
	}
	for i := 0; i < 3; i++ {
		w.addClaim(c.fail, true)
	}
	w.addSpecials(c.fail)
	w.churn(4)
	c.p = env.StartFaultProxy(t, c.seed)
	w.req.attach(c.p)
	w.oracle.onPodList = w.ambush
	w.oracle.attach(c.p)
	w.bin, w.kubeconfig = c.bin, c.p.Kubeconfig
	// Controller manager pauses need the condition to matter, and the
	// pid file of the test's own stack: one that cannot be read fails the
	// run rather than silently turning every pause off.
	if w.f.UnusedCondition {
		pid, err := controllerManagerPID()
		if err != nil {
			t.Fatalf("the controller manager's pauses: %v", err)
		}
		c.cmPID = pid
	}
	t.Cleanup(func() {
		if c.cmPID > 0 {
			_ = syscall.Kill(c.cmPID, syscall.SIGCONT)
		}
	})
	c.base = append(reapArgs("run", w.ns, "--yes", "--max-deletion-percent", "100", "--max-deletions", "1000",
		"--lock-duration", "3s", "--snapshot-timeout", "8s", "--snapshot-error-grace", "1s", "--snapshot-attempts", "2",
		"--concurrency", "4", "--api-timeout", "30s"), "--kubeconfig", c.p.Kubeconfig, "--log-format", "json", "--log-level", "warn")
	// PVC_JANITOR_CHAOS_ARGS adds flags to every run, e.g. retention
	// ("--keep-last 1 --delete-contents"): the invariants must hold with
	// them too (make chaos CHAOS_ARGS=…).
	if extra := strings.Fields(os.Getenv("PVC_JANITOR_CHAOS_ARGS")); len(extra) > 0 {
		c.base = append(c.base, extra...)
		c.stats.Args = strings.Join(extra, " ")
		w.retention = slices.Contains(extra, "--keep-last") || slices.Contains(extra, "--keep-for")
	}
	return c
}

// chaosIteration is what one iteration drew: the disturbances during its
// runs and the runs' flags.
type chaosIteration struct {
	actorDuring bool          // a second actor deletes a snapshot during the runs
	pause       time.Duration // kube-controller-manager stopped this long during them
	procs       int           // janitor processes started at once
	killAfter   time.Duration // SIGKILL after this long (0: never)
	args        []string
	discard     bool // --superseded discard
	ambush      bool // pods start on rescued claims as pod lists arrive
	takeover    bool // two runs, the first stopped past its Lease (runTakeover)
}

// iteration is one round: the world moves, runs start under drawn faults
// while it keeps moving, their exits are judged, then the invariants.
func (c *chaosTest) iteration(i int) {
	c.arrange(i)
	it := c.draw()
	scope := c.w.inScope()
	results := c.runDuring(it)
	lockHeld := c.judgeExits(i, results)
	c.stats.Runs++
	c.w.syncDeletions()
	c.judgeRequests(fmt.Sprintf("iteration %d", i), it.args, results, scope)
	c.w.checkSpecials(c.fail, fmt.Sprintf("iteration %d", i))
	c.w.checkContents(c.fail, fmt.Sprintf("iteration %d", i), false)
	if lockHeld {
		time.Sleep(time.Second) // a dead holder's lease lasts --lock-duration
	}
	c.w.check(c.fail, fmt.Sprintf("iteration %d", i))
	if (i+1)%25 == 0 {
		c.w.mu.Lock()
		reaped := len(c.w.deleted) - len(c.w.retired)
		c.w.mu.Unlock()
		c.t.Logf("iteration %d/%d after %s: %d processes, %d kills, %d claims reaped, faults %s", i+1, c.runs,
			time.Since(c.started).Round(time.Second), c.stats.Processes, c.stats.Kills, reaped, testenv.FormatCounts(c.p.InjectedByKind()))
	}
}

// arrange moves the world between runs: claims stuck for good (superseded,
// kept by policy; or on a broken volume) are deleted by their "user" after
// a while, new workspaces keep arriving (so there is always work), pods
// come and go, and a second actor sometimes deletes a snapshot of a live
// claim: the janitor must take a new rescue before it reaps, and never reap
// on one that is gone.
func (c *chaosTest) arrange(i int) {
	w := c.w
	w.mu.Lock()
	alive := 0
	for _, cl := range w.claims {
		if _, gone := w.deleted[cl.name]; !gone && !cl.outsider && !w.retired[cl.name] {
			alive++
		}
	}
	w.iteration = i
	w.mu.Unlock()
	w.retire(i)
	for n := c.rng.Intn(3); n > 0 && alive < 14; n-- {
		w.addClaim(c.fail, c.rng.Intn(6) == 0 && w.outsiders() < 6)
		alive++
	}
	w.churn(2 + c.rng.Intn(4))
	c.arrangeG10(i)
	if c.actorRate > 0 && c.rng.Float64() < c.actorRate {
		w.secondActor()
	}
	// A backup tool snapshots a live claim with the Delete class.
	if c.rng.Intn(6) == 0 {
		w.backupTool()
		c.stats.ForeignSnapshots++
	}
}

// draw chooses the iteration's disturbances and flags, and sets the
// proxy's fault rates.
func (c *chaosTest) draw() chaosIteration {
	it := chaosIteration{procs: 1, args: c.base}
	it.actorDuring = c.actorRate > 0 && c.rng.Float64() < c.actorRate
	// The controller manager stops (an upgrade, a crash loop) for a while
	// during a run: the Unused condition goes stale while pods come and go.
	if c.cmPID > 0 && c.rng.Intn(8) == 0 {
		it.pause = time.Duration(500+c.rng.Intn(2500)) * time.Millisecond
		c.stats.ControllerPauses++
	}
	faults := chaosFaults(c.rng, c.maxRate)
	// The API server's clock is half a second off in a quarter of the
	// iterations (the marks the janitor takes from its Date).
	if faults.DateOffset = dateOffset(c.rng); faults.DateOffset != 0 {
		c.stats.DateSkewedIterations++
	}
	c.p.Set(faults)
	if c.rng.Intn(10) == 0 {
		it.procs = 2
		c.stats.ConcurrentPairs++
	}
	if c.rng.Intn(4) == 0 {
		it.killAfter = time.Duration(50+c.rng.Intn(4000)) * time.Millisecond
	}
	// One iteration in five of the others: the first of two runs loses
	// its Lease (G3 takeover), without hung requests (a request held 3 s
	// by the proxy would reach the server after the Lease moved).
	if it.procs == 1 && it.killAfter == 0 && c.rng.Intn(5) == 0 {
		it.takeover = true
		faults.RateHang = 0
		c.p.Set(faults)
	}
	// Half the iterations read every list as one stream (the default),
	// half in pages (where 410 Gone on continuations applies): of 10, or
	// in half of them of 2, so that the pod lists span several pages
	// (the oracle's G11 judges paginated pod lists too).
	if c.rng.Intn(2) == 0 {
		size := "10"
		if c.rng.Intn(2) == 0 {
			size = "2"
			c.stats.SmallPages++
		}
		it.args = append(slices.Clone(it.args), "--page-size", size)
		c.stats.Paginated++
	}
	// A quarter of the iterations discard superseded claims: each such
	// deletion must be justified by newer data the test knows is held.
	// This world's newer claims are created empty: they supersede an
	// older one only by the workspace's line, which discard and archive
	// iterations state (--sessions-carry-data, docs/spec.md#rule-superseded:
	// the oracle's newer data is that line); the others run by descent,
	// where the older claims are rescued and reaped like any other.
	if it.discard = c.rng.Intn(4) == 0; it.discard {
		it.args = append(slices.Clone(it.args), "--superseded", "discard", "--sessions-carry-data")
		c.stats.DiscardRuns++
	} else if c.rng.Intn(3) == 0 {
		// A quarter archive them: each deletion then needs its archive,
		// an intact snapshot of its own like any rescue.
		it.args = append(slices.Clone(it.args), "--superseded", "archive", "--sessions-carry-data")
		c.stats.ArchiveRuns++
	}
	// Grace periods, min-ages and blast radii that bite (the oracle's G1
	// and G2), and a third of the iterations with --delete-contents (G8).
	it.args = c.drawLimits(it.args)
	it.args = c.drawNotice(it.args)
	it.ambush = c.rng.Intn(3) == 0
	if c.rng.Intn(3) == 0 && !slices.Contains(it.args, "--delete-contents") {
		it.args = append(slices.Clone(it.args), "--delete-contents")
	}
	// A fifth of the iterations end with a restore (maybeRestore).
	c.w.mu.Lock()
	c.w.restoreNext = c.rng.Intn(5) == 0
	c.w.mu.Unlock()
	return it
}

// runDuring starts the iteration's janitor processes and, until they end,
// keeps the world moving: pods come and go, the controller manager pauses,
// a second actor deletes a snapshot. It returns the processes' results,
// once every run has ended and the disturbances have stopped.
func (c *chaosTest) runDuring(it chaosIteration) []chaosProc {
	w := c.w
	w.mu.Lock()
	w.discardRun = it.discard
	w.ambushOn, w.ambushes = it.ambush, 0
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.ambushOn = false
		w.mu.Unlock()
	}()
	done, stopped := make(chan struct{}), make(chan struct{})
	var signalErr error // a pause that could not be made or ended: read once stopped
	go func() {
		defer close(stopped)
		var paused, resumed <-chan time.Time
		if it.pause > 0 {
			paused = time.After(time.Duration(rand.Intn(2000)) * time.Millisecond)
		}
		var actor <-chan time.Time
		if it.actorDuring {
			actor = time.After(time.Duration(rand.Intn(3000)) * time.Millisecond)
		}
		defer func() {
			if resumed != nil {
				_ = syscall.Kill(c.cmPID, syscall.SIGCONT)
			}
		}()
		for {
			select {
			case <-done:
				return
			case <-paused:
				paused = nil
				if err := syscall.Kill(c.cmPID, syscall.SIGSTOP); err != nil {
					signalErr = fmt.Errorf("pause the controller manager (pid %d): %w", c.cmPID, err)
					continue
				}
				resumed = time.After(it.pause)
			case <-resumed:
				resumed = nil
				if err := syscall.Kill(c.cmPID, syscall.SIGCONT); err != nil {
					signalErr = fmt.Errorf("resume the controller manager (pid %d): %w", c.cmPID, err)
				}
			case <-actor:
				actor = nil
				w.secondActor()
			case <-time.After(time.Duration(100+rand.Intn(400)) * time.Millisecond):
				w.churn(1)
			}
		}
	}()
	guard := c.startGuard()        // G10: a guard beside (or just after) the runs
	restore := c.restoreBeside(it) // G9: a restore beside runs that prune
	var results []chaosProc
	if it.takeover {
		results = c.runTakeover(it.args)
	} else {
		results = make([]chaosProc, it.procs)
		var wg sync.WaitGroup
		for j := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[j] = startChaosProc(c.bin, it.args, it.killAfter)
			}()
		}
		wg.Wait()
	}
	runsEnded := time.Now()
	var g *chaosGuard
	if guard != nil {
		g = guard()
	}
	if restore != nil {
		restore()
	}
	close(done)
	<-stopped
	if g != nil {
		c.judgeGuard(fmt.Sprintf("iteration %d", c.w.iteration), g, g.start.Before(runsEnded))
	}
	if signalErr != nil {
		c.t.Fatal(signalErr) // a disturbance drawn and not made is no disturbance
	}
	return results
}

// judgeExits fails the test on a hung or panicking run and an exit code no
// run may end with, counts the others, and marks the runs whose pod lists
// are no use the janitor saw. It reports whether a run found the lease
// held (the next iteration waits for it to expire).
func (c *chaosTest) judgeExits(i int, results []chaosProc) (lockHeld bool) {
	w, stats := c.w, &c.stats
	w.mu.Lock()
	killedIter, failedIter := false, false
	for _, r := range results {
		killedIter = killedIter || r.killed
		failedIter = failedIter || r.code == 1
		switch {
		case r.killed, r.code == 1:
			// What a killed run saw died with it, and a run that failed (a
			// read failed, its lease was lost) may end before it
			// classified what it read: their pod lists are not uses "the
			// janitor saw" (on a stack without the Unused condition
			// nothing else recorded them).
			w.blind[r.pid] = true
		case strings.Contains(r.stderr, "could not be written down"):
			// The run said that a use it saw is lost (exit 4).
			w.blind[r.pid] = true
			stats.UnwrittenUses++
		}
	}
	if killedIter {
		w.judgedKilled++
	}
	if failedIter {
		w.judgedFailed++
	}
	w.mu.Unlock()
	if logs := os.Getenv("PVC_JANITOR_CHAOS_LOGS"); logs != "" {
		for _, r := range results {
			_ = os.WriteFile(filepath.Join(logs, fmt.Sprintf("iter-%04d-pid-%d-exit-%d.log", i, r.pid, r.code)),
				[]byte(r.stdout+"\n--- stderr\n"+r.stderr), 0o644)
		}
	}
	for _, r := range results {
		stats.Processes++
		if r.killed {
			stats.Kills++
		}
		stats.Exits[strconv.Itoa(r.code)]++
		switch {
		case r.hung:
			c.fail("iteration %d: the run did not end within %s; stderr:\n%s", i, chaosRunTimeout, r.stderr)
		case strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine "):
			c.fail("iteration %d: the run panicked:\n%s", i, r.stderr)
		case r.killed && r.code == 128+int(syscall.SIGKILL):
		case r.code == 0 || r.code == 4:
			if rep := parse(c.t, r.stdout); rep.Kind != "Report" || rep.Command != "run" {
				c.fail("iteration %d: exit %d with a bad report: %q", i, r.code, r.stdout)
			}
		case r.code == 5:
			// The lease of a killed (or concurrent) run: retry later.
			if strings.Contains(r.stderr, fmt.Sprintf("/%d/", r.pid)) {
				stats.SelfHeld++ // refused by its own lease
			}
			lockHeld = true
		case r.code == 1:
			kind := errorKind(r.stderr)
			if stats.RuntimeErrors[kind] == 0 {
				c.t.Logf("iteration %d: runtime error: %s", i, lastLine(r.stderr))
			}
			stats.RuntimeErrors[kind]++
		default:
			c.fail("iteration %d: exit %d\nstdout:\n%s\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	return lockHeld
}

// quiesce stops the faults and every pod, and waits until the controller
// manager has seen each claim's last pod go (a stale Unused: True would
// move forward during the final run, which then rightly refuses to reap on
// an older snapshot). A stack without the condition has nothing to wait
// for.
func (c *chaosTest) quiesce() {
	w := c.w
	w.mu.Lock()
	var podNames []string
	for name, pl := range w.pods {
		if pl.deleted.IsZero() {
			podNames = append(podNames, name)
		}
	}
	w.mu.Unlock()
	for _, name := range podNames {
		w.deletePod(name)
	}
	w.settleDeletions(c.t)
	for _, cl := range w.aliveClaims() {
		if !w.f.UnusedCondition {
			break
		}
		w.mu.Lock()
		gone := w.usedUntilLocked(cl, time.Now().Add(time.Hour)).Truncate(time.Second)
		w.mu.Unlock()
		if _, err := w.f.WaitClaim(context.Background(), w.ns, cl.name, func(pvc *corev1.PersistentVolumeClaim) bool {
			for _, cond := range pvc.Status.Conditions {
				if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue && !cond.LastTransitionTime.Time.Before(gone) {
					return true
				}
			}
			return false
		}); err != nil {
			// A use neither the janitor nor the controller manager saw:
			// counted by check, not a setup failure.
			c.t.Logf("%s: the Unused condition did not see its last pod go: %v", cl.name, err)
		}
	}
	c.p.Set(testenv.Faults{})
	c.detachAll()
	w.mu.Lock()
	w.discardRun, w.restoreNext = false, false
	w.mu.Unlock()
}

// settleDeletions waits until no claim of the namespace is Terminating:
// deletes already made (the test's retirements, a reap) land before the
// next final run. A claim that lingers (pvc-protection until its last pod
// object is gone, pvc-as-source-protection until its snapshot is ready)
// is still a claim to the janitor, rightly: a newer claim of a workspace
// keeps the older ones Superseded even while Terminating
// (docs/spec.md#rule-superseded), and convergence is judged on a settled
// world. 30 s per claim at most; one still there is logged.
func (w *chaosWorld) settleDeletions(t *testing.T) {
	l, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("settle deletions: %v", err)
		return
	}
	w.mu.Lock()
	specials := maps.Clone(w.specials)
	w.mu.Unlock()
	for _, c := range l.Items {
		if c.DeletionTimestamp == nil || specials[c.Name] != "" {
			continue // the Terminating special claim stays so
		}
		if err := w.f.WaitClaimGone(context.Background(), w.ns, c.Name); err != nil {
			t.Logf("claim %s is still Terminating (finalizers %v): %v", c.Name, c.Finalizers, err)
		}
	}
}

// converge runs the janitor without faults until nothing is left to do,
// three runs at most. A claim rescued by a run is usually reaped by the
// same run, but the snapshot-controller removes its
// pvc-as-source-protection finalizer from the claim just after the
// snapshot is ready; when that lands between the reap's re-read and its
// delete, the delete's precondition fails and the claim is left for the
// next run (docs/spec.md#reap).
func (c *chaosTest) converge() {
	for final := 1; ; final++ {
		c.w.settleDeletions(c.t)
		var last chaosProc
		for attempt := 0; ; attempt++ {
			scope := c.w.inScope()
			last = startChaosProc(c.bin, c.base, 0)
			c.stats.Processes++
			c.stats.Exits[strconv.Itoa(last.code)]++
			c.w.syncDeletions()
			c.judgeRequests(fmt.Sprintf("final run %d", final), c.base, []chaosProc{last}, scope)
			if last.code != 5 || attempt == 10 {
				break
			}
			time.Sleep(time.Second) // a killed run's lease expires
		}
		c.stats.Runs++
		c.stats.FinalRuns = final
		if last.code != 0 && last.code != 4 {
			c.fail("final run %d without faults: exit %d\n%s", final, last.code, last.stderr)
		}
		c.w.checkSpecials(c.fail, fmt.Sprintf("final run %d", final))
		c.w.checkContents(c.fail, fmt.Sprintf("final run %d", final), last.code == 0)
		c.w.check(c.fail, fmt.Sprintf("final run %d", final))
		if c.w.converged(c.t, c.fail, last, final == 3, c.stats.FinalStates) {
			return
		}
	}
}

// report completes the figures, logs them and writes them to
// PVC_JANITOR_CHAOS_REPORT; a run that reaped nothing proves nothing and
// fails.
func (c *chaosTest) report() {
	w, stats := c.w, &c.stats
	w.mu.Lock()
	for _, cl := range w.claims {
		if cl.outsider {
			stats.Outsiders++
		} else {
			stats.ClaimsCreated++
		}
	}
	stats.ClaimsRetired = len(w.retired)
	stats.InvisibleUses = len(w.invisible)
	stats.Discards = len(w.discards)
	stats.PrunedOnNewer = len(w.prunedOnNewer)
	stats.ClaimsReaped = len(w.deleted) - len(w.retired)
	for name := range w.specials {
		if _, ok := w.deleted[name]; ok {
			stats.ClaimsReaped-- // the Terminating one: the test's own delete
		}
	}
	stats.SpecialClaims = len(w.specials)
	stats.Ambushes = w.ambushed
	w.oracle.mu.Lock()
	stats.PagedPodLists, stats.PagedPodListsWhole, stats.PagedPodListsMulti = w.oracle.pagedLists, w.oracle.pagedWhole, w.oracle.pagedMulti
	w.oracle.mu.Unlock()
	stats.KeptContentsRetain = w.keptContents
	stats.KilledIterations, stats.FailedIterations = w.judgedKilled, w.judgedFailed
	for name := range w.late {
		if !w.retired[name] {
			stats.LateDeletions++
		}
	}
	stats.UnattributedDeletions = len(w.unattributed)
	stats.ActorDeletions = len(w.actorDel)
	for _, how := range w.actorJudged {
		stats.ActorJudged[how]++
	}
	stats.LeakedContents = map[string]int{"ready": w.leaked[true], "notReady": w.leaked[false]}
	stats.PodChurn = w.churnOps
	stats.Restores = maps.Clone(w.restores)
	stats.SkewedVolumes = len(w.cutOffset)
	stats.G10.AttachedDeletions = len(w.g10.judgedVA)
	w.mu.Unlock()
	stats.Bytes = w.bytes.figures(w.gens)
	stats.Faults = c.p.InjectedByKind()
	stats.ProxyRequests = c.p.Requests()
	stats.Duration = time.Since(c.started).Round(time.Second).String()
	if stats.ClaimsReaped == 0 {
		c.t.Fatalf("seed %d: nothing was reaped: the test proves nothing", c.seed)
	}
	// Floors on the oracle's disturbances (chaos_oracle_test.go): from 40
	// iterations on, each was drawn and judged something.
	floors := map[string]int{}
	if c.runs >= 40 {
		maps.Copy(floors, map[string]int{"iterations with a grace period": stats.GraceIterations,
			"iterations with a small blast radius": stats.SmallBlastRadius, "Held, Terminating and Unbound claims": stats.SpecialClaims,
			"deletions judged against the deleting run's pod lists": stats.DeletionsJudgedByOwnLists,
			// The disturbances of G10, G3 takeover and G11 paged, as drawn.
			"iterations with a notice": stats.G10.NoticeIterations, "notices written": stats.G10.NoticesWritten,
			"owners' snoozes": stats.G10.Snoozes, "VolumeAttachments without a pod": stats.G10.Attachments,
			"runs beside an attachment": stats.G10.AttachedRuns, "guards": stats.G10.Guards,
			"takeover pairs": stats.Takeovers, "iterations with pages of 2": stats.SmallPages})
	}
	// What those disturbances had to judge depends on the world's luck (a
	// claim reapable in a notice streak, a takeover whose second run took
	// the Lease, three pods at once in pages of 2, an older copy to
	// restore): 40 iterations see each only a few times (none, now and
	// then), so their floors start at 100 (make chaos runs 500). The three
	// rarest came 2.2 to 3.0 times per 100 iterations in the 500-iteration
	// runs of 2026-12-05 (docs/reliability.md#figures), so that 100 or 120
	// iterations saw none now and then (a 120-iteration run on the default
	// stack saw no deletion judged against a paginated pod list): theirs
	// start at 300, where each would see none about once in 700 runs.
	if c.runs >= 100 {
		floors["guards with a claim at risk"] = stats.G10.GuardsAtRisk
		floors["takeovers judged"] = stats.TakeoversJudged
		floors["pod lists of several pages"] = stats.PagedPodListsMulti
		// G9 beside prune: only runs that prune (retention in
		// CHAOS_ARGS) have restores beside them.
		if w.retention {
			floors["restores beside runs that prune"] = stats.Restores["besideRuns"]
		}
	}
	if c.runs >= 300 {
		floors["deletions judged against a notice"] = stats.G10.NoticeDeletions
		floors["restores refused without --allow-older"] = stats.Restores["refusalsChecked"]
		floors["deletions judged against a paginated pod list"] = stats.DeletionsJudgedByPagedLists
	}
	for what, n := range floors {
		if n == 0 {
			c.t.Fatalf("seed %d: no %s: the oracle proves nothing there", c.seed, what)
		}
	}
	b, _ := json.MarshalIndent(stats, "", "  ")
	c.t.Logf("chaos figures:\n%s", b)
	if path := os.Getenv("PVC_JANITOR_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			c.t.Error(err)
		}
	}
}

// chaosStats are the figures of a chaos run (docs/reliability.md).
type chaosStats struct {
	Seed            int64          `json:"seed"`
	Runs            int            `json:"runs"`
	Paginated       int            `json:"paginatedRuns"` // iterations with --page-size 10; the others stream
	DiscardRuns     int            `json:"discardRuns"`   // iterations with --superseded discard
	Discards        int            `json:"claimsDiscarded"`
	Processes       int            `json:"processes"`
	ConcurrentPairs int            `json:"concurrentPairs"`
	Kills           int            `json:"kills"`
	Exits           map[string]int `json:"exits"`
	RuntimeErrors   map[string]int `json:"runtimeErrors"`
	Faults          map[string]int `json:"faults"`
	ProxyRequests   int            `json:"proxyRequests"`
	SelfHeld        int            `json:"selfHeldLease"`
	ClaimsCreated   int            `json:"claimsCreated"`
	Outsiders       int            `json:"outsiders"`
	ClaimsReaped    int            `json:"claimsReaped"`
	ClaimsRetired   int            `json:"claimsRetiredByTest"`
	LeakedContents  map[string]int `json:"contentsLeftByJanitorSnapshotDeletes"`
	PodChurn        int            `json:"podChurn"`
	FinalStates     map[string]int `json:"finalStates"`
	FinalRuns       int            `json:"finalRuns"`
	InvisibleUses   int            `json:"usesUnseenByJanitorAndController"`
	UnwrittenUses   int            `json:"runsThatCouldNotWriteAUseDown"`
	Violations      int            `json:"violations"`
	// ControllerPauses: runs during which kube-controller-manager was
	// stopped (SIGSTOP) for 0.5-3 s.
	ControllerPauses int `json:"controllerManagerPauses"`
	// KilledIterations and FailedIterations had a run killed or exiting 1:
	// every deletion they made is judged like any other.
	KilledIterations int `json:"iterationsWithAKilledRun"`
	FailedIterations int `json:"iterationsWithAFailedRun"`
	// LateDeletions were found by a re-list, not the watch: judged over
	// the window from the last list that showed the claim to the re-list.
	LateDeletions int `json:"deletionsSeenOnlyByARelist"`
	// UnattributedDeletions are janitor deletions with no applied DELETE
	// seen by the proxy, or no pod list of its run before it: invariant 2
	// judged them by the time the deletion was seen, less one second.
	UnattributedDeletions int `json:"deletionsWithoutTheirDeleteRequest"`
	// PrunedOnNewer (of Discards): claims whose newest copy retention
	// pruned on newer data of their workspace while an older copy of
	// theirs (a backup tool's, or one prune left) was still there.
	PrunedOnNewer int `json:"claimsWithTheNewestCopyPrunedOnNewerData"`
	// The disturbances of chaos_churn_test.go: iterations with
	// --superseded archive, snapshots of the backup tool (Delete class),
	// restores by kind (returns: a workspace's last claim; olderCopies:
	// --allow-older; and those that failed), volumes whose storage clock
	// is a second off, iterations with the API server's Date off by half
	// a second.
	ArchiveRuns          int            `json:"archiveRuns"`
	ForeignSnapshots     int            `json:"backupToolSnapshots"`
	Restores             map[string]int `json:"restores"`
	SkewedVolumes        int            `json:"volumesWithStorageClockOff"`
	DateSkewedIterations int            `json:"iterationsWithAPIServerDateOff"`
	// ActorDeletions: intact snapshots of live claims a second actor
	// deleted; ActorJudged: the reaped claims whose rescue that was, by
	// verdict (sound: reaped before the actor's delete; ambiguous: the
	// two fell within one second).
	ActorDeletions int            `json:"rescuesDeletedBySecondActor"`
	ActorJudged    map[string]int `json:"reapsAroundASecondActorsDelete"`
	Bytes          bytesFigures   `json:"bytes"` // the restores of reaped claims' rescues
	// The oracle of chaos_oracle_test.go: iterations with a grace period
	// and min-age of seconds, the deletions they judged against it;
	// iterations with a blast radius small enough to bite, and the runs
	// it stopped; iterations in which two runs wrote; the Held,
	// Terminating and Unbound claims of the mix; the kept rescues whose
	// content was read back Retain after the final runs.
	GraceIterations int `json:"graceIterations"`
	GraceDeletions  int `json:"deletionsJudgedAgainstAGracePeriod"`
	GraceRescues    int `json:"rescuesJudgedAgainstAGracePeriod"`
	// Ambushes: pods started on rescued claims as a janitor pod list
	// reached the proxy.
	Ambushes int `json:"podsStartedAsAPodListArrived"`
	// DeletionsJudgedByOwnLists: claim deletions checked against every
	// whole pod list of the run that deleted them (G11).
	DeletionsJudgedByOwnLists int `json:"deletionsJudgedAgainstTheRunsPodLists"`
	SmallBlastRadius          int `json:"smallBlastRadiusIterations"`
	BlastRadiusReached        int `json:"runsStoppedByTheBlastRadius"`
	WritingPairs              int `json:"iterationsWithTwoWritingRuns"`
	SpecialClaims             int `json:"heldTerminatingUnboundClaims"`
	KeptContentsRetain        int `json:"keptRescuesReadBackRetain"`
	// G11 paged: iterations with --page-size 2; the janitor's paginated
	// pod lists (all, read whole, read whole in several pages); the
	// deletions judged against one of several pages.
	SmallPages                  int `json:"iterationsWithPagesOf2"`
	PagedPodLists               int `json:"paginatedPodLists"`
	PagedPodListsWhole          int `json:"paginatedPodListsReadWhole"`
	PagedPodListsMulti          int `json:"paginatedPodListsOfSeveralPages"`
	DeletionsJudgedByPagedLists int `json:"deletionsJudgedAgainstAPaginatedPodList"`
	// G10: notices, snoozes, attachments, guards (chaos_g10_test.go).
	G10 g10Figures `json:"g10"`
	// G3 takeover (chaos_takeover_test.go): pairs whose first run was
	// stopped past its Lease; of them, judged (the second took the Lease
	// over), both wrote, the second refused (the Lease still live), the
	// first stopped before its Lease; pairs not made (the first ended
	// before its stop); the first run's creates and deletes past its
	// deadline.
	Takeovers                 int     `json:"takeoverPairs"`
	TakeoversJudged           int     `json:"takeoversJudged"`
	TakeoversBothWrote        int     `json:"takeoversWhereBothWrote"`
	TakeoverRefused           int     `json:"takeoversRefusedByALiveLease"`
	TakeoverFirstWithoutLease int     `json:"takeoversStoppedBeforeTheFirstLease"`
	TakeoverEndedFirst        int     `json:"takeoversWhoseFirstRunEndedBeforeItsStop"`
	TakeoverLateWrites        int     `json:"takeoverWritesPastTheDeadline"`
	TakeoverInFlight          int     `json:"takeoverWritesArrivedLate"`
	MaxRate                   float64 `json:"maxRate"`
	Args                      string  `json:"extraArgs,omitempty"`
	Duration                  string  `json:"duration"`
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v >= 0 {
		return v
	}
	return def
}

// chaosRunTimeout bounds one janitor process: longer is a hang.
const chaosRunTimeout = 3 * time.Minute

// chaosFaults draws one iteration's fault rates: a total of up to maxRate
// split at random between the exclusive kinds, and up to maxRate each of
// 410 Gone on continuations and added latency; watches are cut more often.
func chaosFaults(rng *rand.Rand, maxRate float64) testenv.Faults {
	total := rng.Float64() * maxRate
	var w [6]float64
	sum := 0.0
	for i := range w {
		w[i] = rng.Float64()
		sum += w[i]
	}
	r := func(i int) float64 { return total * w[i] / sum }
	return testenv.Faults{Rate429: r(0), Rate500: r(1), Rate503: r(2), RateReset: r(3), RateLostResponse: r(4),
		RateHang: r(5) / 4, HangFor: 3 * time.Second,
		RateGone: rng.Float64() * maxRate, RateLatency: rng.Float64() * maxRate, Latency: 300 * time.Millisecond,
		RateWatchCut: rng.Float64() * 0.5, WatchCutAfter: 3 * time.Second, WatchOpen: true,
		RateTruncate: rng.Float64() * maxRate}
}

// chaosProc is one janitor process of the chaos test.
type chaosProc struct {
	code, pid      int
	killed, hung   bool
	stdout, stderr string
}

// startChaosProc runs the janitor binary to its end, SIGKILLing it after
// killAfter when that is set and it still runs.
func startChaosProc(bin string, args []string, killAfter time.Duration) chaosProc {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + os.TempDir()}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		return chaosProc{code: -1, stderr: err.Error()}
	}
	res := chaosProc{pid: cmd.Process.Pid}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var kill <-chan time.Time
	if killAfter > 0 {
		kill = time.After(killAfter)
	}
	var err error
	select {
	case err = <-waited:
	case <-kill:
		if cmd.Process.Signal(syscall.SIGKILL) == nil {
			res.killed = true
		}
		err = <-waited
	case <-time.After(chaosRunTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err = <-waited
		res.hung = true
	}
	res.code = exitCode(err)
	if res.killed && res.code != 128+int(syscall.SIGKILL) {
		res.killed = false // it had ended just before
	}
	res.stdout, res.stderr = out.String(), errOut.String()
	return res
}

// lastLine is the last line of s, for messages.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// errorKind reduces an error line to its kind, for the figures.
func errorKind(stderr string) string {
	line := strings.TrimSpace(stderr)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	var e struct{ Message string }
	if json.Unmarshal([]byte(line), &e) == nil && e.Message != "" {
		line = e.Message
	}
	line = strings.TrimPrefix(line, "error: ")
	if i := strings.Index(line, ": "); i > 0 {
		if j := strings.Index(line[i+2:], ": "); j > 0 {
			return line[:i+2+j]
		}
	}
	return line
}

// chaosClaim is one claim of the chaos world.
type chaosClaim struct {
	name, uid, workspace string
	// outsider claims lack the selector: the janitor must never touch them.
	outsider bool
	// permanent: the driver fails every snapshot of it (never rescuable).
	permanent bool
	created   time.Time
	iteration int // when it was created
	// truth is its identity for the ground-truth judge: name, volume handle,
	// the server's creationTimestamp.
	truth truthClaim
	// restoredFrom is the claim whose copy a restore made this one from;
	// nil for a claim the test created. restoredCopy is when that copy
	// was created (its creationTimestamp): it holds restoredFrom's data
	// up to then.
	restoredFrom *chaosClaim
	restoredCopy time.Time
}

// chaosPod is one pod of the churn and when (local clock; the API server
// runs on this host) its create and delete calls started and ended.
type chaosPod struct {
	claim                string
	created, createdDone time.Time
	deleteStart, deleted time.Time
}

// chaosWorld is the cluster state of TestChaos and what the test knows of
// it: claims, pod lifetimes (for "in use at deletion time") and when each
// claim was first seen deleted.
type chaosWorld struct {
	t   *testing.T
	f   *testenv.Fixtures
	ns  string
	rng *rand.Rand // the world's own choices; under mu

	iteration int

	mu         sync.Mutex
	claims     map[string]*chaosClaim
	next       int
	pods       map[string]*chaosPod
	nextPod    int
	deleted    map[string]time.Time // claim -> first seen deleted
	late       map[string]bool      // deletion found by a re-list, not the watch: its time is an upper bound
	archived   map[string]bool      // reaped, checked, and its snapshot removed by the test
	retired    map[string]bool      // deleted by the test itself (stuck for good: superseded or broken)
	archivedAt map[string]time.Time
	deletedObj map[string]*corev1.PersistentVolumeClaim // the claim as it was deleted
	// req are the janitor's pod lists and claim deletions, as the
	// proxy saw them reach the server; unattributed the deletions with no
	// applied DELETE of a janitor seen (judged by the fallback).
	req          janitorRequests
	unattributed map[string]bool
	// blind are the runs (by pid) whose pod lists are no use the janitor
	// saw: killed, failed (exit 1), or said a use it saw is lost.
	blind map[int]bool
	// creating are the workspaces whose newer claim is being created.
	creating  map[string]bool
	invisible map[string]bool   // pod uses seen by neither the janitor nor the controller manager
	discards  map[string]string // claims deleted without their own snapshot, and the newer data that justified it
	// prunedOnNewer are the claims of discards whose newest copy retention
	// pruned on that newer data while an older copy of theirs was left.
	prunedOnNewer map[string]bool
	leaked        map[bool]int // contents left by the janitor's snapshot deletions: ready or not
	churnOps      int
	// rescued are the reaped claims check found an intact rescue of;
	// bytesDone those the bytes check has judged (restored, or left out of
	// its sample).
	rescued   map[string]bool
	bytesDone map[string]bool
	// discardRun: a run of the current iteration has --superseded
	// discard; only then may a claim be deleted without its own rescue.
	discardRun bool
	// presentAt is when a list last showed each claim present: a deletion
	// found by a re-list (late) happened after it.
	presentAt map[string]time.Time
	// actorDel are the intact snapshots a second actor (a user, a
	// workspace manager's cleanup) deleted, by name; actorJudged the
	// reaped claims whose rescue it deleted, and how that was judged.
	actorDel    map[string]actorDeletion
	actorJudged map[string]string
	// judgedKilled and judgedFailed count the iterations with a killed or
	// failed (exit 1) run: their deletions are judged like all others.
	judgedKilled, judgedFailed int
	gens                       *generations // what each use wrote into its claim's volume
	bytes                      *bytesCheck

	// The disturbances of chaos_churn_test.go. cutOffset is the storage
	// clock's offset by volume handle; foreign the backup tool's
	// snapshots; seenReady every snapshot the watch saw ready, by UID;
	// retention whether the runs prune (CHAOS_ARGS); restoreNext whether
	// this iteration restores a copy, restoredOnce the claims restored
	// from, restores their count by kind.
	cutOffset    map[string]time.Duration
	foreign      map[string]bool
	nextBackup   int
	seenReady    map[types.UID]seenSnap
	retention    bool
	restoreNext  bool
	restoredOnce map[string]bool
	nextRestore  int
	restores     map[string]int
	bin          string // the janitor binary
	kubeconfig   string // through the fault proxy

	// The oracle of chaos_oracle_test.go: every write of a janitor
	// process as the proxy saw it; the special claims (G4) by name, with
	// their kind, and the writes sent to them; the snapshots whose last
	// delete came from a run with --delete-contents (G8: its content must
	// not be left); the kept rescues whose content checkContents read.
	oracle          oracleLog
	specials        map[string]string
	specialWrites   map[string]int
	deletedContents map[string]bool
	keptContents    int
	snapErred       map[types.UID]bool // snapshots seen with status.error
	// prunedCarry: the snapshots a janitor run deleted, and whether that
	// run went by the workspace's line (--sessions-carry-data) or by
	// descent (G6).
	prunedCarry map[string]bool
	// ambushOn: this iteration's runs meet the ambush (ambush), at most
	// twice (ambushes); ambushed counts them all.
	ambushOn           bool
	ambushes, ambushed int
	// goneAt is the iteration archive first saw a reaped claim gone.
	goneAt map[string]int
	// g10: notices, snoozes, attachments and guards (chaos_g10_test.go).
	g10 g10World
	// takeover: this iteration's pair whose first run lost its Lease
	// (chaos_takeover_test.go), until judged.
	takeover *takeover
}

// archiveDelay is how many iterations a reaped claim's copies stay before
// archive removes them.
const archiveDelay = 4

// addClaim creates a bound claim: a workspace claim (sometimes of a
// workspace that already has one, so the older one is Superseded) or an
// outsider without the selector label, with a random driver behaviour.
func (w *chaosWorld) addClaim(fail func(string, ...any), outsider bool) {
	w.mu.Lock()
	i := w.next
	w.next++
	name := fmt.Sprintf("ws-%03d", i)
	if outsider {
		name = fmt.Sprintf("other-%03d", i)
	}
	c := &chaosClaim{name: name, workspace: fmt.Sprintf("w%03d", i), outsider: outsider, iteration: w.iteration}
	var ended []string // the older session's pods: it ends before the new one starts
	if alive := w.aliveLocked(); len(alive) > 0 && w.rng.Intn(6) == 0 {
		c.workspace = alive[w.rng.Intn(len(alive))].workspace // same workspace, newer claim
		// No session of the workspace starts until the new claim is
		// known: a user never mounts the older claim once a newer one
		// exists (the churn runs concurrently).
		w.creating[c.workspace] = true
		defer func() {
			w.mu.Lock()
			delete(w.creating, c.workspace)
			w.mu.Unlock()
		}()
		for pod, p := range w.pods {
			if old := w.claims[p.claim]; old != nil && old.workspace == c.workspace && p.deleted.IsZero() && p.deleteStart.IsZero() {
				ended = append(ended, pod)
			}
		}
		sort.Strings(ended)
	} else if back := w.returningLocked(); w.retention && !outsider && len(back) > 0 && w.rng.Intn(3) == 0 {
		// A user back in a workspace whose claim was reaped starts a new,
		// empty session: it holds nothing of the old claim's data
		// (docs/spec.md#rule-descent), whose copy retention must keep
		// while it is the last (the oracle's G6).
		c.workspace = back[w.rng.Intn(len(back))]
	}
	labels := map[string]string{"workspace": c.workspace}
	switch {
	case !outsider:
		labels["app.kubernetes.io/part-of"] = "demo-workspaces"
	case w.rng.Intn(2) == 0:
		labels["app.kubernetes.io/part-of"] = "other-app" // the selector's key, another value
	}
	handle := w.ns + "-" + name
	var fault *csidriver.Fault
	switch w.rng.Intn(10) {
	case 0, 1:
		fault = &csidriver.Fault{ReadyAfter: time.Duration(500+w.rng.Intn(2500)) * time.Millisecond}
	case 2, 3:
		fault = &csidriver.Fault{TransientFailures: 1 + w.rng.Intn(2)}
	case 4:
		fault = &csidriver.Fault{PermanentError: "chaos: broken volume " + name}
		c.permanent = true
	}
	if !outsider {
		fault = w.drawCutOffsetLocked(fault, handle)
	}
	w.mu.Unlock()
	for _, pod := range ended {
		w.deletePod(pod)
	}
	if fault != nil {
		if err := csidriver.SetFault(env.DriverStateDir, handle, *fault); err != nil {
			fail("set driver fault: %v", err)
		}
	}
	c.created = time.Now()
	pvc, err := w.f.BoundClaim(context.Background(), testenv.ClaimSpec{Namespace: w.ns, Name: name, Labels: labels, VolumeHandle: handle})
	if err != nil {
		fail("create claim %s: %v", name, err)
	}
	c.uid = string(pvc.UID)
	c.truth = truthOf(pvc, handle)
	w.mu.Lock()
	w.claims[name] = c
	w.presentAt[name] = c.created
	w.mu.Unlock()
}

// returningLocked lists the workspaces with no live claim whose claim was
// reaped on a rescue the test has not removed yet. Called with mu held.
func (w *chaosWorld) returningLocked() []string {
	live := map[string]bool{}
	for _, c := range w.aliveLocked() {
		live[c.workspace] = true
	}
	seen := map[string]bool{}
	var out []string
	for name := range w.rescued {
		c := w.claims[name]
		if c == nil || w.archived[name] || w.retired[name] || live[c.workspace] || seen[c.workspace] {
			continue
		}
		seen[c.workspace] = true
		out = append(out, c.workspace)
	}
	sort.Strings(out)
	return out
}

// aliveLocked lists the claims not seen deleted (workspace and outsiders).
func (w *chaosWorld) aliveLocked() []*chaosClaim {
	var out []*chaosClaim
	for _, c := range w.claims {
		if _, gone := w.deleted[c.name]; !gone && !w.retired[c.name] {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// sessionsLocked lists the live claims that are the newest of their
// workspace: a workspace manager mounts only its current claim, so an older
// claim of a workspace is never used after a newer one was created (and
// the newer one really holds newer data). Called with mu held.
func (w *chaosWorld) sessionsLocked() []*chaosClaim {
	newest := map[string]*chaosClaim{}
	for _, c := range w.claims {
		if n := newest[c.workspace]; n == nil || c.created.After(n.created) {
			newest[c.workspace] = c
		}
	}
	var out []*chaosClaim
	for _, c := range w.aliveLocked() {
		if newest[c.workspace] == c && !w.creating[c.workspace] {
			out = append(out, c)
		}
	}
	return out
}

func (w *chaosWorld) aliveClaims() []*chaosClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.aliveLocked()
}

func (w *chaosWorld) outsiders() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.claims {
		if c.outsider {
			n++
		}
	}
	return n
}

// retire deletes, as their user would, the workspace claims that are stuck
// for good and have been for five iterations: a claim on a broken volume
// (SnapshotFailed forever) and an older claim of a workspace that has a
// newer one (Superseded: kept by the default policy). They are recorded
// before the delete, so the deletion watch does not count them as reaped.
func (w *chaosWorld) retire(iteration int) {
	w.mu.Lock()
	newest := map[string]*chaosClaim{}
	for _, c := range w.claims {
		if c.outsider {
			continue
		}
		if n := newest[c.workspace]; n == nil || c.created.After(n.created) {
			newest[c.workspace] = c
		}
	}
	var victims []string
	for _, c := range w.aliveLocked() {
		if c.outsider || iteration-c.iteration < 5 {
			continue
		}
		if c.permanent || newest[c.workspace] != c {
			w.retired[c.name] = true
			victims = append(victims, c.name)
		}
	}
	w.mu.Unlock()
	for _, name := range victims {
		_ = w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}

// churn creates or force-deletes k pods on live claims (outsiders too).
func (w *chaosWorld) churn(k int) {
	ctx := context.Background()
	for i := 0; i < k; i++ {
		w.mu.Lock()
		var running []string
		for name, p := range w.pods {
			if p.deleted.IsZero() {
				running = append(running, name)
			}
		}
		sort.Strings(running)
		alive := w.sessionsLocked()
		create := len(alive) > 0 && (len(running) == 0 || (len(running) < 6 && w.rng.Intn(2) == 0))
		var claim, podName, victim string
		if create {
			claim = alive[w.rng.Intn(len(alive))].name
			podName = fmt.Sprintf("p-%d", w.nextPod)
			w.nextPod++
		} else if len(running) > 0 {
			victim = running[w.rng.Intn(len(running))]
		}
		scheduled := w.rng.Intn(2) == 0
		w.churnOps++
		w.mu.Unlock()
		switch {
		case create:
			start := time.Now() // the pod counts from before the call
			if _, err := w.f.Pod(ctx, testenv.PodSpec{Namespace: w.ns, Name: podName, Claims: []string{claim}, Scheduled: scheduled}); err == nil {
				w.mu.Lock()
				w.pods[podName] = &chaosPod{claim: claim, created: start, createdDone: time.Now()}
				w.mu.Unlock()
			}
		case victim != "":
			w.deletePod(victim)
		}
	}
}

// deletePod force-deletes a pod of the churn and records when. Just before,
// the pod's use writes its generation into the claim's volume (while the
// use is surely live: before the recorded start of the delete).
func (w *chaosWorld) deletePod(name string) {
	w.mu.Lock()
	claim := w.pods[name].claim
	w.mu.Unlock()
	w.gens.write(w.f, w.ns, claim, name)
	w.mu.Lock()
	p := w.pods[name]
	p.deleteStart = time.Now()
	w.mu.Unlock()
	err := w.f.ForceDeletePod(context.Background(), w.ns, name)
	w.mu.Lock()
	if err == nil {
		p.deleted = time.Now() // after the call: it may count until then
	} else {
		p.deleteStart = time.Time{}
	}
	w.mu.Unlock()
}

// watchDeletions records when each claim is first seen deleted (or
// terminating). It resumes the watch from the last resourceVersion; after a
// 410 it re-lists, and a claim found gone by a re-list is recorded as late.
func (w *chaosWorld) watchDeletions(ctx context.Context) {
	claims := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			listed := time.Now()
			l, err := claims.List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			present := map[string]bool{}
			for _, c := range l.Items {
				present[c.Name] = c.DeletionTimestamp == nil
			}
			w.mu.Lock()
			for name, c := range w.claims {
				if _, seen := w.deleted[name]; !seen && !present[name] && c.created.Before(listed) {
					w.deleted[name], w.late[name] = time.Now(), true
				} else if present[name] {
					w.presentAt[name] = listed
				}
			}
			w.mu.Unlock()
			rv = l.ResourceVersion
		}
		wi, err := claims.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			rv = ""
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			c, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok {
				continue
			}
			rv = c.ResourceVersion
			if strings.HasPrefix(c.Name, restorePrefix) {
				continue // the bytes check's own restores
			}
			w.mu.Lock()
			if ev.Type == watch.Deleted || c.DeletionTimestamp != nil {
				if _, seen := w.deleted[c.Name]; !seen {
					w.deleted[c.Name] = time.Now()
					w.deletedObj[c.Name] = c // the claim as the janitor deleted it
				}
			}
			w.mu.Unlock()
		}
		wi.Stop()
	}
}

// syncDeletions: see the shared syncDeletions. Called without w.mu.
func (w *chaosWorld) syncDeletions() {
	syncDeletions(w.f, w.ns, &w.mu, func() []string {
		names := make([]string, 0, len(w.claims))
		for name := range w.claims {
			names = append(names, name)
		}
		return names
	}, w.deleted, w.late, w.presentAt)
}

// janitorSaw returns when a janitor pod list surely saw the pod: its
// creation had returned before the list reached the server, and its
// deletion began after the answer ended. Lists of runs that are blind do
// not count. Called with mu held.
func (w *chaosWorld) janitorSaw(p *chaosPod) (time.Time, bool) {
	return w.req.listed(p.createdDone, p.deleteStart, func(pid int) bool { return w.blind[pid] })
}

// deleteDetail names the DELETE that deleted claim and the deleting run's
// last pod list before it, for a violation's message.
func (w *chaosWorld) deleteDetail(claim string) string {
	l, d, ok := w.req.lastListBefore(claim)
	if !ok {
		return "no DELETE of a janitor run with a pod list before it was seen"
	}
	return fmt.Sprintf("in the pod list of run %d sent at %s (answered %s) before its DELETE at %s", d.pid,
		l.sent.Format("15:04:05.000"), l.done.Format("15:04:05.000"), d.sent.Format("15:04:05.000"))
}

// usedUntilLocked is when the claim's last use before `before` is known to
// have ended: the start of the test's delete of its last pod (the pod was
// surely there until then); its creation when no pod used it. Called with
// mu held.
func (w *chaosWorld) usedUntilLocked(c *chaosClaim, before time.Time) time.Time {
	until := c.truth.Created
	for _, p := range w.pods {
		if p.claim == c.name && !p.deleteStart.IsZero() && p.deleteStart.Before(before) && p.deleteStart.After(until) {
			until = p.deleteStart
		}
	}
	return until
}

// newerDataLocked reports whether the test knows that a newer claim of c's
// workspace really holds newer data than c: a workspace claim created after
// c's last pod had surely gone (the test ends a session's pods before it
// creates the next claim of the workspace, and never mounts an older
// claim again) that still exists, or that was deleted with an intact
// snapshot of its own. Called with mu held.
func (w *chaosWorld) newerDataLocked(c *chaosClaim, snaps []truthSnap) (string, bool) {
	ended := c.truth.Created
	for _, p := range w.pods {
		if p.claim != c.name {
			continue
		}
		if p.deleted.IsZero() {
			return "", false // still used
		}
		if p.deleted.After(ended) {
			ended = p.deleted
		}
	}
	for _, b := range w.claims {
		// The test creates a workspace's new claim only after it deleted
		// the old session's pods: by its own clock (b.created is taken
		// before the create call, p.deleted after the delete returned),
		// b came after c's last use.
		if b == c || b.outsider || b.workspace != c.workspace || !w.holdsNewerDataLocked(b, c, ended) {
			continue
		}
		if w.retired[b.name] {
			continue
		}
		if _, gone := w.deleted[b.name]; !gone {
			return b.name + " (exists)", true
		}
		if s, ok := b.truth.rescueAfter(snaps, b.truth.Created); ok {
			return b.name + " (rescued by " + s.Name + ")", true
		}
	}
	return "", false
}

// discardLocked judges a deletion without the claim's own rescue that
// newer data of its workspace (by) justifies: sound only when a run of
// this iteration had --superseded discard, or when check saw the claim's
// rescue before (retention removed it since, on that newer data).
// Called with mu held.
func (w *chaosWorld) discardLocked(bad func(string, ...any), when, name, by string) {
	if !w.discardRun && !w.rescued[name] {
		bad("%s: %s was deleted without an intact snapshot of it, on newer data of its workspace (%s), though no run of this iteration had --superseded discard",
			when, name, by)
		return
	}
	w.discards[name] = by
}

// actorDeletion is an intact snapshot of a live claim that the second
// actor deleted, and when its delete call started and returned.
type actorDeletion struct {
	claim       string
	snap        truthSnap
	start, done time.Time
}

// actorRescueLocked judges a reaped claim without an intact snapshot now
// against the snapshots of it the second actor deleted: "sound" (and that
// snapshot) when the claim's deletion was seen before the actor's delete
// started, "" when the claim's deletionTimestamp (whole seconds, so the
// deletion was at or after it) is at or after the actor's delete returned
// (the janitor deleted it on a rescue already gone: check's invariant 1
// then fails it), and "ambiguous" when the two fall within a second of
// each other. Called with mu held.
func (w *chaosWorld) actorRescueLocked(c *chaosClaim, at time.Time) (truthSnap, string) {
	verdict := ""
	var best truthSnap
	for _, d := range w.actorDel {
		if d.claim != c.name || !c.truth.of(d.snap) {
			continue
		}
		switch {
		case at.Before(d.start):
			return d.snap, "sound"
		case w.deletedObj[c.name] != nil && w.deletedObj[c.name].DeletionTimestamp != nil &&
			!w.deletedObj[c.name].DeletionTimestamp.Time.Before(d.done):
		default:
			verdict, best = "ambiguous", d.snap
		}
	}
	return best, verdict
}

// secondActor deletes, as a user or a workspace manager's cleanup would,
// an intact snapshot of a live workspace claim (a rescue, most often),
// sometimes while a janitor run is reaping. Its content is left to the
// class (Retain keeps it; collectContents does not count it as the
// janitor's).
func (w *chaosWorld) secondActor() {
	ctx := context.Background()
	snaps, err := w.snapshots(ctx)
	if err != nil {
		return
	}
	w.mu.Lock()
	var pick []truthSnap
	for _, s := range snaps {
		c := w.claims[s.Source]
		if c == nil || c.outsider || !s.Intact || !c.truth.of(s) || w.retired[c.name] {
			continue
		}
		if _, gone := w.deleted[c.name]; gone {
			continue
		}
		pick = append(pick, s)
	}
	sort.Slice(pick, func(i, j int) bool { return pick[i].Name < pick[j].Name })
	if len(pick) == 0 {
		w.mu.Unlock()
		return
	}
	s := pick[w.rng.Intn(len(pick))]
	w.mu.Unlock()
	start := time.Now()
	uid := s.UID
	err = w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		return
	}
	done := time.Now()
	w.mu.Lock()
	w.actorDel[s.Name] = actorDeletion{claim: s.Source, snap: s, start: start, done: done}
	w.mu.Unlock()
	w.t.Logf("second actor: deleted snapshot %s of %s (cut %s) in [%s, %s]", s.Name, s.Source,
		s.Cut.UTC().Format(time.RFC3339), start.UTC().Format("15:04:05.000"), done.UTC().Format("15:04:05.000"))
}

// check asserts the safety invariants on the cluster as it is now, from
// ground truth only: the claims and pods the test created and deleted (and
// when), the snapshots and contents the API server holds, the pod lists the
// janitor sent (the proxy saw them) and the controller manager's Unused
// condition on the claim as it was deleted. Never the janitor's own marks,
// labels, annotations or report.
func (w *chaosWorld) check(fail func(string, ...any), when string) {
	ctx := context.Background()
	snaps, err := w.snapshots(ctx)
	if err != nil {
		fail("%s: %v", when, err)
	}
	w.mu.Lock()
	bySource := map[string]*chaosClaim{}
	for _, c := range w.claims {
		bySource[c.name] = c
	}
	w.mu.Unlock()
	// Violations are collected under the lock and reported after it.
	var violations []string
	bad := func(format string, a ...any) { violations = append(violations, fmt.Sprintf(format, a...)) }
	w.mu.Lock()
	// Snapshots: only of workspace claims; none (live) of a claim the test
	// archived; at most one live snapshot per orphan episode of a claim.
	live := map[string]int{}
	for _, s := range snaps {
		c := bySource[s.Source]
		switch {
		case c == nil || c.outsider:
			bad("%s: snapshot %s is of %q, not of a workspace claim", when, s.Name, s.Source)
			continue
		case !c.truth.of(s):
			continue // of an earlier claim of that name, or another volume
		case w.retired[c.name] && !w.archived[c.name]:
			continue // the test's own deletion: its snapshots go once it is gone
		case w.archived[c.name]:
			if !s.Gone {
				bad("%s: snapshot %s of %s (created %s), whose claim was gone and its snapshots deleted at %s, exists", when,
					s.Name, c.name, s.Created.UTC().Format(time.RFC3339), w.archivedAt[c.name].UTC().Format(time.RFC3339Nano))
			}
			continue
		}
		if !s.Gone && !w.foreign[s.Name] {
			live[c.name]++ // the backup tool's are no episode of the janitor's
		}
	}
	for name, n := range live {
		episodes := 1
		for _, p := range w.pods {
			if p.claim == name && !p.deleteStart.IsZero() {
				episodes++
			}
		}
		// An attachment without a pod is a use too (docs/spec.md#rule-attached):
		// once it ends, the claim is orphaned afresh and rescued again.
		episodes += len(w.g10.ended(name, w.claims[name].truth.Created))
		if n > episodes {
			bad("%s: %s has %d snapshots for %d orphan episodes:%s", when, name, n, episodes, w.claims[name].truth.describeSnaps(snaps))
		}
	}
	var outsiders []string
	for name, at := range w.deleted {
		c := w.claims[name]
		if w.archived[name] || w.retired[name] {
			continue
		}
		switch kind := w.specials[name]; {
		case kind == specialTerminating:
			continue // the test deleted it; a foreign finalizer holds it
		case kind != "":
			bad("%s: %s, %s, was deleted", when, name, kind)
			continue
		case c == nil:
			bad("%s: unknown claim %s deleted", when, name)
			continue
		case c.outsider:
			bad("%s: %s, outside the selector, was deleted", when, name)
			continue
		}
		// 1. No deletion loses data: an intact snapshot of the claim, cut
		// after its last use ended; for a discard, newer data of its
		// workspace that the test knows is held.
		if _, judged := w.discards[name]; judged {
			continue // judged when its deletion was first seen
		}
		if _, judged := w.actorJudged[name]; judged && w.actorJudged[name] != "sound" {
			continue
		}
		rescue, rescued := c.truth.rescueAfter(snaps, c.truth.Created)
		// The second actor may have deleted a newer snapshot of the claim
		// than the one left (the rescue the claim was reaped on, deleted
		// right after the reap): the claim is judged by that one, sound
		// only if the claim was deleted while it was still there.
		if s, verdict := w.actorRescueLocked(c, at); verdict != "" && (!rescued || rescue.Cut.Before(s.Cut)) {
			w.actorJudged[name] = verdict
			w.bytesDone[name] = true // its copy is gone: nothing to restore from
			if verdict != "sound" {
				continue
			}
			rescue, rescued = s, true
		} else if rescued {
			w.rescued[name] = true
		}
		// Retention may prune the claim's newest copy on newer data of its
		// workspace and leave an older one (a backup tool's snapshot, or a
		// rescue that prune kept because it changed since prune's read):
		// the claim is then judged as one with no copy left, on that newer
		// data, and invariant 2 below still holds it.
		onNewer := ""
		if rescued && w.retention {
			if copyName, pruned := w.prunedLocked(c, snaps, rescue.Created); pruned {
				// Otherwise the older copy left is judged below like any
				// rescue (it may hold the same data).
				if by, ok := w.prunedOnLocked(c, snaps, copyName); ok {
					onNewer = by + "; its copy " + copyName + " pruned, the older " + rescue.Name + " left"
				}
			}
		}
		if !rescued {
			if copyName, pruned := w.prunedLocked(c, snaps, time.Time{}); pruned {
				// Its own copy was there and retention pruned it: on
				// newer data of its workspace when the pruning run went
				// by the line (--sessions-carry-data), on a copy that
				// descends from its data otherwise (G6).
				if by, ok := w.prunedOnLocked(c, snaps, copyName); ok {
					w.discards[name] = by + "; its copy " + copyName + " pruned"
					continue
				}
				bad("%s: %s's last copy %s was pruned by a run that goes by descent (no --sessions-carry-data), and no copy descends from its data:%s",
					when, name, copyName, c.truth.describeSnaps(snaps))
				continue
			}
			if by, ok := w.newerDataLocked(c, snaps); ok {
				w.discardLocked(bad, when, name, by)
			} else {
				bad("%s: %s was deleted (seen at %s) without an intact snapshot of it, and no newer claim of workspace %s holds newer data:%s",
					when, name, at.UTC().Format("15:04:05.000"), c.workspace, c.truth.describeSnaps(snaps))
			}
			continue
		}
		// The controller manager's view of the claim as it was deleted.
		if obj := w.deletedObj[name]; obj != nil && onNewer == "" {
			for _, cond := range obj.Status.Conditions {
				switch {
				case cond.Type != "Unused":
				case cond.Status == corev1.ConditionFalse:
					bad("%s: %s was deleted while its Unused condition said in use (since %s)", when, name, cond.LastTransitionTime.UTC().Format(time.RFC3339))
				case cond.Status == corev1.ConditionTrue && rescue.Cut.Before(cond.LastTransitionTime.Time):
					// Its own snapshot is older than its last use: the
					// deletion is sound only as a discard on newer data
					// of its workspace (--superseded=discard).
					if by, ok := w.newerDataLocked(c, snaps); ok {
						w.discardLocked(bad, when, name, by)
						continue
					}
					bad("%s: %s was deleted on snapshot %s cut at %s, before the controller manager saw its last use end (%s)", when, name,
						rescue.Name, rescue.Cut.UTC().Format(time.RFC3339), cond.LastTransitionTime.UTC().Format(time.RFC3339))
				}
			}
		}
		// The deletion happened in [from, at]: at is when it was seen; a
		// deletion found by a re-list (late) happened after the last list
		// that showed the claim, a watched one just before it was seen.
		from := at
		if w.late[name] {
			from = w.presentAt[name]
		}
		for pod, p := range w.pods {
			if p.claim != name {
				continue
			}
			// 2. Not in use when deleted: the pod was in the last pod list
			// the deleting run heard before it sent the DELETE. A pod
			// created after that list may have come after the janitor's
			// last read; only the controller manager could have caught it
			// (by moving the claim's resourceVersion in time for the
			// delete's precondition).
			held, attributed := w.req.heldAt(name, p.createdDone, p.created, p.deleteStart, p.deleted, from, at)
			if !attributed {
				w.unattributed[name] = true
			}
			if held {
				bad("%s: %s was deleted (seen at %s) while pod %s [%s, %s] referenced it, %s", when, name,
					at.Format(time.RFC3339Nano), pod, p.createdDone.Format(time.RFC3339Nano), p.deleteStart.Format(time.RFC3339Nano), w.deleteDetail(name))
			}
			// 1b. The newest intact snapshot was cut after this pod went
			// (judged at one-second resolution: surely before is a
			// violation). A use the janitor listed is a violation; one that
			// neither the janitor nor the controller manager (above) ever
			// saw cannot be known to anyone (README: the grace period is the
			// guard) and is counted instead.
			if onNewer != "" || p.deleteStart.IsZero() || !p.deleteStart.Before(from) || !rescue.Cut.Before(p.deleteStart.Truncate(time.Second)) {
				continue
			}
			if t, seen := w.janitorSaw(p); seen {
				bad("%s: %s deleted (seen at %s) on snapshot %s cut at %s, before pod %s [%s, %s], which a janitor pod list saw at %s, released it",
					when, name, at.UTC().Format("15:04:05.000"), rescue.Name, rescue.Cut.UTC().Format(time.RFC3339), pod,
					p.createdDone.UTC().Format("15:04:05.000"), p.deleteStart.UTC().Format("15:04:05.000"), t.UTC().Format("15:04:05.000"))
			} else if !w.invisible[name+"/"+pod] {
				w.invisible[name+"/"+pod] = true
				w.t.Logf("%s: %s was used by pod %s [%s, %s] after its rescue (cut %s), unseen by the janitor and the controller manager",
					when, name, pod, p.created.UTC().Format("15:04:05.000"), p.deleteStart.UTC().Format("15:04:05.000"), rescue.Cut.UTC().Format(time.RFC3339))
			}
		}
		// 1c. The same for each attachment without a pod that ended before
		// the deletion (docs/spec.md#rule-attached): one a janitor
		// VolumeAttachment list saw is a use the janitor saw, and the
		// claim is marked afresh once detached, so its rescue must be cut
		// after the attachment ended. The Unused condition counts pods
		// only, so an attachment no janitor list saw is counted, not
		// failed.
		for _, va := range w.g10.ended(name, c.truth.Created) {
			if onNewer != "" || !va.deleteStart.Before(from) {
				continue
			}
			t, seen := w.req.listedVA(va.created, va.deleteStart, func(pid int) bool { return w.blind[pid] })
			if seen {
				w.g10.judgedVA[name+"/"+va.name] = true
			}
			if !rescue.Cut.Before(va.deleteStart.Truncate(time.Second)) {
				continue
			}
			if seen {
				bad("%s: %s deleted (seen at %s) on snapshot %s cut at %s, before %s [%s, %s], which a janitor VolumeAttachment list saw at %s, detached its volume",
					when, name, at.UTC().Format("15:04:05.000"), rescue.Name, rescue.Cut.UTC().Format(time.RFC3339), va.name,
					va.created.UTC().Format("15:04:05.000"), va.deleteStart.UTC().Format("15:04:05.000"), t.UTC().Format("15:04:05.000"))
			} else if !w.invisible[name+"/"+va.name] {
				w.invisible[name+"/"+va.name] = true
				w.t.Logf("%s: %s was attached by %s [%s, %s] after its rescue (cut %s), unseen by the janitor",
					when, name, va.name, va.created.UTC().Format("15:04:05.000"), va.deleteStart.UTC().Format("15:04:05.000"), rescue.Cut.UTC().Format(time.RFC3339))
			}
		}
		if onNewer != "" {
			// Judged: its data is the newer claim's now, and the copy
			// left is older than the bytes check asks for.
			w.discards[name], w.prunedOnNewer[name], w.bytesDone[name] = onNewer, true, true
		}
	}
	for _, c := range w.claims {
		if c.outsider {
			outsiders = append(outsiders, c.name)
		}
	}
	w.mu.Unlock()
	if len(violations) > 0 {
		sort.Strings(violations)
		fail("%d violations:\n%s", len(violations), strings.Join(violations, "\n"))
	}
	// Outsiders: never marked, never given an Event.
	for _, name := range outsiders {
		c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fail("%s: outsider %s: %v", when, name, err)
		}
		for k := range c.Annotations {
			if strings.HasPrefix(k, "pvc-janitor.io/") {
				fail("%s: outsider %s was marked: %s", when, name, k)
			}
		}
		for k := range c.Labels {
			if strings.HasPrefix(k, "pvc-janitor.io/") {
				fail("%s: outsider %s was labelled: %s", when, name, k)
			}
		}
	}
	events, err := w.f.Kube.CoreV1().Events(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail("%s: list events: %v", when, err)
	}
	for _, e := range events.Items {
		if e.Source.Component == "pvc-janitor" && strings.HasPrefix(e.InvolvedObject.Name, "other-") {
			fail("%s: Event %s %q on outsider %s", when, e.Reason, e.Message, e.InvolvedObject.Name)
		}
	}
	w.checkBytes(fail, when, snaps)
	w.maybeRestore(fail, snaps)
	w.archive(snaps)
	w.collectContents(fail, when)
}

// checkBytes restores (a sample of) the claims reaped since the last check
// from their rescues, before archive removes those: each must hold the last
// generation written by a use that check holds the rescue to (one that
// ended before the deletion was seen and that a janitor pod list surely
// saw, or on a stack with the Unused condition any such use that check did
// not count as seen by nothing), or a newer one. A held use's write in the
// very second of the rescue's cut is only counted when it is missing: the
// invariants accept a rescue cut in the second its claim's last use ended
// (see bytesFigures.CutSecond). Claims the test retired
// and those discarded without a rescue (--superseded=discard) are not
// restored. The restores use a direct client, after the iteration's runs.
func (w *chaosWorld) checkBytes(fail func(string, ...any), when string, snaps []truthSnap) {
	type reaped struct {
		name string
		at   time.Time
		late bool
	}
	var todo []reaped
	w.mu.Lock()
	for name := range w.rescued {
		if !w.bytesDone[name] && !w.retired[name] {
			todo = append(todo, reaped{name, w.deleted[name], w.late[name]})
		}
	}
	w.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].name < todo[j].name })
	for _, r := range todo {
		gens := w.gens.of(w.ns, r.name)
		w.mu.Lock()
		held := heldOnly(gens, func(pod string) bool {
			p := w.pods[pod]
			if p == nil || r.late || p.deleteStart.IsZero() || !p.deleteStart.Before(r.at) || w.invisible[r.name+"/"+pod] {
				return false
			}
			// Without the Unused condition only the janitor's pod lists
			// can see a use (check's one-second slack on cut times does
			// not make an unseen use seen); with it, the controller
			// manager sees every pod.
			_, seen := w.janitorSaw(p)
			return w.f.UnusedCondition || seen
		})
		w.bytesDone[r.name] = true
		from := w.foreignRescueLocked(r.name, snaps)
		w.mu.Unlock()
		why, err := w.bytes.verifyFrom(r.name, from, gens, held)
		if err != nil {
			fail("%s: bytes: %v", when, err)
		}
		if why != "" {
			fail("%s: bytes: %s\n%s", when, why, w.describe(r.name))
		}
	}
}

// archive removes what reaped (and checked) claims leave behind once they
// are gone: their Retain PV, their snapshot and its content. Hundreds of
// iterations then list about as much as the first ones. A reaped claim's
// copies stay for archiveDelay iterations first when the runs prune
// (CHAOS_ARGS), so that retention weighs them beside newer copies of their
// workspace (the oracle's G6); the claims the test retired go at once.
func (w *chaosWorld) archive(snaps []truthSnap) {
	ctx := context.Background()
	w.mu.Lock()
	var gone []*chaosClaim
	for name := range w.deleted {
		c := w.claims[name]
		if c == nil || c.outsider || w.archived[name] {
			continue
		}
		if _, ok := w.goneAt[name]; !ok {
			w.goneAt[name] = w.iteration
		}
		if w.retired[name] || !w.retention || w.iteration-w.goneAt[name] >= archiveDelay {
			gone = append(gone, c)
		}
	}
	for name := range w.retired {
		if c := w.claims[name]; !w.archived[name] {
			gone = append(gone, c)
		}
	}
	w.mu.Unlock()
	for _, c := range gone {
		if _, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			continue // still terminating
		}
		if err := w.f.Kube.CoreV1().PersistentVolumes().Delete(ctx, "pv-"+w.ns+"-"+c.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		ok := true
		for _, s := range snaps {
			if !c.truth.of(s) {
				continue
			}
			uid := s.UID
			err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				w.t.Logf("archive %s: delete snapshot %s: %v", c.name, s.Name, err)
				ok = false
				continue
			}
			if s.Content != "" {
				_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, s.Content, metav1.DeleteOptions{})
			}
		}
		if ok {
			w.mu.Lock()
			w.archived[c.name] = true
			w.archivedAt[c.name] = time.Now()
			w.mu.Unlock()
		}
	}
}

// collectContents deletes the VolumeSnapshotContents that the janitor's
// own snapshot deletions leave behind: a failed attempt it recreates, or a
// stale rescue it replaces, is deleted as a VolumeSnapshot, and with a
// Retain class its content stays (the snapshot controller marks it
// volumesnapshot-being-deleted). They are counted, then removed so that
// hundreds of iterations list about as much as the first ones.
func (w *chaosWorld) collectContents(fail func(string, ...any), when string) {
	ctx := context.Background()
	l, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range l.Items {
		c := &l.Items[i]
		if c.Spec.VolumeSnapshotRef.Namespace != w.ns || c.Annotations["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"] != "yes" || c.DeletionTimestamp != nil {
			continue
		}
		s, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).Get(ctx, c.Spec.VolumeSnapshotRef.Name, metav1.GetOptions{})
		if err == nil && s.UID == c.Spec.VolumeSnapshotRef.UID {
			continue // its snapshot is still being deleted
		}
		if err != nil && !apierrors.IsNotFound(err) {
			continue
		}
		w.mu.Lock()
		d, byActor := w.actorDel[c.Spec.VolumeSnapshotRef.Name]
		foreign := w.foreign[c.Spec.VolumeSnapshotRef.Name]
		w.mu.Unlock()
		if foreign {
			continue // the backup tool's (Delete class): its controller's to remove
		}
		if byActor && d.snap.UID == c.Spec.VolumeSnapshotRef.UID {
			_ = w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{})
			continue // the second actor's, not the janitor's
		}
		w.mu.Lock()
		withContents := w.deletedContents[c.Spec.VolumeSnapshotRef.Name]
		w.mu.Unlock()
		if withContents {
			// G8: a run with --delete-contents sets the content to
			// Delete before it deletes its snapshot.
			fail("%s: content %s (%s) of snapshot %s outlived it, deleted by a run with --delete-contents", when, c.Name,
				c.Spec.DeletionPolicy, c.Spec.VolumeSnapshotRef.Name)
		}
		if w.f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, c.Name, metav1.DeleteOptions{}) == nil {
			w.mu.Lock()
			w.leaked[c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse]++
			w.mu.Unlock()
		}
	}
}

// converged judges convergence from ground truth after a final run: every
// workspace claim still there (not deleted, not retired by the test) must
// be on a volume whose driver always fails, or in a workspace with such a
// claim (it waits for it), or belong to a workspace that
// the test knows holds newer data elsewhere (a newer claim, or its intact
// rescue: the claim is then Superseded and kept by the default policy).
// Every other claim must have been deleted, which check judges. The final
// run's report only explains a failure (and fills states, the figures); it
// never decides. Anything pending fails the test when last is set, and
// otherwise asks for another final run.
func (w *chaosWorld) converged(t *testing.T, fail func(string, ...any), final chaosProc, last bool, states map[string]int) bool {
	t.Helper()
	snaps, err := w.snapshots(context.Background())
	if err != nil {
		t.Fatalf("after the final run: %v", err)
	}
	clear(states)
	rep, repErr := parseReport(final.stdout)
	if repErr == nil {
		for _, e := range rep.Claims {
			states[e.State]++
		}
	}
	w.mu.Lock()
	var left []*chaosClaim
	// A claim on a volume whose driver always fails is never rescued,
	// and the other claims of its workspace wait for it
	// (docs/spec.md#reap-workspace-first).
	waits := map[string]bool{}
	for _, c := range w.aliveLocked() {
		if c.permanent && !c.outsider {
			waits[c.workspace] = true
		}
	}
	for _, c := range w.aliveLocked() {
		if c.outsider || c.permanent || waits[c.workspace] {
			continue
		}
		if _, ok := w.newerDataLocked(c, snaps); ok {
			continue
		}
		left = append(left, c)
	}
	w.mu.Unlock()
	var pending []string
	for _, c := range left {
		in := "nothing (not in its report)"
		if repErr == nil {
			for _, e := range rep.Claims {
				if e.Name == c.name {
					in = fmt.Sprintf("%s, action %s: %s", e.State, e.Action, e.Reason)
				}
			}
		}
		pending = append(pending, fmt.Sprintf("%s is still there, neither rescued and reaped nor kept for newer data of workspace %s; the final run saw it %s\n%s",
			c.name, c.workspace, in, w.describe(c.name)))
	}
	if len(pending) > 0 && last {
		fail("not converged after 3 final runs without faults:\n%s\nlast final run stderr:\n%s", strings.Join(pending, "\n"), final.stderr)
	}
	return len(pending) == 0
}

func parseReport(s string) (report, error) {
	var r report
	err := json.Unmarshal([]byte(s), &r)
	return r, err
}

// describe tells what the test knows of a claim, for failure messages.
func (w *chaosWorld) describe(name string) string {
	var b strings.Builder
	ctx := context.Background()
	if c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "claim %s uid %s rv %s annotations %v labels %v finalizers %v\n", name, c.UID, c.ResourceVersion, c.Annotations, c.Labels, c.Finalizers)
		for _, cond := range c.Status.Conditions {
			fmt.Fprintf(&b, "  condition %s=%s since %s (%s)\n", cond.Type, cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339), cond.Reason)
		}
	}
	for _, s := range snapshots(w.t, w.f, w.ns) {
		if s.Spec.Source.PersistentVolumeClaimName != nil && *s.Spec.Source.PersistentVolumeClaimName == name {
			fmt.Fprintf(&b, "  snapshot %s created %s ready %v annotations %v\n", s.Name, s.CreationTimestamp.UTC().Format(time.RFC3339), testenv.Ready(&s), s.Annotations)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for pod, p := range w.pods {
		if p.claim == name {
			fmt.Fprintf(&b, "  pod %s created %s deleted %s\n", pod, p.created.UTC().Format(time.RFC3339Nano), p.deleted.UTC().Format(time.RFC3339Nano))
		}
	}
	return b.String()
}

// TestUnusedFalseIsEvidenceOfUse: a rescued claim is used again by a pod
// that comes and goes between two runs while the controller manager lags (or
// is down): the claim's Unused condition still says False (in use, since
// after the rescue) and no pod is left to see. The condition is the stricter
// notion of use there, and the stricter wins (docs/spec.md#marks): the claim's
// orphaned-since cannot be before the use the condition reports, so the old
// snapshot does not rescue it and it must not be reaped on it. Found by
// TestChaos (a pod deleted between the re-read's claims list and its pods
// list, the controller manager slower than the janitor's delete).
func TestUnusedFalseIsEvidenceOfUse(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	time.Sleep(1100 * time.Millisecond) // the new use starts a second after the rescue
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, f, ns, "ws-a")
	resume := pauseControllerManager(t)
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...)
	deleted := !exists(t, f, ns, "ws-a")
	resume()
	if code != 0 && code != 4 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	if deleted {
		st, act, reason := entry(t, parse(t, out), "ws-a")
		t.Fatalf("a claim whose Unused condition says it was used after its rescue was reaped on that rescue: %s, %s: %s", st, act, reason)
	}
}

// pauseControllerManager stops kube-controller-manager (SIGSTOP) until the
// returned function (also run at cleanup) resumes it: the claims' Unused
// condition then lags behind the pods, as it does when the controller
// manager is slow, restarting or down.
func pauseControllerManager(t *testing.T) func() {
	t.Helper()
	pid, err := controllerManagerPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume := func() { once.Do(func() { _ = syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// controllerManagerPID reads kube-controller-manager's pid from the
// cluster's pid file.
func controllerManagerPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(env.Dir, "pids"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "kube-controller-manager" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, errors.New("no kube-controller-manager in the cluster's pid file")
}

// TestClaimUsedAgainAfterItsRescueIsRescuedAgain: a claim is rescued, then
// a pod uses it again and goes; its orphaned-since moves past the
// janitor's snapshot, which therefore no longer rescues it (it lacks the
// newer data). The next run must take a fresh snapshot (still one janitor
// snapshot per claim) and reap the claim on it; found by TestChaos, where
// such claims were left Orphaned forever: every run found its old snapshot
// by name, reported it ready, and the reap's re-read rightly refused it.
func TestClaimUsedAgainAfterItsRescueIsRescuedAgain(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	uid := orphan(t, f, ns, "ws-a", "a", "")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot exit %d: %s", code, stderr)
	}
	first := snapshots(t, f, ns)
	if len(first) != 1 || !testenv.Ready(&first[0]) {
		t.Fatalf("want one ready snapshot, got %d", len(first))
	}
	time.Sleep(1100 * time.Millisecond) // the new use starts a second later
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	waitUsed(t, f, ns, "ws-a")
	time.Sleep(1100 * time.Millisecond)
	used := time.Now()
	if err := f.ForceDeletePod(ctx, ns, "ide"); err != nil {
		t.Fatal(err)
	}
	c, err := f.WaitUnused(ctx, ns, "ws-a")
	created := c.CreationTimestamp.Time
	if err != nil {
		t.Fatal(err)
	}
	var since time.Time
	for _, cond := range c.Status.Conditions {
		if cond.Type == "Unused" {
			since = cond.LastTransitionTime.Time
		}
	}
	if !first[0].CreationTimestamp.Time.Before(since) {
		t.Fatalf("setup: the snapshot (%s) is not older than the new orphaned-since (%s)", first[0].CreationTimestamp, since)
	}
	// A claim rescued and deleted at once can meet the snapshot
	// controller's finalizer removal (a precondition failure): a later run
	// reaps it. Three runs at most; "deleted" is deletionTimestamp or gone.
	var st, act, reason string
	for i := 0; i < 3 && exists(t, f, ns, "ws-a"); i++ {
		code, out, stderr := run(t, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100")...)
		if code != 0 && code != 4 {
			t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
		}
		st, act, reason = entry(t, parse(t, out), "ws-a")
	}
	if exists(t, f, ns, "ws-a") {
		t.Fatalf("a claim used again after its rescue is never rescued again: %s, %s: %s", st, act, reason)
	}
	snaps, err := truthSnapshots(ctx, f, ns)
	if err != nil {
		t.Fatal(err)
	}
	truth := truthClaim{Name: "ws-a", Handle: ns + "-ws-a", Created: created}
	if _, ok := truth.rescueAfter(snaps, used); !ok {
		t.Fatalf("ws-a (uid %s) was reaped without an intact snapshot cut after its second use ended (%s):%s", uid,
			used.UTC().Format(time.RFC3339Nano), truth.describeSnaps(snaps))
	}
}

// TestLeaseSurvivesLostResponses: the server applies a Lease write but the
// response is lost (a connection reset after the fact). The run's retry
// then meets its own write: AlreadyExists on create, a Conflict on the next
// renewal. The lease is the run's own (same holder identity): the run must
// carry on, not refuse itself (exit 5) or stop as if another run had taken
// the lease over (exit 1). Found by TestChaos.
func TestLeaseSurvivesLostResponses(t *testing.T) {
	for _, c := range []struct {
		name string
		verb string
	}{
		{"create", "create"},
		{"renew", "update"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fixtures(t)
			ns := env.Namespace(t)
			// A slow volume keeps the run alive for several renewals.
			if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 3 * time.Second}); err != nil {
				t.Fatal(err)
			}
			orphan(t, f, ns, "ws-a", "a", ns+"-slow")
			p := env.StartFaultProxy(t, 5)
			p.Set(testenv.Faults{Rules: []testenv.Rule{{Verbs: []string{c.verb}, Resources: []string{"leases"}, Times: 1,
				Faults: testenv.Faults{RateLostResponse: 1}}}})
			code, out, stderr := proxyRun(p, reapArgs("run", ns, "--yes", "--max-deletion-percent", "100", "--lock-duration", "3s")...)
			if n := p.InjectedByKind()[testenv.KindLostResponse]; n != 1 {
				t.Fatalf("the proxy lost %d lease responses, want 1: the test proves nothing", n)
			}
			if code != 0 {
				t.Fatalf("a lost response to the run's own lease %s: exit %d: %s", c.verb, code, stderr)
			}
			// The reap itself may meet the snapshot controller's finalizer
			// removal (a precondition failure): a later run reaps it.
			_, act, _ := entry(t, parse(t, out), "ws-a")
			for i := 0; i < 2 && exists(t, f, ns, "ws-a"); i++ {
				if code, _, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...); code != 0 && code != 4 {
					t.Fatalf("reap after the lease test: exit %d: %s", code, stderr)
				}
			}
			if exists(t, f, ns, "ws-a") {
				t.Errorf("ws-a was never reaped (the run under test: action %q)", act)
			}
			leaseReleased(t, ns)
		})
	}
}

// TestHungRequestsAreBounded: an API server that accepts a request and
// never answers must not hang the janitor (which would keep renewing its
// Lease, blocking every later run). A watch that never opens is bounded by
// --snapshot-timeout, any other call by --api-timeout. Found by TestChaos.
func TestHungRequestsAreBounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		rule  testenv.Rule
		bound time.Duration // how long the run may take at most
	}{
		{"watch", testenv.Rule{Verbs: []string{"watch"}, Resources: []string{"volumesnapshots"},
			Faults: testenv.Faults{RateHang: 1, HangFor: 2 * time.Minute, WatchOpen: true}}, 4*time.Second + 15*time.Second},
		{"list", testenv.Rule{Verbs: []string{"list"}, Resources: []string{"pods"}, Times: 1,
			Faults: testenv.Faults{RateHang: 1, HangFor: 2 * time.Minute}}, 8*time.Second + 15*time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fixtures(t)
			ns := env.Namespace(t)
			if err := csidriver.SetFault(env.DriverStateDir, ns+"-slow", csidriver.Fault{ReadyAfter: 2 * time.Second}); err != nil {
				t.Fatal(err)
			}
			orphan(t, f, ns, "ws-a", "a", ns+"-slow")
			p := env.StartFaultProxy(t, 6)
			p.Set(testenv.Faults{Rules: []testenv.Rule{c.rule}})
			start := time.Now()
			done := make(chan struct{})
			var code int
			var stderr string
			go func() {
				defer close(done)
				code, _, stderr = proxyRun(p, snapArgs(ns, "--snapshot-timeout", "4s", "--api-timeout", "8s", "--lock-duration", "3s")...)
			}()
			select {
			case <-done:
			case <-time.After(c.bound):
				t.Fatalf("the run still hangs after %s (the proxy holds %s)", c.bound, testenv.FormatCounts(p.InjectedDetail()))
			}
			if p.InjectedByKind()[testenv.KindHang] == 0 {
				t.Fatal("nothing hung: the test proves nothing")
			}
			if code != 0 && code != 1 && code != 4 {
				t.Errorf("exit %d: %s", code, stderr)
			}
			t.Logf("ended after %s with exit %d", time.Since(start).Round(100*time.Millisecond), code)
		})
	}
}
