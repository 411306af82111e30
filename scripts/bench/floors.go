//go:build integration

package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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
	Requests    map[string]int
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

// kubectlDeleteFloor deletes the floor claims with kubectl, through the
// request counter (so its requests are counted like the janitor's), by
// name, 500 names per process.
func kubectlDeleteFloor(ctx context.Context, c *testenv.Cluster, counter *requestCounter, n int, res *floorResult) error {
	counter.take()
	res.KubectlArgs = []string{"delete", "pvc", "-n", floorNS, "--wait=false", "<names>"}
	var total sample
	for from := 0; from < n; from += 500 {
		args := []string{"--kubeconfig", counter.kubeconfig, "delete", "pvc", "-n", floorNS, "--wait=false"}
		for i := from; i < min(n, from+500); i++ {
			args = append(args, claimName(i))
		}
		s, err := runProc(ctx, componentPID(c.Dir, "kube-apiserver"), nil, c.Bin.Kubectl, args...)
		if err != nil {
			return fmt.Errorf("kubectl delete: %w", err)
		}
		total.Wall += s.Wall
		total.CPU += s.CPU
		total.ServerCPU += s.ServerCPU
		total.MaxRSS = max(total.MaxRSS, s.MaxRSS)
	}
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

// listedObjects reads kube-apiserver's counts of the objects its lists
// returned (apiserver_cache_list_returned_objects_total, served from the
// watch cache, and apiserver_storage_list_returned_objects_total, from
// etcd), by resource: everyone's lists, which during a janitor run are the
// janitor's (the controllers watch).
func listedObjects(ctx context.Context, f *testenv.Fixtures) map[string]float64 {
	raw, err := f.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		var rest string
		var ok bool
		if rest, ok = strings.CutPrefix(line, "apiserver_cache_list_returned_objects_total{"); !ok {
			if rest, ok = strings.CutPrefix(line, "apiserver_storage_list_returned_objects_total{"); !ok {
				continue
			}
		}
		labelsPart, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		res := ""
		for _, kv := range strings.Split(labelsPart, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "resource":
				res = v
			case "resource_prefix":
				res = v[strings.LastIndex(v, "/")+1:]
			}
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || res == "" {
			continue
		}
		out[res] += n
	}
	return out
}

// objectsPerClaim renders the objects the lists returned during a run
// (the diff of listedObjects), plus gets (one object each, from the
// janitor's counted requests), per claim.
func objectsPerClaim(listed map[string]float64, own map[string]int, n int) string {
	if n == 0 || listed == nil {
		return "not measured"
	}
	gets := 0
	for k, v := range own {
		if strings.HasPrefix(k, "get ") {
			gets += v
		}
	}
	total := float64(gets)
	var parts []string
	for _, r := range []string{"pods", "persistentvolumeclaims", "volumesnapshots", "volumesnapshotcontents", "persistentvolumes"} {
		if v := listed[r]; v > 0 {
			total += v
			parts = append(parts, fmt.Sprintf("%s %.1f", r, v/float64(n)))
		}
	}
	if gets > 0 {
		parts = append(parts, fmt.Sprintf("gets %.2f", float64(gets)/float64(n)))
	}
	return fmt.Sprintf("%.1f (%s)", total/float64(n), strings.Join(parts, ", "))
}
