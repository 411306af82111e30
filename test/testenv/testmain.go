//go:build integration

package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RunMain starts one cluster for a test package, runs its tests and stops
// the cluster, also on SIGINT/SIGTERM. Use it from TestMain:
//
//	var env *testenv.Cluster
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }
//
// Set PVC_JANITOR_KEEP_CLUSTER=1 to keep the cluster folder (logs) after the
// run; its path is printed. JANITOR_CLUSTER_FEATURE_GATES, when set, is
// passed to the control plane as --feature-gates (Options.FeatureGates);
// every run gets a fresh folder, so stacks under different gates never
// share state.
//
// Listing the tests (go test -list) runs none: it starts no cluster and
// builds no stack, and *out stays nil.
func RunMain(m *testing.M, out **Cluster) int {
	if listing() {
		return m.Run()
	}
	gates := FeatureGatesFromEnv()
	prefix := "pvc-janitor-test-"
	if gates != "" {
		prefix = "pvc-janitor-test-gated-"
		fmt.Fprintf(os.Stderr, "testenv: control plane with --feature-gates=%s\n", gates)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, Progress: os.Stderr, FeatureGates: gates})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: start local cluster: %v (logs in %s)\n", err, dir)
		return 1
	}
	*out = c
	cleanup := func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
		}
		if os.Getenv("PVC_JANITOR_KEEP_CLUSTER") == "" {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintln(os.Stderr, "testenv: cluster folder kept:", dir)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sig
		cleanup()
		fmt.Fprintln(os.Stderr, "testenv: interrupted by", s)
		os.Exit(130)
	}()
	code := m.Run()
	signal.Stop(sig)
	cleanup()
	return code
}

// listing reports whether the test binary was asked only to list its tests
// (-test.list), which m.Run answers without running any.
func listing() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// Namespace creates a fresh namespace for one test and, when the test ends,
// force-deletes its pods (there is no kubelet to finish a graceful delete)
// and deletes it.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	cs := c.Clientset(t)
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// Clientset returns an admin clientset for the cluster.
func (c *Cluster) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}
