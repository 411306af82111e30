// Command workspace is the local node's workspace image (test/testenv/node.go):
// a user's session that writes to its volume, and a later session that reads
// it back.
//
//	workspace write FILE TEXT   writes TEXT to FILE, syncs it, prints "wrote FILE",
//	                            then stays up (a running workspace) until stopped
//	workspace cat FILE          prints FILE and exits
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "workspace:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "write":
		if err := write(args[1], args[2]); err != nil {
			return err
		}
		fmt.Println("wrote", args[1])
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		return nil
	case len(args) == 2 && args[0] == "cat":
		b, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	default:
		return fmt.Errorf("usage: workspace write FILE TEXT | workspace cat FILE")
	}
}

// write writes and syncs the file, so a snapshot taken after the pod stops
// holds it.
func write(path, text string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
