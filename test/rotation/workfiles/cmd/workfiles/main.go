// Command workfiles is the program of the rotation test's workspace image
// (test/rotation, package workfiles): a workspace session on the old
// cluster's node that writes its files, and a session on the new cluster's
// node that reads them back.
//
//	workfiles write DIR SEED   writes workfiles.Files(SEED) under DIR, each
//	                           synced, prints the manifest read back from
//	                           DIR and "wrote N files", then stays up (a
//	                           running workspace) until stopped
//	workfiles sum DIR          prints the manifest of every file under DIR
//	                           and exits
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pvc-janitor/pvc-janitor/test/rotation/workfiles"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "workfiles:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) == 3 && args[0] == "write":
		files := workfiles.Files(args[2])
		if err := workfiles.Write(args[1], files); err != nil {
			return err
		}
		m, err := workfiles.Sum(args[1])
		if err != nil {
			return err
		}
		fmt.Print(m)
		fmt.Printf("wrote %d files\n", len(files))
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		return nil
	case len(args) == 2 && args[0] == "sum":
		m, err := workfiles.Sum(args[1])
		if err != nil {
			return err
		}
		fmt.Print(m)
		return nil
	default:
		return fmt.Errorf("usage: workfiles write DIR SEED | workfiles sum DIR")
	}
}
