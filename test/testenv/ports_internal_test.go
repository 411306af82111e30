//go:build integration

package testenv

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortsAreOutsideTheEphemeralRange: the control plane's ports are
// distinct, free, and below the kernel's ephemeral range, where no other
// process's port-0 listener or outgoing connection can take them between
// freePorts closing them and etcd or kube-apiserver binding them.
func TestFreePortsAreOutsideTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-portsFrom < 300 {
		t.Fatalf("ephemeral range from %d: too little room below it on this host for the test to mean anything", low)
	}
	ports, release, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	seen := map[int]bool{}
	for _, p := range ports {
		if p < portsFrom || p >= low || seen[p] {
			t.Errorf("port %d of %v: want distinct ports in %d-%d", p, ports, portsFrom, low-1)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free once freePorts returned: %v", p, err)
			continue
		}
		l.Close()
	}
}

// TestReservedPortsAreNotPickedTwice: while one stack holds its ports
// (between freePorts and its components binding them), a second freePorts
// on the same host never returns one of them, though they are free to
// bind; once released they can be reserved again.
func TestReservedPortsAreNotPickedTwice(t *testing.T) {
	ports, release, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if _, ok := reservePort(p); ok {
			t.Errorf("port %d of %v reserved twice", p, ports)
		}
	}
	release()
	for _, p := range ports {
		f, ok := reservePort(p)
		if !ok {
			t.Errorf("port %d of %v still reserved after release", p, ports)
			continue
		}
		f.Close()
	}
}
