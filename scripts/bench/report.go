//go:build integration

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// envInfo describes where and when a benchmark ran.
type envInfo struct {
	CPUs       int
	CPUModel   string
	MemGiB     float64
	GoVersion  string
	Kubernetes string
	Date       time.Time
	LoadBefore string
	LoadAfter  string
	// Source is the janitor's source: `git describe --always --dirty`.
	Source string
	// Stack says which local control plane ran.
	Stack string
}

func collectEnv(ctx context.Context, c *testenv.Cluster, stack string) envInfo {
	e := envInfo{Stack: stack, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Date: time.Now().UTC(), LoadBefore: loadAvg(), Source: "an unknown commit"}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		e.Source = "`" + strings.TrimSpace(string(out)) + "`"
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%f", &kb)
			}
		}
		e.MemGiB = kb / (1 << 20)
	}
	if cs, err := kubernetes.NewForConfig(c.Config); err == nil {
		if v, err := cs.Discovery().ServerVersion(); err == nil {
			e.Kubernetes = v.GitVersion
		}
	}
	return e
}

// loadAvg is `uptime`'s load averages (1, 5, 15 minutes).
func loadAvg() string {
	out, err := exec.Command("uptime").Output()
	if err != nil {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], ", ")
	}
	s := strings.TrimSpace(string(out))
	if _, after, ok := strings.Cut(s, "load average:"); ok {
		return strings.TrimSpace(after)
	}
	return s
}

// busy reports whether a load average string shows more runnable work than
// the machine has cores, on any of the three windows.
func busy(load string, cpus int) bool {
	for _, f := range strings.Split(load, ",") {
		var v float64
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%f", &v); err == nil && v > float64(cpus)*0.75 {
			return true
		}
	}
	return false
}

func (e envInfo) markdown(b *strings.Builder) {
	e.markdownNote(b, "the ratios, taken on the same server in interleaved repetitions, are the comparable part")
}

// markdownNote writes the run's environment; note says what stays
// comparable when the machine was busy.
func (e envInfo) markdownNote(b *strings.Builder, note string) {
	fmt.Fprintf(b, "- Machine: %d CPUs (%s), %.1f GiB memory\n", e.CPUs, e.CPUModel, e.MemGiB)
	fmt.Fprintf(b, "- Go %s, Kubernetes %s (%s), janitor built from %s\n", strings.TrimPrefix(e.GoVersion, "go"), e.Kubernetes, e.Stack, e.Source)
	fmt.Fprintf(b, "- Date: %s\n", e.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "- Load average (1, 5, 15 min): %s before, %s after", e.LoadBefore, e.LoadAfter)
	if busy(e.LoadBefore, e.CPUs) || busy(e.LoadAfter, e.CPUs) {
		b.WriteString(" — **a shared machine**: other work ran beside the benchmark, so the absolute figures are pessimistic; " + note)
	}
	b.WriteString("\n")
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f s", d.Seconds())
	}
}

func mib(kib int64) string {
	if kib == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f MiB", float64(kib)/1024)
}

