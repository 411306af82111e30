// Command localcluster starts and stops the project's local control plane in
// the background (make cluster-up / cluster-down). See internal/testenv.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

const usage = "usage: localcluster up|down|status [--dir DIR] (default: $JANITOR_CLUSTER_DIR or .cluster)"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", usage)
	}
	dir := os.Getenv("JANITOR_CLUSTER_DIR")
	if dir == "" {
		dir = ".cluster"
	}
	if len(args) == 3 && args[1] == "--dir" {
		dir = args[2]
	} else if len(args) != 1 {
		return fmt.Errorf("%s", usage)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	switch args[0] {
	case "up":
		if testenv.Running(ctx, dir) {
			fmt.Fprintln(os.Stderr, "local cluster already running in", dir)
			fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
			return nil
		}
		// A half-dead cluster from an earlier run is cleaned up first.
		if err := testenv.StopDir(dir, os.Stderr); err != nil {
			return err
		}
		start := time.Now()
		if _, err := testenv.Start(ctx, testenv.Options{Dir: dir, Detach: true, Progress: os.Stderr}); err != nil {
			return fmt.Errorf("%w (logs in %s)", err, filepath.Join(dir, "logs"))
		}
		fmt.Fprintf(os.Stderr, "local cluster up in %.1fs; logs in %s\n", time.Since(start).Seconds(), filepath.Join(dir, "logs"))
		fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
		return nil
	case "down":
		return testenv.StopDir(dir, os.Stderr)
	case "status":
		if testenv.Running(ctx, dir) {
			fmt.Println("running:", kubeconfig)
			return nil
		}
		return fmt.Errorf("no local cluster running in %s", dir)
	default:
		return fmt.Errorf("%s", usage)
	}
}
