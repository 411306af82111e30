// Package cli is the cobra glue of the janitor: one file per command, each
// turning flags (through internal/config) into options for the library
// (internal/janitor) and printing the report. Only Main calls os.Exit.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"

	"github.com/pvc-janitor/pvc-janitor/internal/exitcode"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// Streams are the command's standard streams.
type Streams struct {
	In     io.Reader
	Out    io.Writer // the report
	ErrOut io.Writer // logs and errors
	// Getenv looks up the environment (injectable for tests).
	LookupEnv func(string) (string, bool)
}

// Main runs the janitor with the process's arguments and streams and exits
// with the documented code.
func Main() {
	os.Exit(Run(context.Background(), os.Args[1:], Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, LookupEnv: os.LookupEnv}))
}

// Run executes one command line and returns its exit code. SIGINT and
// SIGTERM cancel the context; the command stops starting new work, finishes
// its report and the code becomes 130 or 143.
func Run(ctx context.Context, args []string, s Streams) int {
	if s.LookupEnv == nil {
		s.LookupEnv = os.LookupEnv
	}
	s.Out, s.ErrOut = lockWriters(s.Out, s.ErrOut)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			cancel(&signalError{sig: sig.(syscall.Signal)})
		case <-ctx.Done():
		}
	}()
	cmd := NewCommand(s)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if cause := context.Cause(ctx); cause != nil {
		var se *signalError
		if errors.As(cause, &se) {
			fmt.Fprintf(s.ErrOut, "error: interrupted by %v\n", se.sig)
			if se.sig == syscall.SIGTERM {
				return exitcode.Terminated
			}
			return exitcode.Interrupted
		}
	}
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if msg != "" {
			fmt.Fprintln(s.ErrOut, "error: "+term.OneLine(msg))
		}
		return exitcode.Code(err)
	}
	return exitcode.OK
}

type signalError struct{ sig syscall.Signal }

func (e *signalError) Error() string { return "interrupted by " + e.sig.String() }

// lockWriters serialises writes to streams that are not files: the rescue
// and reap workers log concurrently and zerolog does not lock, so a
// caller's buffer (a test's, an embedding program's) would be written by
// several goroutines at once. Files are left as they are: the kernel
// serialises their writes, and term.IsTerminal must still see them. One
// writer given as both streams gets one lock.
func lockWriters(out, errOut io.Writer) (io.Writer, io.Writer) {
	lo := lockWriter(out)
	if same(out, errOut) {
		return lo, lo
	}
	return lo, lockWriter(errOut)
}

func lockWriter(w io.Writer) io.Writer {
	if _, isFile := w.(*os.File); isFile || w == nil {
		return w
	}
	return &syncWriter{w: w}
}

// same reports whether a and b are the same writer: the same pointer
// (comparing other values could panic on a type that cannot be compared).
func same(a, b io.Writer) bool {
	if a == nil || b == nil || reflect.TypeOf(a) != reflect.TypeOf(b) || reflect.TypeOf(a).Kind() != reflect.Pointer {
		return false
	}
	return a == b
}
