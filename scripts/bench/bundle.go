//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The export and import benchmark (--bundle N, issue 42): N workspaces
// rescued on cluster A are exported, A is stopped, and cluster B, started
// on the same storage folder (testenv.Options.StorageDir), imports them,
// then imports again (a no-op).
const (
	sectionBundle = "bundle"
	bundleNS      = "bench-bundle"
)

// bundleQPS is the janitor's --qps in the bundle runs (burst twice that),
// as in the snapshot throughput run.
const bundleQPS = 100

func bundleRates() []string {
	return []string{"--qps", strconv.Itoa(bundleQPS), "--burst", strconv.Itoa(2 * bundleQPS), "-o", "json", "--log-level", "warn"}
}

func bundleSetupArgs() []string {
	return append([]string{"snapshot", "-n", bundleNS, "-l", appLabel + "=" + appValue, "--workspace-label", workspaceLabel,
		"--min-age", "0s", "--grace-period", "0s", "--snapshot-class", testenv.SnapshotClassDelete, "--concurrency", "32"}, bundleRates()...)
}

func exportArgs(file string) []string {
	return append([]string{"export", file, "-n", bundleNS, "-l", appLabel + "=" + appValue, "--workspace-label", workspaceLabel,
		"--min-age", "0s", "--grace-period", "0s"}, bundleRates()...)
}

func importArgs(file string) []string {
	return append([]string{"import", file, "--workspace-label", workspaceLabel, "--api-timeout", "10m"}, bundleRates()...)
}

// bundleRun is one measured janitor run: its sample, its own requests, its
// exit code and the actions of its report's snapshot entries.
type bundleRun struct {
	Args    []string
	Sample  sample
	Own     map[string]int
	Exit    int
	Actions map[string]int
	Ready   int
}

// bundleResult is the whole benchmark.
type bundleResult struct {
	Env                  envInfo
	N                    int
	SeedTime, RescueTime time.Duration
	Rescued              int
	Export               bundleRun
	Copies, BundleBytes  int
	BStart               time.Duration
	Import, ImportAgain  bundleRun
	// File is the bundle's path, shown as bundle.yaml.
	File string
}

// bundleBench runs --bundle.
func bundleBench(ctx context.Context, o *options, work, janitorBin string) (res *bundleResult, err error) {
	storage := filepath.Join(work, "bundle-storage")
	file := filepath.Join(work, "bundle.yaml")
	res = &bundleResult{N: o.bundleN, File: file}
	a, err := testenv.Start(ctx, testenv.Options{Dir: clusterDir(o, work, "bundle-a"), StorageDir: storage, Progress: os.Stderr})
	if err != nil {
		return nil, err
	}
	stopA := func() error { logf("stopping cluster A"); return a.Stop() }
	defer func() {
		if a != nil {
			_ = stopA()
		}
	}()
	res.Env = collectEnv(ctx, a, "full local stack, twice: cluster A, then cluster B on A's storage")
	fa, err := a.NewFixtures()
	if err != nil {
		return nil, err
	}
	if err := seedRescued(ctx, o, a, fa, janitorBin, res); err != nil {
		return nil, err
	}
	counter, err := startRequestCounter(a.Config, work)
	if err != nil {
		return nil, err
	}
	logf("exporting: janitor %s", strings.Join(exportArgs(file), " "))
	res.Export, err = bundleMeasure(ctx, a, counter, janitorBin, exportArgs(file))
	counter.close()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	b, err := bundle.Decode(raw)
	if err != nil {
		return nil, err
	}
	res.Copies, res.BundleBytes = len(b.Copies), len(raw)
	logf("exported %d copies (%d bytes) in %s", res.Copies, res.BundleBytes, res.Export.Sample.Wall.Round(time.Millisecond))
	if err := stopA(); err != nil {
		return nil, err
	}
	a = nil

	t := time.Now()
	c, err := testenv.Start(ctx, testenv.Options{Dir: clusterDir(o, work, "bundle-b"), StorageDir: storage, Progress: os.Stderr})
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping cluster B")
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	res.BStart = time.Since(t)
	fb, err := c.NewFixtures()
	if err != nil {
		return nil, err
	}
	if err := prepareImport(ctx, fb); err != nil {
		return nil, err
	}
	if counter, err = startRequestCounter(c.Config, work); err != nil {
		return nil, err
	}
	defer counter.close()
	logf("importing: janitor %s", strings.Join(importArgs(file), " "))
	if res.Import, err = bundleMeasure(ctx, c, counter, janitorBin, importArgs(file)); err != nil {
		return nil, err
	}
	logf("imported %v in %s, %d ready", res.Import.Actions, res.Import.Sample.Wall.Round(time.Millisecond), res.Import.Ready)
	if res.ImportAgain, err = bundleMeasure(ctx, c, counter, janitorBin, importArgs(file)); err != nil {
		return nil, err
	}
	logf("imported again: %v in %s", res.ImportAgain.Actions, res.ImportAgain.Sample.Wall.Round(time.Millisecond))
	res.Env.LoadAfter = loadAvg()
	return res, nil
}

func clusterDir(o *options, work, name string) string {
	if o.dir != "" {
		return filepath.Join(o.dir, name)
	}
	return filepath.Join(work, name)
}

