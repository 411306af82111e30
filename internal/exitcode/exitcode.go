// Package exitcode is the one table of the janitor's exit codes (docs/spec.md#output) and
// the one error type that carries a code to main. Only cli.Main turns it into
// os.Exit.
package exitcode

import "errors"

// The exit codes of docs/spec.md#output.
const (
	OK          = 0   // nothing wrong
	Runtime     = 1   // runtime error: a read failed, the API was unreachable, …
	Usage       = 2   // usage or configuration error; nothing was changed
	DataAtRisk  = 3   // guard found claims whose data a teardown would lose
	Partial     = 4   // some actions failed, or the blast radius was exceeded
	LockHeld    = 5   // another run holds the lease
	Interrupted = 130 // SIGINT
	Terminated  = 143 // SIGTERM
)

// Error carries an exit code with its cause.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// New wraps err with code.
func New(code int, err error) *Error { return &Error{Code: code, Err: err} }

// Code returns the exit code for err: its Error's code, Runtime for any
// other error, OK for nil.
func Code(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Runtime
}
