package cli_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/pvc-janitor/pvc-janitor/internal/csidriver"
	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

// podLife is one pod of the churn: which claim it uses and when (local
// clock; the API server runs on this host) it was created and deleted.
type podLife struct {
	claim            string
	created, deleted time.Time
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
	churnOps int
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestRandomizedSafety builds mixed cluster states and runs `janitor run`
// repeatedly while pods appear and disappear between and during runs. After
// every run it asserts the safety invariants:
//   - every deleted claim had a ready janitor snapshot created at or after
//     its orphaned-since (at or after the last moment a pod released it);
//   - no claim referenced by a pod at the moment of its deletion was deleted;
//   - no claim has two janitor snapshots.
//
// Reproduce a failure with PVC_JANITOR_SEED=<seed from the message>;
// PVC_JANITOR_SAFETY_SCENARIOS and PVC_JANITOR_SAFETY_RUNS scale it.
func TestRandomizedSafety(t *testing.T) {
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("PVC_JANITOR_SEED"), 10, 64); err == nil {
		seed = v
	}
	scenarios := envInt("PVC_JANITOR_SAFETY_SCENARIOS", 3)
	runs := envInt("PVC_JANITOR_SAFETY_RUNS", 5)
	totalRuns, totalDeleted, totalChurn := 0, 0, 0
	for s := 0; s < scenarios; s++ {
		sseed := seed + int64(s)
		w := &safetyWorld{t: t, rng: rand.New(rand.NewSource(sseed)), pods: map[string]*podLife{},
			deleted: map[string]time.Time{}, uids: map[string]string{}}
		w.f, _ = env.NewFixtures()
		w.ns = env.Namespace(t)
		fail := func(format string, a ...any) {
			t.Fatalf("seed %d (scenario %d, PVC_JANITOR_SEED=%d reproduces): %s", seed, s, seed, fmt.Sprintf(format, a...))
		}
		w.build(fail)
		stopWatch := w.watchDeletions(fail)
		for r := 0; r < runs; r++ {
			w.churn(3 + w.rng.Intn(4))
			done := make(chan struct{})
			go func() {
				for {
					select {
					case <-done:
						return
					case <-time.After(time.Duration(50+w.rng.Intn(300)) * time.Millisecond):
						w.churn(1)
					}
				}
			}()
			code, out, stderr := run(t, reapArgs("run", w.ns, "--yes", "--max-deletion-percent", "100", "--max-deletions", "1000",
				"--snapshot-timeout", "8s", "--snapshot-error-grace", "1s", "--snapshot-attempts", "2", "--concurrency", "4")...)
			close(done)
			if code != 0 && code != 4 {
				fail("run %d: exit %d\n%s\n%s", r, code, out, stderr)
			}
			time.Sleep(300 * time.Millisecond) // let the deletion watch catch up
			w.check(fail, r)
			totalRuns++
		}
		stopWatch()
		w.mu.Lock()
		totalDeleted += len(w.deleted)
		totalChurn += w.churnOps
		w.mu.Unlock()
	}
	t.Logf("safety: seed %d, %d scenarios, %d runs, %d claims deleted, %d pod churn operations, 0 violations",
		seed, scenarios, totalRuns, totalDeleted, totalChurn)
}

func (w *safetyWorld) build(fail func(string, ...any)) {
	ctx := context.Background()
	n := 8 + w.rng.Intn(6)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ws-%02d", i)
		handle := w.ns + "-" + name
		switch w.rng.Intn(6) {
		case 0:
			_ = csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{ReadyAfter: time.Duration(1+w.rng.Intn(3)) * time.Second})
		case 1:
			_ = csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{TransientFailures: 1 + w.rng.Intn(2)})
		case 2:
			_ = csidriver.SetFault(env.DriverStateDir, handle, csidriver.Fault{PermanentError: "broken " + name})
		}
		labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": fmt.Sprintf("w%d", i%5)}
		c, err := w.f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: w.ns, Name: name, Labels: labels, VolumeHandle: handle})
		if err != nil {
			fail("seed claim: %v", err)
		}
		w.uids[name] = string(c.UID)
	}
	w.churn(n / 2)
}

// churn creates or deletes k pods at random.
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
		if !create {
			victim = alive[w.rng.Intn(len(alive))]
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
				w.pods[podName] = &podLife{claim: claim, created: start}
				w.mu.Unlock()
			}
			continue
		}
		if err := w.f.ForceDeletePod(ctx, w.ns, victim); err == nil {
			w.mu.Lock()
			w.pods[victim].deleted = time.Now() // after the call: the pod may count until then
			w.mu.Unlock()
		}
	}
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
			if ev.Type == watch.Deleted || c.DeletionTimestamp != nil {
				w.mu.Lock()
				if _, seen := w.deleted[c.Name]; !seen {
					w.deleted[c.Name] = time.Now()
				}
				w.mu.Unlock()
			}
		}
	}()
	return wi.Stop
}

func (w *safetyWorld) check(fail func(string, ...any), run int) {
	snaps := snapshots(w.t, w.f, w.ns)
	own := map[string][]string{}
	ready := map[string]time.Time{}
	for i := range snaps {
		s := &snaps[i]
		if s.Labels["app.kubernetes.io/managed-by"] != "pvc-janitor" {
			continue
		}
		uid := s.Annotations["pvc-janitor.io/source-uid"]
		own[uid] = append(own[uid], s.Name)
		if testenv.Ready(s) {
			ready[uid] = s.CreationTimestamp.Time
		}
	}
	for uid, names := range own {
		if len(names) > 1 {
			fail("run %d: claim uid %s has %d janitor snapshots: %s", run, uid, len(names), strings.Join(names, ", "))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for claim, at := range w.deleted {
		uid := w.uids[claim]
		created, ok := ready[uid]
		if !ok {
			fail("run %d: %s was deleted without a ready janitor snapshot", run, claim)
		}
		var lastRelease time.Time
		for name, p := range w.pods {
			if p.claim != claim {
				continue
			}
			if p.created.Before(at.Add(-time.Second)) && (p.deleted.IsZero() || p.deleted.After(at)) {
				fail("run %d: %s was deleted at %s while pod %s (created %s) referenced it", run, claim,
					at.Format(time.RFC3339Nano), name, p.created.Format(time.RFC3339Nano))
			}
			if !p.deleted.IsZero() && p.deleted.Before(at) && p.deleted.After(lastRelease) {
				lastRelease = p.deleted
			}
		}
		// Snapshot timestamps have one-second resolution.
		if created.Before(lastRelease.Truncate(time.Second)) {
			fail("run %d: %s deleted with a snapshot taken at %s, before it was last released at %s", run, claim,
				created.Format(time.RFC3339), lastRelease.Format(time.RFC3339Nano))
		}
	}
}
