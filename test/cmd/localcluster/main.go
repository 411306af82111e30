//go:build integration

// Command localcluster starts and stops the project's local control plane in
// the background (make cluster-up / cluster-down). See test/testenv.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

const usage = "usage: localcluster up|down|status|seed-demo [--dir DIR] | read-volume NAMESPACE CLAIM PATH " +
	"(default DIR: $JANITOR_CLUSTER_DIR or .cluster; " +
	"up passes $JANITOR_CLUSTER_FEATURE_GATES to kube-apiserver and kube-controller-manager as --feature-gates, " +
	"and keeps the CSI driver's volumes and snapshots in $JANITOR_CLUSTER_STORAGE when set (down leaves that folder); " +
	"read-volume prints a file of a claim's volume, as a pod mounting it would see it)"

// DemoNamespace is where seed-demo puts the demo fleet.
const DemoNamespace = "pvc-janitor-demo"

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
	var rest []string
	switch {
	case args[0] == "read-volume" && len(args) == 4:
		rest = args[1:]
	case len(args) == 3 && args[1] == "--dir":
		dir = args[2]
	case len(args) != 1:
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
		gates := testenv.FeatureGatesFromEnv()
		if testenv.Running(ctx, dir) {
			// A cluster is reused only under the gates asked for: a test of
			// the stack without the Unused condition must never run on one
			// that has it, nor the other way round.
			if running, _ := testenv.RecordedFeatureGates(dir); running != gates {
				return fmt.Errorf("the local cluster in %s runs with --feature-gates=%q, not %q: "+
					"make cluster-down first, or use another JANITOR_CLUSTER_DIR", dir, running, gates)
			}
			// Nor on another Kubernetes version than the one asked for.
			if want := os.Getenv(testenv.KubeVersionEnv); want != "" {
				if running, _ := testenv.RecordedKubeVersion(dir); running != want {
					return fmt.Errorf("the local cluster in %s runs Kubernetes %s, not %s: "+
						"make cluster-down first, or use another JANITOR_CLUSTER_DIR", dir, running, want)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "node")); testenv.NodeFromEnv() && err != nil {
				return fmt.Errorf("the local cluster in %s runs without a node, and %s=1 asks for one: "+
					"make cluster-down first, or use another JANITOR_CLUSTER_DIR", dir, testenv.NodeEnv)
			}
			fmt.Fprintln(os.Stderr, "local cluster already running in", dir, gatesNote(gates))
			fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
			return nil
		}
		// A half-dead cluster from an earlier run is cleaned up first.
		if err := testenv.StopDir(dir, os.Stderr); err != nil {
			return err
		}
		start := time.Now()
		c, err := testenv.Start(ctx, testenv.Options{Dir: dir, Detach: true, Progress: os.Stderr, FeatureGates: gates, Node: testenv.NodeFromEnv(),
			StorageDir: os.Getenv(testenv.StorageEnv)})
		if err != nil {
			return fmt.Errorf("%w (logs in %s)", err, filepath.Join(dir, "logs"))
		}
		fmt.Fprintf(os.Stderr, "local cluster (Kubernetes %s) up in %.1fs %s; logs in %s\n", c.KubeVersion, time.Since(start).Seconds(), gatesNote(gates), filepath.Join(dir, "logs"))
		fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
		return nil
	case "down":
		return testenv.StopDir(dir, os.Stderr)
	case "seed-demo":
		return seedDemo(ctx, dir)
	case "read-volume":
		return readVolume(ctx, dir, rest[0], rest[1], rest[2])
	case "status":
		if testenv.Running(ctx, dir) {
			gates, _ := testenv.RecordedFeatureGates(dir)
			version, _ := testenv.RecordedKubeVersion(dir)
			fmt.Println("running:", kubeconfig, "Kubernetes", version, gatesNote(gates))
			return nil
		}
		return fmt.Errorf("no local cluster running in %s", dir)
	default:
		return fmt.Errorf("%s", usage)
	}
}

// gatesNote says which feature gates a cluster runs with.
func gatesNote(gates string) string {
	if gates == "" {
		return "(default feature gates)"
	}
	return "(--feature-gates=" + gates + ")"
}

// fixtures connects to the running local cluster in dir.
func fixtures(ctx context.Context, dir string) (*testenv.Fixtures, error) {
	if !testenv.Running(ctx, dir) {
		return nil, fmt.Errorf("no local cluster running in %s: run make cluster-up", dir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	gates, _ := testenv.RecordedFeatureGates(dir)
	version, _ := testenv.RecordedKubeVersion(dir)
	c := &testenv.Cluster{Dir: dir, Config: cfg, DriverStateDir: filepath.Join(dir, "csi-state"), FeatureGates: gates, KubeVersion: version}
	return c.NewFixtures()
}

// seedDemo (re)creates the demo namespace and its fleet in a running
// cluster and prints the expected state of every claim.
func seedDemo(ctx context.Context, dir string) error {
	if !testenv.Running(ctx, dir) {
		return fmt.Errorf("no local cluster running in %s: run make cluster-up", dir)
	}
	f, err := fixtures(ctx, dir)
	if err != nil {
		return err
	}
	// A fresh namespace each time: the demo must start from the same fleet.
	if err := f.DeleteNamespace(ctx, DemoNamespace); err != nil {
		return err
	}
	if _, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seeding the demo fleet in namespace %s (about %s) ...\n", DemoNamespace, testenv.DemoGracePeriod+3*time.Second)
	want, err := testenv.SeedDemo(ctx, f, DemoNamespace, f.DriverStateDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "seeded %d claims\n", len(want))
	return nil
}

// readVolume prints the file at path in the volume of claim ns/name.
func readVolume(ctx context.Context, dir, ns, name, path string) error {
	f, err := fixtures(ctx, dir)
	if err != nil {
		return err
	}
	b, err := f.ReadVolume(ctx, ns, name, path)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}