func kn(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func renderScale(r *scaleResult) string {
	var b strings.Builder
	b.WriteString("## Scan at scale\n\n")
	scaleIntro(&b, r)
	scaleTable(&b, r)
	scaleDetails(&b, r)
	scaleSeeding(&b, r)
	scaleTargets(&b, r)
	return b.String()
}

// scaleIntro writes the method: the fleet, the repetitions and what each column measures.
func scaleIntro(b *strings.Builder, r *scaleResult) {
	r.Env.markdown(b)
	fmt.Fprintf(b, "- Fleet per N, in one namespace: N claims (Bound, `app=ide`, `%s`) and their N CSI PVs, N pods (half of them mount a claim; %d bytes of JSON each as served, %d without managedFields), N/2 ready VolumeSnapshots", workspaceLabel, r.PodBytes, r.PodBytesN)
	if r.Contents {
		b.WriteString(" with their VolumeSnapshotContents")
	}
	fmt.Fprintf(b, ", %d Deployments, %d StatefulSets and %d Jobs. Seeded incrementally from one N to the next.\n", workloadsPerKind, workloadsPerKind, workloadsPerKind)
	fmt.Fprintf(b, "- Medians of %d interleaved repetitions (`kubectl get -o json`: %d), after one unrecorded warm-up.\n", r.Reps, min(r.KubeReps, r.Reps))
	scan := "`janitor scan --dry-run -o json -A -l app=ide --workspace-label " + workspaceLabel + " --min-age 0s`"
	if len(r.ScanArgs) > 0 {
		scan += " + `" + strings.Join(r.ScanArgs, " ") + "`"
	}
	fmt.Fprintf(b, "- **scan**: %s, a subprocess of a `go build -trimpath -ldflags '-s -w'` binary, stdout to /dev/null; CPU is user+sys, RSS the scan's own peak (getrusage of a child of `scripts/bench/rsswrap`; see below). `--min-age 0s` because the fleet is seconds old (a real one is older than the 10m default), so that no claim stops at `Young`; all other flags are the defaults (`--qps 50 --burst 100 --page-size 0`: one streamed response per list).\n", scan)
	b.WriteString("- **floor**: the issue's serving floor: one `kubectl get --raw <list>` per resource the scan reads (claims, pods, PVs, VolumeAttachments, VolumeSnapshots, VolumeSnapshotContents and the six workload kinds; unpaginated JSON), one after another, to /dev/null. It includes kubectl's start-up, about 12 × 40-80 ms.\n")
	b.WriteString("- **in-process floor**: the same twelve lists fetched one after another by the benchmark's own HTTP client (no process start-up): the API server's serving time plus transfer.\n")
	b.WriteString("- **kubectl get**: `kubectl get pvc,pods,volumesnapshots -A -o json` to /dev/null, what an operator would otherwise run.\n")
	b.WriteString("- **server CPU**: kube-apiserver's user+sys time during the run (from /proc): what the run costs the API server.\n\n")

}

// scaleTable writes the table of every N, and the sizes kubectl get was skipped at.
func scaleTable(b *strings.Builder, r *scaleResult) {
	b.WriteString("| N | seed | scan wall | scan CPU | scan peak RSS | server CPU (scan) | floor (kubectl --raw) | server CPU (floor) | scan / floor | in-process floor | scan / in-process | kubectl get wall | kubectl get RSS |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Sizes {
		get, getRSS := "–", "–"
		if s.KubectlSkipped != "" {
			get, getRSS = "skipped¹", "–"
		}
		if s.KubectlOK {
			get, getRSS = dur(s.KubectlGet.Wall), mib(s.KubectlGet.MaxRSS)
		}
		fmt.Fprintf(b, "| %s | %s | **%s** | %s | **%s** | %s | %s | %s | **%.2f** | %s | %.2f | %s | %s |\n",
			kn(s.N), dur(s.SeedTotal), dur(s.Scan.Wall), dur(s.Scan.CPU), mib(s.Scan.MaxRSS), dur(s.Scan.ServerCPU),
			dur(s.Floor.Wall), dur(s.Floor.ServerCPU), ratio(s.Scan.Wall, s.Floor.Wall),
			dur(s.InProcess.Wall), ratio(s.Scan.Wall, s.InProcess.Wall), get, getRSS)
	}
	var skipped []string
	for _, s := range r.Sizes {
		if s.KubectlSkipped != "" {
			skipped = append(skipped, fmt.Sprintf("N=%s: %s", kn(s.N), s.KubectlSkipped))
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(b, "\n¹ `kubectl get -o json` was not run where it would not fit: %s.\n", strings.Join(skipped, "; "))
	}
}

// scaleDetails writes the API server's memory, every repetition and the floor per list.
func scaleDetails(b *strings.Builder, r *scaleResult) {
	b.WriteString("\nkube-apiserver resident memory after each N: ")
	var rss []string
	for _, s := range r.Sizes {
		rss = append(rss, fmt.Sprintf("%s at N=%s", mib(s.ServerRSS), kn(s.N)))
	}
	b.WriteString(strings.Join(rss, ", ") + ".\n")
	b.WriteString("\nEvery repetition (scan wall / floor wall):\n\n")
	for _, s := range r.Sizes {
		var parts []string
		for i := range s.ScanAll {
			parts = append(parts, fmt.Sprintf("%s / %s", dur(s.ScanAll[i].Wall), dur(s.FloorAll[i].Wall)))
		}
		fmt.Fprintf(b, "- N=%s: %s\n", kn(s.N), strings.Join(parts, "; "))
	}

	b.WriteString("\nFloor per list (median wall of `kubectl get --raw`, and the list's JSON size):\n\n")
	b.WriteString("| list |")
	for _, s := range r.Sizes {
		fmt.Fprintf(b, " N=%s |", kn(s.N))
	}
	b.WriteString("\n|---|")
	for range r.Sizes {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, u := range floorURLs {
		fmt.Fprintf(b, "| %s |", u.name)
		for _, s := range r.Sizes {
			fmt.Fprintf(b, " %s (%s) |", dur(s.FloorPer[u.name]), bytesStr(s.ListBytes[u.name]))
		}
		b.WriteString("\n")
	}

}

// scaleSeeding writes the seeding times and the states the scan found.
func scaleSeeding(b *strings.Builder, r *scaleResult) {
	b.WriteString("\nSeeding (API server bound; 64 concurrent creates, status through the status subresource):\n\n")
	for _, s := range r.Sizes {
		keys := make([]string, 0, len(s.Seed))
		for k := range s.Seed {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+" "+dur(s.Seed[k]))
		}
		fmt.Fprintf(b, "- to N=%s: %s (%s)\n", kn(s.N), dur(s.SeedTotal), strings.Join(parts, ", "))
	}
	b.WriteString("\nStates the scan found (checked against N on every warm-up):\n\n")
	for _, s := range r.Sizes {
		keys := make([]string, 0, len(s.States))
		for k := range s.States {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, s.States[k]))
		}
		fmt.Fprintf(b, "- N=%s: %d claims: %s\n", kn(s.N), s.Claims, strings.Join(parts, ", "))
	}

}

