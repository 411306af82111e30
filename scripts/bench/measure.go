//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// floorURLs are the unpaginated JSON lists of everything `janitor scan -A
// -l app=ide` reads, in the order it reads them: the serving floor is their
// sum, fetched one after another.
var floorURLs = []struct{ name, url string }{
	{"persistentvolumeclaims", "/api/v1/persistentvolumeclaims?labelSelector=" + appLabel + "%3D" + appValue},
	{"persistentvolumes", "/api/v1/persistentvolumes"},
	{"volumeattachments", "/apis/storage.k8s.io/v1/volumeattachments"},
	{"volumesnapshots", "/apis/snapshot.storage.k8s.io/v1/volumesnapshots"},
	{"volumesnapshotcontents", "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents"},
	{"pods", "/api/v1/pods"},
	{"deployments", "/apis/apps/v1/deployments"},
	{"replicasets", "/apis/apps/v1/replicasets"},
	{"daemonsets", "/apis/apps/v1/daemonsets"},
	{"statefulsets", "/apis/apps/v1/statefulsets"},
	{"jobs", "/apis/batch/v1/jobs"},
	{"cronjobs", "/apis/batch/v1/cronjobs"},
}

// sample is one measured run.
type sample struct {
	Wall   time.Duration
	CPU    time.Duration // user+sys of the process
	MaxRSS int64         // KiB
	// ServerCPU is the kube-apiserver's user+sys during the run.
	ServerCPU time.Duration
}

// sizeResult holds the medians of one N.
type sizeResult struct {
	N         int
	Seed      map[string]time.Duration
	SeedTotal time.Duration
	// Objects counts what the lists served.
	Scan, Floor, KubectlGet, InProcess sample
	ScanAll, FloorAll                  []sample
	// FloorPer is the median wall time of each floor URL.
	FloorPer map[string]time.Duration
	// ListBytes is the size of each unpaginated JSON list.
	ListBytes map[string]int64
	States    map[string]int
	Claims    int
	KubectlOK bool
	// KubectlSkipped says why kubectl get was not run at this N.
	KubectlSkipped string
	// ServerRSS is the kube-apiserver's resident memory after the run (KiB).
	ServerRSS int64
}

// scaleResult is the whole scale benchmark.
type scaleResult struct {
	Env       envInfo
	Sizes     []sizeResult
	Reps      int
	KubeReps  int
	ScanArgs  []string
	PodBytes  int // one pod as served, JSON
	PodBytesN int // the same without managedFields
	LoadAfter string
	Contents  bool
}