// seedRescued creates N bound claims with a file each, waits until each is
// Unused, and rescues them all with one janitor snapshot (Delete class, so
// that the export sets every content to Retain).
func seedRescued(ctx context.Context, o *options, c *testenv.Cluster, f *testenv.Fixtures, janitorBin string, res *bundleResult) error {
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bundleNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	s := &seeder{workers: min(o.workers, 32)}
	t := time.Now()
	err := s.pool(ctx, "bound claims", 0, o.bundleN, func(ctx context.Context, i int) error {
		_, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: bundleNS, Name: claimName(i),
			Labels: map[string]string{appLabel: appValue, workspaceLabel: workspace(i)}})
		if err != nil {
			return err
		}
		return f.WriteVolume(ctx, bundleNS, claimName(i), "notes.txt", []byte(workspace(i)+"'s work\n"))
	})
	if err != nil {
		return err
	}
	err = s.pool(ctx, "Unused conditions", 0, o.bundleN, func(ctx context.Context, i int) error {
		_, err := f.WaitUnused(ctx, bundleNS, claimName(i))
		return err
	})
	if err != nil {
		return err
	}
	res.SeedTime = time.Since(t)
	logf("seeded %d claims in %s; rescuing them", o.bundleN, res.SeedTime.Round(time.Millisecond))
	var out bytes.Buffer
	sm, err := runProc(ctx, componentPID(c.Dir, "kube-apiserver"), &out, janitorBin,
		append([]string{"--kubeconfig", c.Kubeconfig}, bundleSetupArgs()...)...)
	if err != nil {
		return err
	}
	res.RescueTime = sm.Wall
	var rep struct {
		Summary struct {
			SnapshotsCreated int `json:"snapshotsCreated"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("parse the snapshot report: %w", err)
	}
	res.Rescued = rep.Summary.SnapshotsCreated
	logf("rescued %d in %s", res.Rescued, sm.Wall.Round(time.Millisecond))
	return nil
}

// prepareImport makes cluster B ready for the import: the namespace and
// the CSIDriver object of the copies' driver.
func prepareImport(ctx context.Context, f *testenv.Fixtures) error {
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bundleNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	no := false
	_, err := f.Kube.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testenv.DriverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &no,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}, metav1.CreateOptions{})
	return err
}

// bundleMeasure runs the janitor through the request counter and reads its
// report. Any exit but 0 is an error: the benchmark times runs that work.
func bundleMeasure(ctx context.Context, c *testenv.Cluster, counter *requestCounter, janitorBin string, args []string) (bundleRun, error) {
	var out bytes.Buffer
	r := bundleRun{Args: args, Actions: map[string]int{}}
	var err error
	r.Sample, err = runProc(ctx, componentPID(c.Dir, "kube-apiserver"), &out, janitorBin, append([]string{"--kubeconfig", counter.kubeconfig}, args...)...)
	r.Own = counter.take()
	if err != nil {
		return r, err
	}
	var rep struct {
		Snapshots []struct {
			Action     string `json:"action"`
			ReadyToUse bool   `json:"readyToUse"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return r, fmt.Errorf("parse the %s report: %w", args[0], err)
	}
	for _, s := range rep.Snapshots {
		r.Actions[s.Action]++
		if s.ReadyToUse {
			r.Ready++
		}
	}
	return r, nil
}

func renderBundle(r *bundleResult) string {
	var b strings.Builder
	b.WriteString("## Export and import\n\n")
	r.Env.markdownNote(&b, "the request counts below are exact")
	fmt.Fprintf(&b, "- Reproduce: `go run -tags integration ./scripts/bench --sizes '' --bundle %d` (nothing else of the bench runs).\n", r.N)
	fmt.Fprintf(&b, "- Cluster A (full stack, its CSI driver's storage in a folder of its own): %d bound claims, a file written in each, all `Unused` in %s; "+
		"`janitor %s` rescued %d in %s (contents `Delete`).\n", r.N, dur(r.SeedTime), strings.Join(bundleSetupArgs(), " "), r.Rescued, dur(r.RescueTime))
	fmt.Fprintf(&b, "- Then A is stopped and cluster B started on the same storage folder (%s), with the namespace and the driver's CSIDriver object.\n\n", dur(r.BStart))
	b.WriteString("| run | copies | wall | janitor CPU | janitor peak RSS | server CPU | requests | per copy |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(name string, run bundleRun, n int) {
		total := 0
		for _, v := range run.Own {
			total += v
		}
		fmt.Fprintf(&b, "| %s | %d | **%s** | %s | %s | %s | %d | %.2f |\n", name, n, dur(run.Sample.Wall), dur(run.Sample.CPU),
			mib(run.Sample.MaxRSS), dur(run.Sample.ServerCPU), total, float64(total)/float64(max(1, n)))
	}
	row("export on A (contents set to `Retain`, bundle written)", r.Export, r.Export.Actions["exported"])
	row("import on B (created, waited until ready)", r.Import, r.Import.Actions["imported"])
	row("import on B again (no-op)", r.ImportAgain, r.ImportAgain.Actions["already-imported"])
	fmt.Fprintf(&b, "\nThe bundle: %d copies, %d bytes (%d per copy). The first import: %s, %d ready at its end; the second: %s.\n",
		r.Copies, r.BundleBytes, r.BundleBytes/max(1, r.Copies), actions(r.Import.Actions), r.Import.Ready, actions(r.ImportAgain.Actions))
	b.WriteString("\nThe janitor's own API requests (counted by a proxy in front of the API server), by verb and resource, per copy:\n\n")
	args := func(run bundleRun) string {
		return strings.ReplaceAll(strings.Join(run.Args, " "), r.File, "bundle.yaml")
	}
	fmt.Fprintf(&b, "- export (`janitor %s`): %s\n", args(r.Export), perClaim(r.Export.Own, r.Export.Actions["exported"]))
	fmt.Fprintf(&b, "- import (`janitor %s`): %s\n", args(r.Import), perClaim(r.Import.Own, r.Import.Actions["imported"]))
	fmt.Fprintf(&b, "- import again: %s\n", perClaim(r.ImportAgain.Own, r.ImportAgain.Actions["already-imported"]))
	return b.String()
}

// actions renders a report's action counts: "1000 imported, 2 import-failed".
func actions(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
