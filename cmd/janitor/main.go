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
	// live heap. Half that keeps the peak near 1.5x the inventory, for
	// about a fifth more CPU (docs/benchmarks.md). GOGC still decides when
	// it is set.
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(50)
	}
	cli.Main()
}
