//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

const snapNS = "bench-snapshot"

// snapshotArgs are the janitor flags of the throughput run (besides
// --kubeconfig); the issue asks for --qps 100.
func snapshotArgs(qps int) []string {
	return []string{"snapshot", "-n", snapNS, "-l", appLabel + "=" + appValue,
		"--workspace-label", workspaceLabel, "--min-age", "0s", "--grace-period", "0s",
		"--qps", strconv.Itoa(qps), "--burst", strconv.Itoa(2 * qps), "--concurrency", "32", "-o", "json", "--log-level", "warn"}
}

// snapshotResult is one end-to-end rescue run.
type snapshotResult struct {
	Env                  envInfo
	N                    int
	SeedTime, UnusedTime time.Duration
	Run                  sample
	Created, Failed      int
	States               map[string]int
	ReadyAfter           int // ready VolumeSnapshots counted after the run
	ExitCode             int
	ClaimsPerSecond      float64
	ControllerQPS        string
	SnapshotterVersion   string
	Args                 []string
	// Requests counts the API requests served during the run (everyone's:
	// the janitor's and the snapshot controllers'), by verb and resource.
	Requests map[string]float64
	// Own counts the janitor's own requests of the snapshot run, and
	// Reap those of the `janitor reap --yes` that follows it (ReapArgs),
	// which deleted Reaped claims (ReapExit its exit code).
	Own, Reap        map[string]int
	ReapArgs         []string
	Reaped, ReapExit int
	ReapRun          sample
	// Pods were seeded in the janitor's namespace (--snapshot-pods), in
	// PodSeed.
	Pods    int
	PodSeed time.Duration
	// Mark counts the janitor's requests of the `janitor scan` that marks
	// the orphans before the snapshot run (MarkArgs), so that the rescue's
	// own are counted apart.
	Mark     map[string]int
	MarkArgs []string
	// ObjectsRescue and ObjectsReap are the objects the janitor read in
	// each run, by resource (the proxy's count).
	ObjectsRescue, ObjectsReap map[string]int
	// Floor is the floors' run (--snapshot-floors), FloorSeed the seeding
	// of its claims, KubectlVersion its kubectl.
	Floor          *floorResult
	FloorSeed      time.Duration
	KubectlVersion string
	// RescueCPU and FloorCPU are each component's user+sys time during the
	// rescue run and during the controller floor (stackCPU; the janitor's
	// own under "janitor"), to show what bounds each: a component near one
	// core, or all of them near the machine's cores.
	RescueCPU, FloorCPU map[string]time.Duration
}

// reapQPS is the reap's --qps (its default; burst twice that), and the
// kubectl floor's rate.
const reapQPS = 50

// reapArgs are the flags of the reap that follows the throughput run: it
// deletes every rescued claim.
func reapArgs(n int) []string {
	return []string{"reap", "-n", snapNS, "-l", appLabel + "=" + appValue,
		"--workspace-label", workspaceLabel, "--min-age", "0s", "--grace-period", "0s", "--yes",
		"--qps", strconv.Itoa(reapQPS), "--burst", strconv.Itoa(2 * reapQPS),
		"--max-deletions", strconv.Itoa(n), "--max-deletion-percent", "100", "-o", "json", "--log-level", "warn"}
}

