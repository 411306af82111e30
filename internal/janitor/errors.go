package janitor

// InputError is bad input that only the cluster could reveal, such as a
// --snapshot-class that does not exist: nothing was written. The CLI
// reports it as a usage error (exit 2).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *InputError) Unwrap() error { return e.Err }
