// Command rsswrap runs a program and writes its peak RSS and CPU time to
// file descriptor 3: "maxrss_kib user_ns sys_ns wall_ns". make bench runs
// every measured program under it.
//
// Why: os/exec starts a child with vfork (the child shares the parent's
// memory until it execs), and Linux records the memory it shared at exec
// into the child's ru_maxrss. A program started by the bench therefore
// reported the bench's own peak RSS when that was larger (hundreds of MiB
// while seeding a fleet), not its own: /bin/true "used" 207 MiB under a
// parent holding 200 MiB. This wrapper is small (about 2 MiB), so the
// program it starts reports its own peak, unless that is under 2 MiB.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rsswrap PROGRAM [ARGS...] (results on fd 3)")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "rsswrap:", err)
		os.Exit(127)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res := os.NewFile(3, "results")
		fmt.Fprintf(res, "%d %d %d %d\n", ru.Maxrss, cmd.ProcessState.UserTime().Nanoseconds(),
			cmd.ProcessState.SystemTime().Nanoseconds(), wall.Nanoseconds())
		res.Close()
	}
	os.Exit(code)
}
