package kube

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CheckedHeader is the header every write of a run that holds the Lease
// carries: the moment (local clock, RFC 3339 with nanoseconds) the run's
// Lease vouched for it, right before it was sent (docs/spec.md#run-lease).
// A write that arrives late (its process was stopped after the check)
// says so itself.
const CheckedHeader = "Pvc-Janitor-Lease-Checked"

// ErrWriteRefused is the error of a write the run's guard did not send:
// the run's Lease no longer vouches for it. Permanent (Transient).
var ErrWriteRefused = errors.New("write not sent: the run's lease no longer vouches for it")

// WriteGuard is asked right before each write of the clients (POST, PUT,
// PATCH, DELETE; not the Lease's own): with a check set (janitor.Lock sets
// the Lease's), a write is sent only while the check passes, stamped with
// CheckedHeader. Reads are never held back. The zero value sends
// everything unstamped.
type WriteGuard struct {
	mu    sync.RWMutex
	check func() error
}

// Set installs check (nil: none).
func (g *WriteGuard) Set(check func() error) {
	g.mu.Lock()
	g.check = check
	g.mu.Unlock()
}

func (g *WriteGuard) get() func() error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.check
}

func (g *WriteGuard) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		check := g.get()
		if check == nil || !isWrite(r.Method) || isLease(r.URL.Path) {
			return rt.RoundTrip(r)
		}
		if err := check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrWriteRefused, err)
		}
		r = r.Clone(r.Context())
		r.Header.Set(CheckedHeader, time.Now().UTC().Format(time.RFC3339Nano))
		return rt.RoundTrip(r)
	})
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// isLease reports whether path is of a coordination.k8s.io Lease: the
// Lease's own writes (renewal, release) are what keeps or ends it.
func isLease(path string) bool {
	return strings.HasPrefix(path, "/apis/coordination.k8s.io/") && strings.Contains(path, "/leases")
}