// scaleTargets writes issue 7's targets against the figures.
func scaleTargets(b *strings.Builder, r *scaleResult) {
	b.WriteString("\n### Targets (issue 7)\n\n")
	b.WriteString("| target | measured | |\n|---|---|---|\n")
	worst := 0.0
	var parts []string
	for _, s := range r.Sizes {
		q := ratio(s.Scan.Wall, s.Floor.Wall)
		worst = max(worst, q)
		parts = append(parts, fmt.Sprintf("%.2f at %s", q, kn(s.N)))
	}
	fmt.Fprintf(b, "| scan <= 1.5 × floor at every N | %s | %s |\n", strings.Join(parts, ", "), verdict(worst <= 1.5))
	var small, large *sizeResult
	for i := range r.Sizes {
		s := &r.Sizes[i]
		if s.N == 10_000 {
			small = s
		}
		if s.N == 100_000 {
			large = s
		}
	}
	if small != nil {
		fmt.Fprintf(b, "| peak RSS <= 64 MiB at 10k pods | %s | %s |\n", mib(small.Scan.MaxRSS), verdict(small.Scan.MaxRSS <= 64*1024))
	}
	if large != nil {
		fmt.Fprintf(b, "| peak RSS <= 256 MiB at 100k pods | %s | %s |\n", mib(large.Scan.MaxRSS), verdict(large.Scan.MaxRSS <= 256*1024))
	}
	if small != nil && large != nil {
		q := ratio(large.Scan.Wall, small.Scan.Wall)
		fmt.Fprintf(b, "| 100k time / 10k time <= 11 | %.1f (%s / %s) | %s |\n", q, dur(large.Scan.Wall), dur(small.Scan.Wall), verdict(q <= 11))
	} else {
		b.WriteString("| 100k time / 10k time <= 11 | needs N=10000 and N=100000 in one run (`--sizes 10000,50000,100000`) | |\n")
	}
}

func bytesStr(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

// The file has two sections, each written by its own mode and kept when
// the other mode runs.
const (
	sectionScale    = "scale"
	sectionSnapshot = "snapshot"
)

const docHeader = `# Benchmarks

Written by ` + "`make bench`" + ` (` + "`go run -tags integration ./scripts/bench`" + `, see its flags); do not edit
between the markers by hand. Every figure is measured on the project's local
control plane (see [development.md](development.md#the-local-cluster)), started by the benchmark itself.

`

func marker(section, edge string) string {
	return fmt.Sprintf("<!-- bench:%s:%s -->", section, edge)
}

// writeSection replaces one section of the results file, creating the file
// (with a placeholder for the other section) when needed.
func writeSection(path, section, body string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(old)
	if !strings.Contains(doc, marker(sectionScale, "begin")) {
		doc = docHeader +
			marker(sectionScale, "begin") + "\n## Scan at scale\n\nNot run yet.\n" + marker(sectionScale, "end") + "\n\n" +
			marker(sectionSnapshot, "begin") + "\n## Snapshot throughput\n\nNot run yet.\n" + marker(sectionSnapshot, "end") + "\n"
	}
	begin, end := marker(section, "begin"), marker(section, "end")
	if !strings.Contains(doc, begin) && !strings.Contains(doc, end) {
		// A section newer than the file (the fleet's): appended.
		doc = strings.TrimRight(doc, "\n") + "\n\n" + begin + "\n" + end + "\n"
	}
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers of section %s are missing or out of order", path, section)
	}
	doc = doc[:i+len(begin)] + "\n" + strings.TrimSpace(body) + "\n" + doc[j:]
	if err := os.MkdirAll(dirOf(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "."
}
