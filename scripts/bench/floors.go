//go:build integration

package main

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The floors of the rescue and reap (issue 43), measured in the same run
// on the same stack: the snapshot controller's own throughput (N snapshots
// of N bound claims created directly, at the janitor's QPS, until all are
// ready) and `kubectl delete` of N claims. They run on a second set of N
// bound claims, in floorNS, seeded beside the janitor's orphans; the pods
// of --snapshot-pods go into the janitor's namespace, where its reap
// checks for use.

const floorNS = "bench-floor"

// floorResult is what the floors measured.
type floorResult struct {
	// Controller is the wall time from the first create of N snapshots to
	// the last one ready.
	Controller time.Duration
	Ready      int
	// Delete is `kubectl delete` of the N claims (KubectlArgs), with its
	// requests (counted by the proxy) and its peak RSS.
	Delete      sample
	Deleted     int
	KubectlArgs []string
	// Procs kubectl processes ran at once (kubectlDeleteFloor).
	Procs    int
	Requests map[string]int
}

// seedPods creates p workspace pods in the janitor's namespace; none of
// them uses a claim (the claims stay orphans), so their only cost is to
// every pod list.
func seedPods(ctx context.Context, o *options, f *testenv.Fixtures, p int) (time.Duration, error) {
	s := &seeder{workers: o.workers}
	tmpl := workspacePod()
	tmpl.Namespace = snapNS
	t := time.Now()
	err := s.pool(ctx, "pods", 0, p, func(ctx context.Context, i int) error {
		pod := tmpl.DeepCopy()
		pod.Name = fmt.Sprintf("ide-%06d", i)
		pod.Labels[workspaceLabel] = workspace(i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		_, err := f.Kube.CoreV1().Pods(snapNS).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	return time.Since(t), err
}

// seedFloorClaims creates the floors' n bound claims.
func seedFloorClaims(ctx context.Context, o *options, f *testenv.Fixtures, n int) (time.Duration, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNS}}
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, err
	}
	s := &seeder{workers: min(o.workers, 32)}
	t := time.Now()
	err := s.pool(ctx, "floor claims", 0, n, func(ctx context.Context, i int) error {
		_, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: floorNS, Name: claimName(i),
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i)}})
		return err
	})
	return time.Since(t), err
}

// controllerFloor creates one snapshot of each floor claim, 32 at a time
// at qps (burst twice that, the janitor's settings), and waits until all
// are ready: what the snapshot controller and the driver take without the
// janitor.
func controllerFloor(ctx context.Context, f *testenv.Fixtures, n, qps int, res *floorResult) error {
	limiter := flowcontrol.NewTokenBucketRateLimiter(float32(qps), 2*qps)
	s := &seeder{workers: 32}
	t := time.Now()
	err := s.pool(ctx, "floor snapshots", 0, n, func(ctx context.Context, i int) error {
		if err := limiter.Wait(ctx); err != nil {
			return err
		}
		_, err := f.Snapshot(ctx, floorNS, claimName(i)+"-floor", claimName(i), "", nil, nil)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	for {
		l, err := f.Snap.SnapshotV1().VolumeSnapshots(floorNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		res.Ready = 0
		for i := range l.Items {
			if testenv.Ready(&l.Items[i]) {
				res.Ready++
			}
		}
		if res.Ready >= n {
			res.Controller = time.Since(t)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kubectlQPS is kubectl's client rate (client-go's defaults: QPS 5,
// burst 10; kubectl has no flag for it).
const kubectlQPS = 5

// kubectlDeleteFloor deletes the floor claims with kubectl, through the
// request counter (so its requests are counted like the janitor's), by
// name: qps/kubectlQPS processes at once, so that together they delete at
// the janitor's --qps (and burst), each a share of the names.
func kubectlDeleteFloor(ctx context.Context, c *testenv.Cluster, counter *requestCounter, n, qps int, res *floorResult) error {
	counter.take()
	procs := max(1, qps/kubectlQPS)
	res.Procs = procs
	res.KubectlArgs = []string{"delete", "pvc", "-n", floorNS, "--wait=false", "<names>"}
	var (
		mu    sync.Mutex
		total sample
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for p := range procs {
		args := []string{"--kubeconfig", counter.kubeconfig, "delete", "pvc", "-n", floorNS, "--wait=false"}
		for i := p; i < n; i += procs {
			args = append(args, claimName(i))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := runProc(ctx, 0, nil, c.Bin.Kubectl, args...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("kubectl delete: %w", err)
			}
			total.CPU += s.CPU
			total.MaxRSS = max(total.MaxRSS, s.MaxRSS)
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	total.Wall = time.Since(start)
	res.Delete = total
	res.Requests = counter.take()
	for k, v := range res.Requests {
		if strings.HasPrefix(k, "delete persistentvolumeclaims") {
			res.Deleted += v
		}
	}
	return nil
}

// kubectlVersion is the floor's kubectl, for the record.
func kubectlVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version", "--client", "-o", "yaml").Output()
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "gitVersion: "); ok {
			return v
		}
	}
	return "unknown"
}

// objectsPerClaim renders the objects the janitor read during a run (the
// proxy's count: list items and gets), per claim, by resource.
func objectsPerClaim(objects map[string]int, n int) string {
	if n == 0 || len(objects) == 0 {
		return "not measured"
	}
	keys := make([]string, 0, len(objects))
	total := 0
	for k, v := range objects {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return objects[keys[i]] > objects[keys[j]] })
	var parts []string
	for _, k := range keys {
		if per := float64(objects[k]) / float64(n); per >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per))
		}
	}
	return fmt.Sprintf("%.2f (%s)", float64(total)/float64(n), strings.Join(parts, ", "))
}