// snapshotThroughput starts a full stack (controller manager, snapshot
// controller, csi-snapshotter, the CSI driver), seeds n orphaned bound
// claims, waits until the controller manager has marked each Unused, then
// rescues them all with one `janitor snapshot`.
func snapshotThroughput(ctx context.Context, o *options, work, janitorBin string) (res *snapshotResult, err error) {
	c, err := startCluster(ctx, o.dir, work, "snapshot", false)
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the cluster")
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	res = &snapshotResult{Env: collectEnv(ctx, c, "full local stack"), N: o.snapshotN, ControllerQPS: "200 (burst 400)", SnapshotterVersion: c.Bin.SnapshotterVersion, Args: snapshotArgs(o.snapshotQPS)}
	f, err := c.NewFixtures()
	if err != nil {
		return nil, err
	}
	if err := seedOrphans(ctx, o, f, res); err != nil {
		return nil, err
	}
	if o.snapshotPods > 0 {
		res.Pods = o.snapshotPods
		if res.PodSeed, err = seedPods(ctx, o, f, o.snapshotPods); err != nil {
			return nil, err
		}
		logf("seeded %d pods in %s", res.Pods, res.PodSeed.Round(time.Millisecond))
	}
	if o.snapshotFloors {
		res.Floor = &floorResult{}
		res.KubectlVersion = kubectlVersion(ctx, c.Bin.Kubectl)
		if res.FloorSeed, err = seedFloorClaims(ctx, o, f, o.snapshotN); err != nil {
			return nil, err
		}
		logf("floor: %d snapshots created directly", o.snapshotN)
		cpu := stackCPU(c.Dir)
		if err := controllerFloor(ctx, f, o.snapshotN, o.snapshotQPS, res.Floor); err != nil {
			return nil, err
		}
		res.FloorCPU = diffCPU(stackCPU(c.Dir), cpu)
		logf("floor: %d ready in %s", res.Floor.Ready, res.Floor.Controller.Round(time.Millisecond))
	}

	logf("rescuing %d claims: janitor %s", o.snapshotN, strings.Join(res.Args, " "))
	counter, err := startRequestCounter(c.Config, work)
	if err != nil {
		return nil, err
	}
	defer counter.close()
	if err := rescueAll(ctx, c, f, counter, janitorBin, res); err != nil {
		return nil, err
	}
	counter.takeObjects()
	if err := reapAll(ctx, c, counter, janitorBin, res); err != nil {
		return nil, err
	}
	res.ObjectsReap = counter.takeObjects()
	logf("reaped %d in %s", res.Reaped, res.ReapRun.Wall.Round(time.Millisecond))
	if res.Floor != nil {
		if err := kubectlDeleteFloor(ctx, c, counter, o.snapshotN, reapQPS, res.Floor); err != nil {
			return nil, err
		}
		logf("floor: kubectl deleted %d in %s", res.Floor.Deleted, res.Floor.Delete.Wall.Round(time.Millisecond))
	}
	return res, nil
}

// seedOrphans creates the bound claims and waits until the controller
// manager counts each Unused.
func seedOrphans(ctx context.Context, o *options, f *testenv.Fixtures, res *snapshotResult) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapNS}}
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// BoundClaim waits for the binder claim by claim: a pool keeps many
	// waits in flight.
	s := &seeder{workers: min(o.workers, 32)}
	t := time.Now()
	err := s.pool(ctx, "bound claims", 0, o.snapshotN, func(ctx context.Context, i int) error {
		_, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: snapNS, Name: claimName(i),
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i)}})
		return err
	})
	if err != nil {
		return err
	}
	res.SeedTime = time.Since(t)
	t = time.Now()
	err = s.pool(ctx, "Unused conditions", 0, o.snapshotN, func(ctx context.Context, i int) error {
		_, err := f.WaitUnused(ctx, snapNS, claimName(i))
		return err
	})
	if err != nil {
		return err
	}
	res.UnusedTime = time.Since(t)

	return nil
}

