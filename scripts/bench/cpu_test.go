//go:build integration

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStackCPUReadsEachComponent: stackCPU reads the CPU of every process
// of a cluster's pid file (here the test's own, under two names), and
// cpuShares puts the busiest first with the cores each kept busy.
func TestStackCPUReadsEachComponent(t *testing.T) {
	dir := t.TempDir()
	pids := fmt.Sprintf("etcd %d\nkube-apiserver %d\nnot-a-line\n", os.Getpid(), os.Getpid())
	if err := os.WriteFile(filepath.Join(dir, "pids"), []byte(pids), 0o600); err != nil {
		t.Fatal(err)
	}
	// Spend CPU until /proc counts at least a tick (10 ms), however
	// loaded the machine.
	for procCPU(os.Getpid()) == 0 {
	}
	cpu := stackCPU(dir)
	if len(cpu) != 2 || cpu["etcd"] <= 0 || cpu["kube-apiserver"] != cpu["etcd"] {
		t.Fatalf("stackCPU = %v, want etcd and kube-apiserver, each this process's CPU", cpu)
	}
	got := cpuShares(map[string]time.Duration{"etcd": 10 * time.Second, "kube-apiserver": 30 * time.Second, "janitor": 5 * time.Second}, 20*time.Second, 2)
	want := "kube-apiserver 30 s (1.50 cores), etcd 10 s (0.50 cores), janitor 5 s (0.25 cores); all together 45 s, 2.25 of the machine's 2 cores"
	if !strings.Contains(got, "(1.50 cores)") || !strings.HasSuffix(got, "2.25 of the machine's 2 cores") || strings.Index(got, "kube-apiserver") > strings.Index(got, "etcd") {
		t.Errorf("cpuShares = %q, want like %q", got, want)
	}
}