func scale(ctx context.Context, o *options, work, janitorBin string) (res *scaleResult, err error) {
	c, err := startCluster(ctx, o.dir, work, "scale", true)
	if err != nil {
		return nil, err
	}
	defer func() {
		logf("stopping the cluster")
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	res = &scaleResult{Env: collectEnv(ctx, c, "minimal local control plane: etcd + kube-apiserver, no controllers"), Reps: o.reps, KubeReps: o.kubectlGetReps, ScanArgs: o.scanArgs, Contents: o.withContents}
	apiserverPID := componentPID(c.Dir, "kube-apiserver")
	s, err := newSeeder(c.Config, o.workers, o.withContents)
	if err != nil {
		return nil, err
	}
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	for _, n := range o.sizes {
		sr := sizeResult{N: n}
		t := time.Now()
		logf("seeding to N=%d", n)
		if sr.Seed, err = s.seedTo(ctx, n); err != nil {
			return nil, err
		}
		sr.SeedTotal = time.Since(t)
		if res.PodBytes == 0 {
			res.PodBytes, res.PodBytesN, err = podSize(ctx, c.Config)
			if err != nil {
				return nil, err
			}
		}
		sr.KubectlSkipped = kubectlGetGuard(res.Sizes, n)
		if err := measureSize(ctx, o, c, janitorBin, apiserverPID, &sr); err != nil {
			return nil, err
		}
		sr.ServerRSS = procRSS(apiserverPID)
		res.Sizes = append(res.Sizes, sr)
		logf("N=%d: scan %s (cpu %s, rss %d MiB), floor %s, ratio %.2f; kubectl get %s (rss %d MiB)", n,
			sr.Scan.Wall.Round(time.Millisecond), sr.Scan.CPU.Round(time.Millisecond), sr.Scan.MaxRSS/1024,
			sr.Floor.Wall.Round(time.Millisecond), ratio(sr.Scan.Wall, sr.Floor.Wall),
			sr.KubectlGet.Wall.Round(time.Millisecond), sr.KubectlGet.MaxRSS/1024)
	}
	res.Env.LoadAfter = loadAvg()
	if o.hold {
		logf("holding the cluster: export KUBECONFIG=%s ; SIGINT to stop", c.Kubeconfig)
		<-ctx.Done()
		return res, nil
	}
	return res, nil
}

// measureSize runs the three measurements reps times, interleaved (scan,
// floor, kubectl get, scan, ...) so that a burst of load from elsewhere hits
// all of them alike, after one unrecorded warm-up of each that also checks
// the results.
func measureSize(ctx context.Context, o *options, c *testenv.Cluster, janitorBin string, apiPID int, sr *sizeResult) error {
	// --min-age 0s: the fleet was seeded seconds ago, a real one is older
	// than the 10m default; without it half the claims would stop at Young
	// and skip the rest of classification.
	m := &sizeRun{ctx: ctx, o: o, c: c, janitorBin: janitorBin, apiPID: apiPID, sr: sr, per: map[string][]time.Duration{},
		scanArgs: append([]string{"scan", "--kubeconfig", c.Kubeconfig, "--dry-run", "-o", "json", "-A",
			"-l", appLabel + "=" + appValue, "--workspace-label", workspaceLabel, "--min-age", "0s", "--log-level", "warn"}, o.scanArgs...)}
	if err := m.warmUp(); err != nil {
		return err
	}
	for rep := 0; rep < o.reps; rep++ {
		if err := m.rep(rep); err != nil {
			return err
		}
	}
	sr.ScanAll, sr.FloorAll = m.scans, m.floors
	sr.Scan, sr.Floor, sr.InProcess = median(m.scans), median(m.floors), median(m.inproc)
	if len(m.gets) > 0 {
		sr.KubectlGet = median(m.gets)
	}
	sr.FloorPer = map[string]time.Duration{}
	for k, v := range m.per {
		sr.FloorPer[k] = medianDur(v)
	}
	return nil
}

// sizeRun is one size's measurements in progress.
type sizeRun struct {
	ctx                         context.Context
	o                           *options
	c                           *testenv.Cluster
	janitorBin                  string
	apiPID                      int
	sr                          *sizeResult
	scanArgs                    []string
	scans, floors, gets, inproc []sample
	per                         map[string][]time.Duration
}

// warmUp runs one unrecorded scan, checks its report, and measures each
// list's size.
func (m *sizeRun) warmUp() error {
	sr := m.sr
	logf("N=%d: warm-up scan", sr.N)
	var out bytes.Buffer
	if _, err := runProc(m.ctx, m.apiPID, &out, m.janitorBin, m.scanArgs...); err != nil {
		return err
	}
	var rep struct {
		Summary struct {
			Claims int            `json:"claims"`
			States map[string]int `json:"states"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return fmt.Errorf("parse the scan report: %w", err)
	}
	if rep.Summary.Claims != sr.N {
		return fmt.Errorf("scan saw %d claims, want %d", rep.Summary.Claims, sr.N)
	}
	sr.Claims, sr.States = rep.Summary.Claims, rep.Summary.States
	sr.ListBytes = map[string]int64{}
	for _, u := range floorURLs {
		cw := &countWriter{}
		if _, err := runProc(m.ctx, m.apiPID, cw, m.c.Bin.Kubectl, "--kubeconfig", m.c.Kubeconfig, "get", "--raw", u.url); err != nil {
			return err
		}
		sr.ListBytes[u.name] = cw.n
	}
	return nil
}

// rep is one repetition: a scan, the floor, the in-process floor and,
// while asked for, kubectl get.
func (m *sizeRun) rep(rep int) error {
	logf("N=%d: rep %d/%d", m.sr.N, rep+1, m.o.reps)
	s, err := runProc(m.ctx, m.apiPID, nil, m.janitorBin, m.scanArgs...)
	if err != nil {
		return err
	}
	m.scans = append(m.scans, s)
	var f sample
	before := procCPU(m.apiPID)
	for _, u := range floorURLs {
		one, err := runProc(m.ctx, 0, nil, m.c.Bin.Kubectl, "--kubeconfig", m.c.Kubeconfig, "get", "--raw", u.url)
		if err != nil {
			return err
		}
		m.per[u.name] = append(m.per[u.name], one.Wall)
		f.Wall += one.Wall
		f.CPU += one.CPU
		f.MaxRSS = max(f.MaxRSS, one.MaxRSS)
	}
	f.ServerCPU = procCPU(m.apiPID) - before
	m.floors = append(m.floors, f)
	ip, err := inProcessFloor(m.ctx, m.c.Config, m.apiPID)
	if err != nil {
		return err
	}
	m.inproc = append(m.inproc, ip)
	if rep < m.o.kubectlGetReps && m.sr.KubectlSkipped == "" {
		g, err := runProc(m.ctx, m.apiPID, nil, m.c.Bin.Kubectl, "--kubeconfig", m.c.Kubeconfig, "get",
			"pvc,pods,volumesnapshots", "-A", "-o", "json")
		if err != nil {
			return err
		}
		m.gets = append(m.gets, g)
		m.sr.KubectlOK = true
	}
	return nil
}

// inProcessFloor fetches the same lists as the floor from this process (no
// kubectl start-up per list): the API server's own serving time plus the
// transfer.
func inProcessFloor(ctx context.Context, cfg *rest.Config, apiPID int) (sample, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return sample{}, err
	}
	rc := cs.Discovery().RESTClient()
	before := procCPU(apiPID)
	start := time.Now()
	for _, u := range floorURLs {
		path, query, _ := strings.Cut(u.url, "?")
		req := rc.Get().AbsPath(path).SetHeader("Accept", "application/json")
		if query != "" {
			k, v, _ := strings.Cut(query, "=")
			v = strings.ReplaceAll(v, "%3D", "=")
			req = req.Param(k, v)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return sample{}, fmt.Errorf("GET %s: %w", u.url, err)
		}
		_, err = io.Copy(io.Discard, body)
		body.Close()
		if err != nil {
			return sample{}, fmt.Errorf("GET %s: %w", u.url, err)
		}
	}
	return sample{Wall: time.Since(start), ServerCPU: procCPU(apiPID) - before}, nil
}

// rssWrap is scripts/bench/rsswrap, built beside the janitor: every
// measured program runs under it (see its doc: a child of the bench itself
// would report the bench's peak RSS).
var rssWrap string

// runProc runs a program under rssWrap with stdout to out (/dev/null when
// nil) and returns its wall time, CPU time and peak RSS, as the wrapper
// measured them. apiPID, when not 0, is the kube-apiserver whose CPU time
// during the run is recorded.
func runProc(ctx context.Context, apiPID int, out io.Writer, name string, args ...string) (sample, error) {
	results, w, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer results.Close()
	cmd := exec.CommandContext(ctx, rssWrap, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	cmd.ExtraFiles = []*os.File{w}
	if out != nil {
		cmd.Stdout = out
	} // else: os/exec connects /dev/null
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	before := procCPU(apiPID)
	err = cmd.Run()
	w.Close()
	var s sample
	if apiPID != 0 {
		s.ServerCPU = procCPU(apiPID) - before
	}
	var rss, user, sys, wall int64
	if _, serr := fmt.Fscan(results, &rss, &user, &sys, &wall); serr != nil && err == nil {
		err = fmt.Errorf("rsswrap reported nothing: %w", serr)
	}
	s.Wall, s.CPU, s.MaxRSS = time.Duration(wall), time.Duration(user+sys), rss
	if err != nil {
		return s, fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return s, nil
}

// kubectlGetGuard refuses to run `kubectl get -o json` at size n when its
// peak RSS, extrapolated linearly from the largest size measured so far,
// would take more than half of the memory available now: it grows by about
// 240 KiB per pod, and on a shared machine the OOM killer would pick
// someone else's process as easily as kubectl.
func kubectlGetGuard(done []sizeResult, n int) string {
	var last *sizeResult
	for i := range done {
		if done[i].KubectlOK {
			last = &done[i]
		}
	}
	if last == nil {
		return ""
	}
	est := last.KubectlGet.MaxRSS * int64(n) / int64(last.N)
	avail := memAvailable()
	if avail > 0 && est > avail/2 {
		return fmt.Sprintf("skipped: its peak RSS would be about %s (%s at N=%s, linear), over half of the %s available",
			gib(est), mib(last.KubectlGet.MaxRSS), kn(last.N), gib(avail))
	}
	return ""
}

// memAvailable is MemAvailable from /proc/meminfo, in KiB.
func memAvailable() int64 {
	return meminfo("MemAvailable:")
}

func meminfo(key string) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			f := strings.Fields(strings.TrimPrefix(line, key))
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// procRSS is a process's VmRSS in KiB (0 if unknown).
func procRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(strings.TrimPrefix(line, "VmRSS:"))
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

func gib(kib int64) string { return fmt.Sprintf("%.1f GiB", float64(kib)/(1<<20)) }

// podSize is the size of one seeded pod as the API server serves it, with
// and without managedFields.
func podSize(ctx context.Context, cfg *rest.Config) (int, int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, 0, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().Namespace(benchNS).Resource("pods").Name("ide-000000").
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return 0, 0, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, 0, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	b, _ := json.Marshal(m)
	return len(raw), len(b), nil
}

// componentPIDs reads the cluster folder's pid file: each component's PID
// by name.
func componentPIDs(dir string) map[string]int {
	out := map[string]int{}
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, p, ok := strings.Cut(line, " "); ok {
			if pid, err := strconv.Atoi(p); err == nil {
				out[n] = pid
			}
		}
	}
	return out
}

// componentPID is one component's PID (0: not in the pid file).
func componentPID(dir, name string) int { return componentPIDs(dir)[name] }

// procCPU is a process's user+sys time from /proc (0 if unknown).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// After the command: state(0) ... utime(11) stime(12), in clock ticks
	// (100 Hz on Linux).
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func median(ss []sample) sample {
	if len(ss) == 0 {
		return sample{}
	}
	pick := func(get func(sample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = get(s)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return sample{
		Wall:      time.Duration(pick(func(s sample) int64 { return int64(s.Wall) })),
		CPU:       time.Duration(pick(func(s sample) int64 { return int64(s.CPU) })),
		MaxRSS:    pick(func(s sample) int64 { return s.MaxRSS }),
		ServerCPU: time.Duration(pick(func(s sample) int64 { return int64(s.ServerCPU) })),
	}
}

func medianDur(v []time.Duration) time.Duration {
	ss := make([]sample, len(v))
	for i, d := range v {
		ss[i].Wall = d
	}
	return median(ss).Wall
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// buildJanitor builds cmd/janitor as `make build` does.
func buildJanitor(ctx context.Context, root, out string) error {
	rssWrap = filepath.Join(filepath.Dir(out), "rsswrap")
	for pkg, bin := range map[string]string{"./cmd/janitor": out, "./scripts/bench/rsswrap": rssWrap} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, b)
		}
	}
	return nil
}