// rescueAll runs the one `janitor snapshot` of every claim, counting its
// requests, and reads what it did.
func rescueAll(ctx context.Context, c *testenv.Cluster, f *testenv.Fixtures, counter *requestCounter, janitorBin string, res *snapshotResult) error {
	var out bytes.Buffer
	args := append([]string{"--kubeconfig", counter.kubeconfig}, res.Args...)
	// The scan marks the orphans first (their orphaned-since, the
	// OrphanDetected Event), as a run before the rescue would: the
	// snapshot run's requests are then the rescue's.
	res.MarkArgs = append([]string{"scan"}, res.Args[1:11]...)
	if _, err := runProc(ctx, 0, nil, janitorBin, append([]string{"--kubeconfig", counter.kubeconfig}, res.MarkArgs...)...); err != nil {
		return fmt.Errorf("mark: %w", err)
	}
	res.Mark = counter.take()
	counter.takeObjects()
	before := requestCounts(ctx, f)
	cpu := stackCPU(c.Dir)
	var err error
	res.Run, err = runProc(ctx, componentPID(c.Dir, "kube-apiserver"), &out, janitorBin, args...)
	res.RescueCPU = diffCPU(stackCPU(c.Dir), cpu)
	res.RescueCPU["janitor"] = res.Run.CPU
	res.Requests = diffCounts(requestCounts(ctx, f), before)
	res.ObjectsRescue = counter.takeObjects()
	res.Own = counter.take()
	if err != nil {
		// Exit 4 (some rescues failed) still has a report worth recording.
		if !strings.Contains(err.Error(), "exit status 4") {
			return err
		}
		res.ExitCode = 4
	}
	var rep struct {
		Summary struct {
			SnapshotsCreated int            `json:"snapshotsCreated"`
			Failures         int            `json:"failures"`
			States           map[string]int `json:"states"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("parse the snapshot report: %w", err)
	}
	res.Created, res.Failed, res.States = rep.Summary.SnapshotsCreated, rep.Summary.Failures, rep.Summary.States
	res.ClaimsPerSecond = float64(res.Created) / res.Run.Wall.Seconds()
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(snapNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		if testenv.Ready(&l.Items[i]) {
			res.ReadyAfter++
		}
	}
	logf("rescued %d/%d in %s (%.1f claims/s); %d failed; %d snapshots ready", res.Created, res.N,
		res.Run.Wall.Round(time.Millisecond), res.ClaimsPerSecond, res.Failed, res.ReadyAfter)

	return nil
}

// reapAll reaps every rescued claim, counted the same way.
func reapAll(ctx context.Context, c *testenv.Cluster, counter *requestCounter, janitorBin string, res *snapshotResult) error {
	var out bytes.Buffer
	var err error
	res.ReapArgs = reapArgs(res.N)
	res.ReapRun, err = runProc(ctx, componentPID(c.Dir, "kube-apiserver"), &out, janitorBin,
		append([]string{"--kubeconfig", counter.kubeconfig}, res.ReapArgs...)...)
	res.Reap = counter.take()
	if err != nil {
		if !strings.Contains(err.Error(), "exit status 4") {
			return fmt.Errorf("reap: %w", err)
		}
		res.ReapExit = 4
	}
	var reaped struct {
		Summary struct {
			ClaimsDeleted int `json:"claimsDeleted"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &reaped); err != nil {
		return fmt.Errorf("parse the reap report: %w", err)
	}
	res.Reaped = reaped.Summary.ClaimsDeleted
	res.Env.LoadAfter = loadAvg()
	return nil
}

func renderSnapshot(r *snapshotResult) string {
	var b strings.Builder
	b.WriteString("## Snapshot throughput\n\n")
	r.Env.markdownNote(&b, "the request counts below are exact")
	fmt.Fprintf(&b, "- Full local stack: kube-controller-manager (binder, pvc-protection with the `Unused` condition), snapshot-controller and csi-snapshotter %s (client QPS %s), the project's CSI driver.\n", r.SnapshotterVersion, r.ControllerQPS)
	fmt.Fprintf(&b, "- %d orphaned, bound claims (no pod), seeded with `testenv` fixtures in %s; the controller manager marked them all `Unused` within %s more.\n", r.N, dur(r.SeedTime), dur(r.UnusedTime))
	fmt.Fprintf(&b, "- Command: `janitor %s`: it scans and marks, creates one VolumeSnapshot per orphan and waits until every one is `readyToUse`.\n\n", strings.Join(r.Args, " "))
	b.WriteString("| orphans | rescued (ready) | failed | wall, end to end | claims/s | janitor CPU | janitor peak RSS | server CPU | exit |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | **%s** | %.1f | %s | %s | %s | %d |\n", r.N, r.Created, r.Failed, dur(r.Run.Wall),
		r.ClaimsPerSecond, dur(r.Run.CPU), mib(r.Run.MaxRSS), dur(r.Run.ServerCPU), r.ExitCode)
	fmt.Fprintf(&b, "\nAfter the run, %d VolumeSnapshots in the namespace were ready.\n", r.ReadyAfter)
	if len(r.Requests) > 0 {
		type kv struct {
			k string
			v float64
		}
		var all []kv
		total := 0.0
		for k, v := range r.Requests {
			all = append(all, kv{k, v})
			total += v
		}
		sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v })
		var parts []string
		for i, x := range all {
			if i == 10 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f", x.k, x.v))
		}
		fmt.Fprintf(&b, "\nAPI requests served during the run (the janitor's and the snapshot controllers'): %.0f in all, %.1f per claim; most: %s.\n",
			total, total/float64(max(1, r.N)), strings.Join(parts, ", "))
	}
	if r.Own != nil {
		fmt.Fprintf(&b, "\nThe janitor's own API requests (counted by a proxy in front of the API server), by verb and resource:\n\n")
		if r.Mark != nil {
			fmt.Fprintf(&b, "- per orphan marked by `janitor %s` before the snapshot run (%d orphans): %s\n", strings.Join(r.MarkArgs, " "), r.N, perClaim(r.Mark, r.N))
		}
		fmt.Fprintf(&b, "- per rescued claim (the snapshot run, %d rescued): %s\n", r.Created, perClaim(r.Own, r.Created))
		fmt.Fprintf(&b, "- per reaped claim (`janitor %s`, %d deleted in %s, exit %d): %s\n", strings.Join(r.ReapArgs, " "),
			r.Reaped, dur(r.ReapRun.Wall), r.ReapExit, perClaim(r.Reap, r.Reaped))
		fmt.Fprintf(&b, "\nObjects the janitor read per claim (the proxy counts the items of every list answer and one per get), by resource:\n\n")
		fmt.Fprintf(&b, "- rescue: %s\n", objectsPerClaim(r.ObjectsRescue, r.Created))
		fmt.Fprintf(&b, "- reap: %s\n", objectsPerClaim(r.ObjectsReap, r.Reaped))
	}
	if r.Pods > 0 {
		fmt.Fprintf(&b, "\nThe janitor's namespace also held %d workspace pods (none using a claim; seeded in %s): every pod list reads them all.\n", r.Pods, dur(r.PodSeed))
	}
	if f := r.Floor; f != nil {
		b.WriteString("\n### Side by side with the floors\n\n")
		fmt.Fprintf(&b, "The floors ran on %d more bound claims in `%s` (seeded in %s), on the same stack in the same run: ", r.N, floorNS, dur(r.FloorSeed))
		fmt.Fprintf(&b, "**the snapshot controller's own throughput** (one VolumeSnapshot per claim created directly, 32 at a time at --qps %s, until every one is ready) and **`kubectl %s`** (kubectl %s at its client's rate, %d/s and burst %d, in %d processes at once: %d/s together, the reap's `--qps`).\n\n",
			r.Args[indexOf(r.Args, "--qps")+1], strings.Join(f.KubectlArgs, " "), r.KubectlVersion, kubectlQPS, 2*kubectlQPS, f.Procs, f.Procs*kubectlQPS)
		b.WriteString("| step | claims | janitor wall | floor wall | janitor / floor | janitor peak RSS |\n|---|---:|---:|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| rescue (create and wait until ready) | %d | %s | %s (%d ready) | **%.2f** | %s |\n", r.Created, dur(r.Run.Wall), dur(f.Controller), f.Ready,
			ratio(r.Run.Wall, f.Controller), mib(r.Run.MaxRSS))
		fmt.Fprintf(&b, "| reap (delete) | %d | %s | %s (%d deletes) | **%.2f** | %s |\n", r.Reaped, dur(r.ReapRun.Wall), dur(f.Delete.Wall), f.Deleted,
			ratio(r.ReapRun.Wall, f.Delete.Wall), mib(r.ReapRun.MaxRSS))
		fmt.Fprintf(&b, "\nThe janitor's rescue wall time includes its scan and its re-checks (the orphans were marked by the scan before it); the controller floor's does not. kubectl's requests: %s.\n", perClaim(f.Requests, max(1, f.Deleted)))
	}
	if r.RescueCPU != nil {
		b.WriteString("\nCPU (user+sys, from /proc) of each component during the rescue and during the controller floor, and the cores it kept busy on average (CPU / wall):\n\n")
		fmt.Fprintf(&b, "- rescue (%s): %s\n", dur(r.Run.Wall), cpuShares(r.RescueCPU, r.Run.Wall, r.Env.CPUs))
		if r.Floor != nil && r.FloorCPU != nil {
			fmt.Fprintf(&b, "- controller floor (%s): %s\n", dur(r.Floor.Controller), cpuShares(r.FloorCPU, r.Floor.Controller, r.Env.CPUs))
		}
	}
	return b.String()
}

