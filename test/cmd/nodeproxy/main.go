// Command nodeproxy gives the local node's network namespace a way to the
// API server without any address outside it: it listens on addresses
// inside the namespace (the kubernetes Service's ClusterIP for pods, the
// namespace's own loopback for kubelet) and relays each connection to the
// API server on the host's loopback. It replaces kube-proxy for the one
// Service pods need, and nothing else leaves the namespace (docs/node.md).
//
//	nodeproxy --netns /run/netns/pvcj-1a2b3c --to 127.0.0.1:6443 --listen 10.0.0.1:443 --listen 127.0.0.1:6443
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

type listens []string

func (l *listens) String() string     { return strings.Join(*l, ",") }
func (l *listens) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	netns := flag.String("netns", "", "the network namespace to listen in (a path such as /run/netns/NAME)")
	to := flag.String("to", "", "the host address to relay to: a loopback address and port")
	var addrs listens
	flag.Var(&addrs, "listen", "an address:port inside the namespace (repeat)")
	flag.Parse()
	logger := log.New(os.Stderr, "nodeproxy: ", log.LstdFlags)
	if err := run(*netns, *to, addrs, logger); err != nil {
		logger.Fatal(err)
	}
}

func run(netns, to string, addrs []string, logger *log.Logger) error {
	if netns == "" || len(addrs) == 0 {
		return errors.New("--netns and at least one --listen are required")
	}
	host, _, err := net.SplitHostPort(to)
	if err != nil {
		return fmt.Errorf("--to %q: %w", to, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--to %q: only a loopback address may be the target", to)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for _, a := range addrs {
		l, err := listenIn(netns, a)
		if err != nil {
			return fmt.Errorf("listen on %s in %s: %w", a, netns, err)
		}
		logger.Printf("relaying %s (in %s) to %s", a, netns, to)
		go serve(l, to, logger)
	}
	<-ctx.Done()
	return nil
}

// listenIn opens a listener inside the namespace: a socket belongs to the
// namespace of the thread that created it, so one locked thread enters the
// namespace, listens, and goes back.
func listenIn(netns, addr string) (net.Listener, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	defer self.Close()
	ns, err := os.Open(netns)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("enter the namespace: %w", err)
	}
	l, lerr := net.Listen("tcp", addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread cannot be trusted any more: let it die with the
		// goroutine (LockOSThread without Unlock ends the thread).
		runtime.LockOSThread()
		return nil, fmt.Errorf("leave the namespace: %w", err)
	}
	return l, lerr
}

func serve(l net.Listener, to string, logger *log.Logger) {
	for {
		c, err := l.Accept()
		if err != nil {
			logger.Fatal(err)
		}
		go relay(c, to, logger)
	}
}

// relay copies both ways until either side ends, then closes both.
func relay(c net.Conn, to string, logger *log.Logger) {
	defer c.Close()
	u, err := net.Dial("tcp", to)
	if err != nil {
		logger.Print(err)
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}
