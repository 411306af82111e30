// Command profile runs one janitor command line in-process, exactly as the
// janitor binary would (internal/cli.Run), under the Go profilers: the
// benchmark's way to see what bounds a scan (the janitor has no pprof flag).
//
//	go run ./scripts/bench/profile -cpuprofile cpu.out -memprofile heap.out -trace trace.out -- \
//	    scan --kubeconfig K --dry-run -o json -A -l app=ide --workspace-label workspace-id --min-age 0s
//
// With -read KUBECONFIG it calls kube.Read directly instead (all namespaces,
// -selector, -page-size, -qps), then reports the inventory's live size
// (heap after a forced GC with the inventory still referenced).
//
// It prints the wall time, the peak heap (sampled every 5 ms) and the GC
// count to stderr; the report goes to /dev/null unless -report is given.
// The heap profile is written when the heap is largest (the sample that
// first reaches a new peak above 90% of the final peak triggers it), so it
// shows what is live at peak, not after the run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

func main() {
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile here")
	memProfile := flag.String("memprofile", "", "write a heap profile (taken at the heap's peak) here")
	traceOut := flag.String("trace", "", "write an execution trace here (go tool trace)")
	reportOut := flag.String("report", "", "write the report here (default: discarded)")
	readKubeconfig := flag.String("read", "", "call kube.Read with this kubeconfig instead of running a command")
	selector := flag.String("selector", "app=ide", "with -read: the claims' label selector")
	pageSize := flag.Int64("page-size", 500, "with -read: the page size")
	qps := flag.Float64("qps", 50, "with -read: client QPS (burst is twice that)")
	invProfile := flag.String("invprofile", "", "with -read: write a heap profile of what the inventory keeps alive (after a forced GC)")
	flag.Parse()
	if flag.NArg() == 0 && *readKubeconfig == "" {
		fmt.Fprintln(os.Stderr, "usage: profile [flags] -- <janitor arguments>")
		os.Exit(2)
	}
	out := io.Discard
	if *reportOut != "" {
		f := create(*reportOut)
		defer f.Close()
		out = f
	}
	if *cpuProfile != "" {
		must(pprof.StartCPUProfile(create(*cpuProfile)))
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		must(trace.Start(create(*traceOut)))
		defer trace.Stop()
	}
	s := startSampler(*memProfile != "")
	start := time.Now()
	var code int
	var inv *inventory.Inventory
	if *readKubeconfig != "" {
		var err error
		if inv, err = read(*readKubeconfig, *selector, *pageSize, float32(*qps)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	} else {
		code = cli.Run(context.Background(), flag.Args(), cli.Streams{In: os.Stdin, Out: out, ErrOut: os.Stderr})
	}
	wall := time.Since(start)
	peak, peakProf := s.stop()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "exit %d, wall %s, peak heap in use %.1f MiB, heap sys %.1f MiB, %d GCs, %.1f MiB allocated in all\n",
		code, wall.Round(time.Millisecond), float64(peak)/(1<<20), float64(ms.HeapSys)/(1<<20), ms.NumGC, float64(ms.TotalAlloc)/(1<<20))
	if inv != nil {
		inventorySize(inv, *invProfile)
	}
	finish(code, *memProfile, peakProf)
}

// finish writes the peak's heap profile and exits with code when not 0
// (the profiles stopped first: a deferred stop would not run).
func finish(code int, memProfile string, peakProf []byte) {
	if memProfile != "" && peakProf != nil {
		if err := os.WriteFile(memProfile, peakProf, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if code != 0 {
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(code)
	}
}

// create creates a file or exits 1.
func create(name string) *os.File {
	f, err := os.Create(name)
	must(err)
	return f
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// sampler remembers the heap's peak (sampled every 5 ms) and, when asked,
// snapshots the heap profile at it: the sample that first reaches a new
// peak above 110% of the last one takes it.
type sampler struct {
	mu       sync.Mutex
	peak     uint64
	peakProf []byte
	halt     chan struct{}
	done     chan struct{}
}

func startSampler(profile bool) *sampler {
	s := &sampler{halt: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-s.halt:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			s.mu.Lock()
			if ms.HeapInuse > s.peak {
				grew := ms.HeapInuse > s.peak+s.peak/10
				s.peak = ms.HeapInuse
				if profile && grew {
					var b bytesBuf
					_ = pprof.Lookup("heap").WriteTo(&b, 0)
					s.peakProf = b.b
				}
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns the peak and its profile.
func (s *sampler) stop() (uint64, []byte) {
	close(s.halt)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.peakProf
}

// inventorySize prints what the inventory keeps alive (after a forced GC)
// and, with a path, writes that heap profile.
func inventorySize(inv *inventory.Inventory, profile string) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "inventory: %d claims, %d PVs, %d referrer keys, %d snapshot namespaces, %d contents; live heap with it %.1f MiB (%.0f B per claim)\n",
		len(inv.Claims), len(inv.PVs), len(inv.Referrers), len(inv.Snapshots), len(inv.Contents),
		float64(ms.HeapAlloc)/(1<<20), float64(ms.HeapAlloc)/float64(max(1, len(inv.Claims))))
	if profile != "" {
		if f, err := os.Create(profile); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	runtime.KeepAlive(inv)
}

// read runs kube.Read as janitor scan -A would.
func read(kubeconfig, selector string, pageSize int64, qps float32) (*inventory.Inventory, error) {
	cfg, _, _, err := kube.LoadConfig(kube.ClientOptions{Kubeconfig: kubeconfig})
	if err != nil {
		return nil, err
	}
	c, err := kube.NewClients(cfg, kube.ClientOptions{QPS: qps, Burst: int(2 * qps)})
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, err
	}
	return kube.Read(context.Background(), c, kube.Scope{Selector: sel, WorkspaceLabel: "workspace-id", PageSize: pageSize})
}

type bytesBuf struct{ b []byte }

func (w *bytesBuf) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