// requestCounts reads kube-apiserver's apiserver_request_total, summed by
// verb and resource ("POST volumesnapshots").
func requestCounts(ctx context.Context, f *testenv.Fixtures) map[string]float64 {
	raw, err := f.Kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labelsPart, value, ok := strings.Cut(strings.TrimPrefix(line, "apiserver_request_total{"), "} ")
		if !ok {
			continue
		}
		var verb, res, sub string
		for _, kv := range strings.Split(labelsPart, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "verb":
				verb = v
			case "resource":
				res = v
			case "subresource":
				sub = v
			}
		}
		if sub != "" {
			res += "/" + sub
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		out[verb+" "+res] += n
	}
	return out
}

func diffCounts(after, before map[string]float64) map[string]float64 {
	if after == nil || before == nil {
		return nil
	}
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// indexOf is the index of x in s (-1: not there).
func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// stackCPU is the user+sys time so far of each component of the cluster in
// dir (its pid file: kube-apiserver, etcd, the controllers, the driver).
func stackCPU(dir string) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, pid := range componentPIDs(dir) {
		out[name] = procCPU(pid)
	}
	return out
}

func diffCPU(after, before map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// cpuShares renders each component's CPU, the busiest first, with the
// cores it kept busy over wall, then the total against the machine's
// cores.
func cpuShares(cpu map[string]time.Duration, wall time.Duration, cores int) string {
	names := make([]string, 0, len(cpu))
	var total time.Duration
	for k, v := range cpu {
		names = append(names, k)
		total += v
	}
	sort.Slice(names, func(i, j int) bool { return cpu[names[i]] > cpu[names[j]] })
	w := max(wall.Seconds(), 0.001)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %s (%.2f cores)", k, dur(cpu[k]), cpu[k].Seconds()/w))
	}
	return fmt.Sprintf("%s; all together %s, %.2f of the machine's %d cores", strings.Join(parts, ", "), dur(total), total.Seconds()/w, cores)
}
