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
		f, err := os.Create(*reportOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer f.Close()
		out = f
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer trace.Stop()
	}

	// Heap sampler: remembers the peak and snapshots the heap profile at it.
	var (
		mu       sync.Mutex
		peak     uint64
		peakProf []byte
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			mu.Lock()
			if ms.HeapInuse > peak {
				grew := ms.HeapInuse > peak+peak/10
				peak = ms.HeapInuse
				if *memProfile != "" && grew {
					var b bytesBuf
					_ = pprof.Lookup("heap").WriteTo(&b, 0)
					peakProf = b.b
				}
			}
			mu.Unlock()
		}
	}()

	start := time.Now()
	var code int
	var inv *inventory.Inventory
	if *readKubeconfig != "" {
		var err error
		inv, err = read(*readKubeconfig, *selector, *pageSize, float32(*qps))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	} else {
		code = cli.Run(context.Background(), flag.Args(), cli.Streams{In: os.Stdin, Out: out, ErrOut: os.Stderr})
	}
	wall := time.Since(start)
	close(stop)
	<-done
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "exit %d, wall %s, peak heap in use %.1f MiB, heap sys %.1f MiB, %d GCs, %.1f MiB allocated in all\n",
		code, wall.Round(time.Millisecond), float64(peak)/(1<<20), float64(ms.HeapSys)/(1<<20), ms.NumGC, float64(ms.TotalAlloc)/(1<<20))
	if inv != nil {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "inventory: %d claims, %d PVs, %d referrer keys, %d snapshot namespaces, %d contents; live heap with it %.1f MiB (%.0f B per claim)\n",
			len(inv.Claims), len(inv.PVs), len(inv.Referrers), len(inv.Snapshots), len(inv.Contents),
			float64(ms.HeapAlloc)/(1<<20), float64(ms.HeapAlloc)/float64(max(1, len(inv.Claims))))
		if *invProfile != "" {
			if f, err := os.Create(*invProfile); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
		runtime.KeepAlive(inv)
	}
	if *memProfile != "" && peakProf != nil {
		if err := os.WriteFile(*memProfile, peakProf, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if code != 0 {
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(code)
	}
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
