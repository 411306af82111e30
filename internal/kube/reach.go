package kube

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// unreachableFor is how long requests to an API server that has never
// answered may go on failing because nothing is there (a refused
// connection, a host that does not resolve or cannot be routed to) before
// they fail for good (docs/spec.md#run-unreachable): long enough for a few
// attempts over an API server's restart, short enough that a wrong
// kubeconfig fails in seconds, as kubectl's does, not after --api-timeout.
const unreachableFor = 2 * time.Second

// UnreachableError is a request that could not reach an API server that
// has never answered, after unreachableFor. The retry policy does not
// retry it (Transient): nothing answering at all is not a transient fault.
// It does not unwrap to its cause, which Transient would retry.
type UnreachableError struct {
	Server string
	For    time.Duration // since the first such failure
	Err    error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the API server %s does not answer (%v; no answer for %s)", e.Server, e.Err, e.For.Round(100*time.Millisecond))
}

// reach follows whether the API server has answered at all. Each failed
// request is logged at debug (the retries included: each goes through
// here), and the first answer as "connected".
type reach struct {
	server string

	mu        sync.Mutex
	answered  bool
	firstFail time.Time // the first failure for nothing there, before any answer
}

func (c *reach) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		log := zerolog.Ctx(r.Context())
		if err == nil {
			c.mu.Lock()
			first := !c.answered
			c.answered = true
			c.mu.Unlock()
			if first {
				log.Debug().Str("server", c.server).Int("status", resp.StatusCode).Msg("connected")
			}
			return resp, nil
		}
		log.Debug().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("request failed")
		if !nothingThere(err) {
			return resp, err
		}
		now := time.Now()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.answered {
			// It answered before: restarting, most likely; the retry
			// policy's time is its bound.
			return resp, err
		}
		if c.firstFail.IsZero() {
			c.firstFail = now
		}
		if d := now.Sub(c.firstFail); d >= unreachableFor {
			return nil, &UnreachableError{Server: c.server, For: d, Err: err}
		}
		return resp, err
	})
}

// nothingThere reports whether err says that nothing serves the address: a
// refused connection, an unknown host, no route.
func nothingThere(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}
