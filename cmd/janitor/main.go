// Command janitor finds, rescues and reaps orphaned workspace
// PersistentVolumeClaims. Its behaviour is docs/spec.md; the README says how to run it.
package main

import (
	"os"
	"runtime/debug"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
)

func main() {
	// A scan's heap is its inventory (live until the report is written)
	// plus garbage, and Go's default lets garbage grow to the size of the
	// live heap. 30% keeps the peak near 1.3x what the run holds, for
	// 10-15% more CPU than 50%, the earlier setting, which let the peak at
	// 100k claims swing by 20 MiB from run to run (docs/benchmarks.md).
	// GOGC still decides when it is set.
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(30)
	}
	cli.Main()
}
