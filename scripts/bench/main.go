//go:build integration

// Command bench is `make bench`: it starts the local control plane, seeds a
// workspace fleet of N claims, N pods, N/2 snapshots and a few hundred
// workloads, and measures `janitor scan` against the API server's serving
// floor and against what an operator would otherwise run (kubectl get -o
// json), for each N, in the same run and against the same server. With
// --snapshot-throughput it also rescues that many orphans end to end through
// the real snapshot pipeline. Results go to docs/benchmarks.md.
//
//	go run -tags integration ./scripts/bench                                   # N = 10k, 50k; 3 reps
//	go run -tags integration ./scripts/bench --sizes 10000,50000,100000        # 100k too (seeding ~25 min on 2 cores)
//	go run -tags integration ./scripts/bench --sizes '' --snapshot-throughput 1000
//	go run -tags integration ./scripts/bench --sizes 10000 --snapshot-throughput 10000 --snapshot-pods 10000   # issue 43: rescue and reap of 10k beside 10k pods, with the floors
//	go run -tags integration ./scripts/bench --sizes '' --fleet 10000                # two clusters of 10k: fleet scan vs two scans
//	go run -tags integration ./scripts/bench --sizes '' --bundle 1000                # export on one cluster, import on the next
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// options are the flags.
type options struct {
	sizes          []int
	reps           int
	kubectlGetReps int
	out            string
	workers        int
	snapshotN      int
	snapshotQPS    int
	snapshotPods   int
	snapshotFloors bool
	scanArgs       []string
	dir            string
	hold           bool
	withContents   bool
	fleetN         int
	bundleN        int
}

func main() { os.Exit(run()) }

func run() int {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		if ctx.Err() != nil {
			return 130
		}
		return 1
	}
	return 0
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	sizes := fs.String("sizes", "10000,50000", "comma-separated fleet sizes N, ascending (seeding is incremental); '' skips the scale benchmark")
	o := &options{}
	fs.IntVar(&o.reps, "reps", 3, "repetitions per measurement (medians are reported)")
	fs.IntVar(&o.kubectlGetReps, "kubectl-get-reps", 0, "repetitions of `kubectl get pvc,pods,volumesnapshots -o json` (0: --reps; -1: skip; it takes minutes and GiBs at 100k)")
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "markdown file to write the results into (its other section is kept)")
	fs.IntVar(&o.workers, "workers", 64, "concurrent creates while seeding")
	fs.IntVar(&o.snapshotN, "snapshot-throughput", 0, "also rescue this many orphaned claims end to end on a full stack (0: skip)")
	fs.IntVar(&o.snapshotQPS, "snapshot-qps", 100, "the janitor's --qps in the snapshot throughput run (burst is twice that)")
	fs.IntVar(&o.snapshotPods, "snapshot-pods", 0, "seed this many workspace pods (none using a claim) in the snapshot run's namespace: every pod list of the rescue and the reap reads them")
	fs.BoolVar(&o.snapshotFloors, "snapshot-floors", true, "measure the floors beside the snapshot run on as many more claims: the snapshot controller's own throughput, and kubectl delete of the claims")
	scanArgs := fs.String("scan-args", "", "extra arguments for `janitor scan` (experiments; recorded in the results)")
	fs.StringVar(&o.dir, "dir", "", "cluster folder (default: a temporary folder, removed at the end)")
	fs.BoolVar(&o.hold, "hold", false, "after measuring, keep the scale cluster up until SIGINT (to profile against it)")
	fs.IntVar(&o.fleetN, "fleet", 0, "also seed two clusters of this many claims each and compare the fleet scan of both with the two single scans (0: skip)")
	fs.IntVar(&o.bundleN, "bundle", 0, "also export this many rescued workspaces on one cluster and import them on a second on the same storage (0: skip)")
	fs.BoolVar(&o.withContents, "contents", true, "seed one VolumeSnapshotContent per snapshot (a ready snapshot always has one)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*sizes, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		if err != nil || n < 2 {
			return nil, fmt.Errorf("--sizes: %q is not a size >= 2", s)
		}
		if len(o.sizes) > 0 && n <= o.sizes[len(o.sizes)-1] {
			return nil, fmt.Errorf("--sizes must be ascending")
		}
		o.sizes = append(o.sizes, n)
	}
	if o.reps < 1 {
		return nil, errors.New("--reps must be at least 1")
	}
	if o.kubectlGetReps == 0 {
		o.kubectlGetReps = o.reps
	}
	if o.workers < 1 {
		return nil, errors.New("--workers must be at least 1")
	}
	if *scanArgs != "" {
		o.scanArgs = strings.Fields(*scanArgs)
	}
	if len(o.sizes) == 0 && o.snapshotN == 0 && o.fleetN == 0 && o.bundleN == 0 {
		return nil, errors.New("nothing to do: --sizes is empty and --snapshot-throughput, --fleet and --bundle are 0")
	}
	return o, nil
}

func bench(ctx context.Context, o *options) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	if !filepath.IsAbs(o.out) {
		o.out = filepath.Join(root, o.out)
	}
	work, err := os.MkdirTemp("", "pvc-janitor-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	logf("building janitor")
	janitorBin := filepath.Join(work, "janitor")
	if err := buildJanitor(ctx, root, janitorBin); err != nil {
		return err
	}
	if len(o.sizes) > 0 {
		res, err := scale(ctx, o, work, janitorBin)
		if err != nil {
			return err
		}
		if err := writeSection(o.out, sectionScale, renderScale(res)); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if o.fleetN > 0 {
		res, err := fleetBench(ctx, o, work, janitorBin)
		if err != nil {
			return err
		}
		if err := writeSection(o.out, sectionFleet, renderFleet(res)); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if o.bundleN > 0 {
		res, err := bundleBench(ctx, o, work, janitorBin)
		if err != nil {
			return err
		}
		if err := writeSection(o.out, sectionBundle, renderBundle(res)); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	if o.snapshotN > 0 {
		res, err := snapshotThroughput(ctx, o, work, janitorBin)
		if err != nil {
			return err
		}
		if err := writeSection(o.out, sectionSnapshot, renderSnapshot(res)); err != nil {
			return err
		}
		logf("wrote %s", o.out)
	}
	return nil
}

// startCluster starts a local control plane in dir (a fresh folder under
// work when dir is empty). The caller stops it.
func startCluster(ctx context.Context, dir, work, name string, minimal bool) (*testenv.Cluster, error) {
	if dir == "" {
		dir = filepath.Join(work, name)
	} else {
		dir = filepath.Join(dir, name)
	}
	return testenv.Start(ctx, testenv.Options{Dir: dir, Minimal: minimal, Progress: os.Stderr})
}

var benchStart = time.Now()

// logf prints one progress line to stderr.
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[bench %6.1fs] %s\n", time.Since(benchStart).Seconds(), fmt.Sprintf(format, a...))
}
