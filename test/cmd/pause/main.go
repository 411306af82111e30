// Command pause is the sandbox ("pause") image's program on the local node
// (test/testenv/node.go): it holds the pod's namespaces open and does
// nothing else until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
