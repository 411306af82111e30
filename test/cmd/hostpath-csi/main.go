// Command hostpath-csi runs the test-only CSI snapshot driver from
// test/csidriver next to csi-snapshotter in the local test cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
)

func main() {
	endpoint := flag.String("endpoint", "unix:///csi/csi.sock", "unix socket to serve on (unix:///path/csi.sock or a plain path)")
	stateDir := flag.String("state-dir", "", "folder for snapshot records and fault files (required; must survive restarts)")
	driverName := flag.String("driver-name", csidriver.DefaultDriverName, "CSI driver name reported to the sidecars")
	nodeID := flag.String("node-id", "", "the node id NodeGetInfo reports (default: the host name)")
	registration := flag.String("registration-socket", "", "also serve kubelet's plugin registration API on this socket (kubelet's plugins_registry/<driver>-reg.sock), as node-driver-registrar would")
	flag.Parse()

	logger := log.New(os.Stderr, "hostpath-csi: ", log.LstdFlags|log.Lmicroseconds)
	if *stateDir == "" {
		fmt.Fprintln(os.Stderr, "hostpath-csi: --state-dir is required")
		flag.Usage()
		os.Exit(2)
	}

	d, err := csidriver.New(csidriver.Options{DriverName: *driverName, StateDir: *stateDir, Logger: logger, NodeID: *nodeID})
	if err != nil {
		logger.Fatal(err)
	}

	// Kubernetes stops the pod with SIGTERM; GracefulStop (inside Serve)
	// lets an in-flight CreateSnapshot finish writing its record first.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *registration != "" {
		go func() {
			if err := d.ServeRegistration(ctx, *registration, *endpoint); err != nil {
				logger.Fatal(err)
			}
		}()
		logger.Printf("kubelet plugin registration on %s", *registration)
	}
	logger.Printf("serving %s on %s (state %s)", *driverName, *endpoint, *stateDir)
	if err := d.Serve(ctx, *endpoint); err != nil {
		logger.Fatal(err)
	}
	logger.Print("stopped")
}
