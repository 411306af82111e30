package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

const snapNS = "bench-snapshot"

// snapshotArgs are the janitor flags of the throughput run (besides
// --kubeconfig): the issue's --qps 100.
var snapshotArgs = []string{"snapshot", "-n", snapNS, "-l", appLabel + "=" + appValue,
	"--workspace-label", workspaceLabel, "--min-age", "0s", "--grace-period", "0s",
	"--qps", "100", "--burst", "200", "--concurrency", "32", "-o", "json", "--log-level", "warn"}

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
	res = &snapshotResult{Env: collectEnv(ctx, c), N: o.snapshotN, ControllerQPS: "200 (burst 400)"}
	f, err := c.NewFixtures()
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: snapNS}}
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	// BoundClaim waits for the binder claim by claim: a pool keeps many
	// waits in flight.
	s := &seeder{workers: min(o.workers, 32)}
	t := time.Now()
	err = s.pool(ctx, "bound claims", 0, o.snapshotN, func(ctx context.Context, i int) error {
		_, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: snapNS, Name: claimName(i),
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i)}})
		return err
	})
	if err != nil {
		return nil, err
	}
	res.SeedTime = time.Since(t)
	t = time.Now()
	err = s.pool(ctx, "Unused conditions", 0, o.snapshotN, func(ctx context.Context, i int) error {
		_, err := f.WaitUnused(ctx, snapNS, claimName(i))
		return err
	})
	if err != nil {
		return nil, err
	}
	res.UnusedTime = time.Since(t)

	logf("rescuing %d claims: janitor %s", o.snapshotN, strings.Join(snapshotArgs, " "))
	var out bytes.Buffer
	args := append([]string{"--kubeconfig", c.Kubeconfig}, snapshotArgs...)
	res.Run, err = runProc(ctx, componentPID(c.Dir, "kube-apiserver"), &out, janitorBin, args...)
	if err != nil {
		// Exit 4 (some rescues failed) still has a report worth recording.
		if !strings.Contains(err.Error(), "exit status 4") {
			return nil, err
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
		return nil, fmt.Errorf("parse the snapshot report: %w", err)
	}
	res.Created, res.Failed, res.States = rep.Summary.SnapshotsCreated, rep.Summary.Failures, rep.Summary.States
	res.ClaimsPerSecond = float64(res.Created) / res.Run.Wall.Seconds()
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(snapNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if testenv.Ready(&l.Items[i]) {
			res.ReadyAfter++
		}
	}
	res.Env.LoadAfter = loadAvg()
	logf("rescued %d/%d in %s (%.1f claims/s); %d failed; %d snapshots ready", res.Created, res.N,
		res.Run.Wall.Round(time.Millisecond), res.ClaimsPerSecond, res.Failed, res.ReadyAfter)
	return res, nil
}

func renderSnapshot(r *snapshotResult) string {
	var b strings.Builder
	b.WriteString("## Snapshot throughput\n\n")
	r.Env.markdown(&b)
	fmt.Fprintf(&b, "- Full local stack: kube-controller-manager (binder, pvc-protection with the `Unused` condition), snapshot-controller and csi-snapshotter v8.4.0 (client QPS %s), the project's CSI driver.\n", r.ControllerQPS)
	fmt.Fprintf(&b, "- %d orphaned, bound claims (no pod), seeded with `testenv` fixtures in %s; the controller manager marked them all `Unused` within %s more.\n", r.N, dur(r.SeedTime), dur(r.UnusedTime))
	fmt.Fprintf(&b, "- Command: `janitor %s`: it scans and marks, creates one VolumeSnapshot per orphan and waits until every one is `readyToUse`.\n\n", strings.Join(snapshotArgs, " "))
	b.WriteString("| orphans | rescued (ready) | failed | wall, end to end | claims/s | janitor CPU | janitor peak RSS | server CPU | exit |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %d | **%s** | %.1f | %s | %s | %s | %d |\n", r.N, r.Created, r.Failed, dur(r.Run.Wall),
		r.ClaimsPerSecond, dur(r.Run.CPU), mib(r.Run.MaxRSS), dur(r.Run.ServerCPU), r.ExitCode)
	fmt.Fprintf(&b, "\nAfter the run, %d VolumeSnapshots in the namespace were ready.\n", r.ReadyAfter)
	return b.String()
}
