//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// sectionFleet is the fleet benchmark's section of the results file.
const sectionFleet = "fleet"

// fleetResult is the fleet benchmark: two clusters of N claims each, the
// scan of each alone and the fleet scan of both, on the same servers.
type fleetResult struct {
	Env  envInfo
	N    int
	Reps int
	Seed time.Duration
	// A, B are the single-cluster scans; Fleet the scan of both.
	A, B, Fleet          sample
	AAll, BAll, FleetAll []sample
	FleetClaims          int
}

// fleetBench starts two minimal control planes, seeds N claims (and the
// scale benchmark's pods, snapshots and workloads) into each, concurrently,
// and measures interleaved: scan of a, scan of b, fleet scan of a and b.
func fleetBench(ctx context.Context, o *options, work, janitorBin string) (res *fleetResult, err error) {
	var clusters []*testenv.Cluster
	defer func() {
		for _, c := range clusters {
			logf("stopping %s", c.Dir)
			if serr := c.Stop(); serr != nil && err == nil {
				err = serr
			}
		}
	}()
	for _, name := range []string{"fleet-a", "fleet-b"} {
		c, err := startCluster(ctx, o.dir, work, name, true)
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	res = &fleetResult{N: o.fleetN, Reps: o.reps,
		Env: collectEnv(ctx, clusters[0], "two minimal local control planes on this machine: etcd + kube-apiserver each, no controllers")}
	start := time.Now()
	if err := seedBoth(ctx, o, clusters); err != nil {
		return nil, err
	}
	res.Seed = time.Since(start)
	logf("seeded both clusters to N=%d in %s", o.fleetN, res.Seed.Round(time.Second))
	kc, err := writeFleetKubeconfig(work, map[string]*testenv.Cluster{"a": clusters[0], "b": clusters[1]})
	if err != nil {
		return nil, err
	}
	scan := func(contexts string) []string {
		return append([]string{"scan", "--kubeconfig", kc, "--context", contexts, "--dry-run", "-o", "json", "-A",
			"-l", appLabel + "=" + appValue, "--workspace-label", workspaceLabel, "--min-age", "0s", "--log-level", "warn"}, o.scanArgs...)
	}
	if res.FleetClaims, err = fleetWarmUp(ctx, o, janitorBin, scan); err != nil {
		return nil, err
	}
	if err := fleetReps(ctx, o, janitorBin, clusters, scan, res); err != nil {
		return nil, err
	}
	res.A, res.B, res.Fleet = median(res.AAll), median(res.BAll), median(res.FleetAll)
	res.Env.LoadAfter = loadAvg()
	logf("fleet N=%d: a %s, b %s, fleet %s (%.2fx the sum); rss a %d, b %d, fleet %d MiB", o.fleetN,
		res.A.Wall.Round(time.Millisecond), res.B.Wall.Round(time.Millisecond), res.Fleet.Wall.Round(time.Millisecond),
		ratio(res.Fleet.Wall, res.A.Wall+res.B.Wall), res.A.MaxRSS/1024, res.B.MaxRSS/1024, res.Fleet.MaxRSS/1024)
	return res, nil
}

// fleetReps measures, reps times, the scan of a, of b and of both, with
// the two kube-apiservers' CPU time: what a scan costs the servers, which
// share this machine's CPUs with each other and the janitor.
func fleetReps(ctx context.Context, o *options, janitorBin string, clusters []*testenv.Cluster, scan func(string) []string, res *fleetResult) error {
	pids := []int{componentPID(clusters[0].Dir, "kube-apiserver"), componentPID(clusters[1].Dir, "kube-apiserver")}
	serversCPU := func() time.Duration { return procCPU(pids[0]) + procCPU(pids[1]) }
	for rep := 0; rep < o.reps; rep++ {
		logf("fleet N=%d: rep %d/%d", o.fleetN, rep+1, o.reps)
		for _, m := range []struct {
			contexts string
			into     *[]sample
		}{{"a", &res.AAll}, {"b", &res.BAll}, {"a,b", &res.FleetAll}} {
			before := serversCPU()
			s, err := runProc(ctx, 0, nil, janitorBin, scan(m.contexts)...)
			if err != nil {
				return err
			}
			s.ServerCPU = serversCPU() - before
			*m.into = append(*m.into, s)
		}
	}
	return nil
}

// seedBoth seeds N claims (and the scale benchmark's pods, snapshots and
// workloads) into each cluster, concurrently.
func seedBoth(ctx context.Context, o *options, clusters []*testenv.Cluster) error {
	var wg sync.WaitGroup
	errs := make([]error, len(clusters))
	for i, c := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := newSeeder(c.Config, o.workers/2, o.withContents)
			if err == nil {
				err = s.setup(ctx)
			}
			if err == nil {
				_, err = s.seedTo(ctx, o.fleetN)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// fleetWarmUp scans each cluster and both once, unrecorded, and checks that
// each cluster's claims are in the fleet report once; it returns the fleet
// scan's claims.
func fleetWarmUp(ctx context.Context, o *options, janitorBin string, scan func(string) []string) (int, error) {
	fleetClaims := 0
	// Warm-up and checks: each cluster's claims once, in the fleet report.
	for _, c := range []struct {
		contexts string
		want     int
	}{{"a", o.fleetN}, {"b", o.fleetN}, {"a,b", 2 * o.fleetN}} {
		var out bytes.Buffer
		if _, err := runProc(ctx, 0, &out, janitorBin, scan(c.contexts)...); err != nil {
			return 0, err
		}
		var rep struct {
			Summary struct{ Claims int } `json:"summary"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			return 0, fmt.Errorf("parse the scan report of %s: %w", c.contexts, err)
		}
		if rep.Summary.Claims != c.want {
			return 0, fmt.Errorf("scan of %s saw %d claims, want %d", c.contexts, rep.Summary.Claims, c.want)
		}
		if c.contexts == "a,b" {
			fleetClaims = rep.Summary.Claims
		}
	}
	return fleetClaims, nil
}

// writeFleetKubeconfig writes one kubeconfig with a context per cluster.
func writeFleetKubeconfig(work string, clusters map[string]*testenv.Cluster) (string, error) {
	out := clientcmdapi.NewConfig()
	for name, c := range clusters {
		in, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			return "", err
		}
		cur := in.Contexts[in.CurrentContext]
		out.Clusters[name], out.AuthInfos[name] = in.Clusters[cur.Cluster], in.AuthInfos[cur.AuthInfo]
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		out.CurrentContext = name
	}
	path := filepath.Join(work, "fleet-kubeconfig")
	return path, clientcmd.WriteToFile(*out, path)
}

// renderFleet is the fleet section of docs/benchmarks.md.
func renderFleet(r *fleetResult) string {
	var b strings.Builder
	b.WriteString("## Fleets\n\n")
	r.Env.markdown(&b)
	sum := r.A.Wall + r.B.Wall
	rssSum := r.A.MaxRSS + r.B.MaxRSS
	wallOK := ratio(r.Fleet.Wall, sum) <= 0.8
	rssOK := r.Fleet.MaxRSS <= rssSum
	fmt.Fprintf(&b, "- Two clusters, a and b, each seeded as the scale benchmark seeds N=%s (claims, PVs, pods, snapshots and contents, workloads), both at once: %s. Both control planes run on this machine and compete for its %d CPUs, also with the janitor.\n",
		kn(r.N), dur(r.Seed), r.Env.CPUs)
	fmt.Fprintf(&b, "- Medians of %d interleaved repetitions (scan a, scan b, fleet scan), after one unrecorded warm-up that checks the claim counts (the fleet report: %d claims, each cluster's once).\n", r.Reps, r.FleetClaims)
	b.WriteString("- **scan a**, **scan b**: `janitor scan --context a` (resp. b) `--dry-run -o json -A -l app=ide --workspace-label workspace-id --min-age 0s`; **fleet scan**: the same with `--context a,b` (`--cluster-concurrency` 4: both at once). Subprocesses, stdout to /dev/null; RSS is the peak (getrusage of a child of scripts/bench/rsswrap).\n\n")
	b.WriteString("| | scan a | scan b | a + b | fleet scan | fleet / (a + b) |\n|---|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| wall | %s | %s | %s | **%s** | **%.2f** (target ≤ 0.80: %s) |\n", dur(r.A.Wall), dur(r.B.Wall), dur(sum), dur(r.Fleet.Wall),
		ratio(r.Fleet.Wall, sum), verdict(wallOK))
	fmt.Fprintf(&b, "| CPU | %s | %s | %s | %s | %.2f |\n", dur(r.A.CPU), dur(r.B.CPU), dur(r.A.CPU+r.B.CPU), dur(r.Fleet.CPU), ratio(r.Fleet.CPU, r.A.CPU+r.B.CPU))
	fmt.Fprintf(&b, "| servers' CPU | %s | %s | %s | %s | %.2f |\n", dur(r.A.ServerCPU), dur(r.B.ServerCPU), dur(r.A.ServerCPU+r.B.ServerCPU), dur(r.Fleet.ServerCPU),
		ratio(r.Fleet.ServerCPU, r.A.ServerCPU+r.B.ServerCPU))
	fmt.Fprintf(&b, "| peak RSS | %s | %s | %s | **%s** | **%.2f** (target ≤ 1.00: %s) |\n\n", mib(r.A.MaxRSS), mib(r.B.MaxRSS), mib(rssSum), mib(r.Fleet.MaxRSS),
		float64(r.Fleet.MaxRSS)/float64(max(rssSum, 1)), verdict(rssOK))
	// What bounds the fleet scan: the CPU it needs (the janitor's and both
	// servers') over the machine's CPUs, when nothing else runs.
	need := r.Fleet.CPU + r.Fleet.ServerCPU
	fmt.Fprintf(&b, "The fleet scan needs %s of CPU (janitor %s, servers %s): on %d CPUs that alone is at least %s of wall time, %.2f of the two scans' sum, before any other work on the machine takes its share.\n\n",
		dur(need), dur(r.Fleet.CPU), dur(r.Fleet.ServerCPU), r.Env.CPUs, dur(need/time.Duration(max(r.Env.CPUs, 1))),
		ratio(need/time.Duration(max(r.Env.CPUs, 1)), sum))
	b.WriteString("Every repetition (a / b / fleet, wall):\n\n")
	for i := range r.FleetAll {
		fmt.Fprintf(&b, "- %s / %s / %s\n", dur(r.AAll[i].Wall), dur(r.BAll[i].Wall), dur(r.FleetAll[i].Wall))
	}
	return b.String()
}
