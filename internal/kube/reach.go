package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	// Silent: something accepted the request (or is still dialled) but
	// no response came within --request-timeout (Timeout).
	Silent  bool
	Timeout time.Duration
}

func (e *UnreachableError) Error() string {
	if e.Silent {
		if errors.Is(e.Err, context.DeadlineExceeded) {
			return fmt.Sprintf("the API server %s sent no response within --request-timeout %s", e.Server, e.Timeout)
		}
		return fmt.Sprintf("the API server %s sent no response (%v)", e.Server, e.Err)
	}
	return fmt.Sprintf("the API server %s does not answer (%v; no answer for %s)", e.Server, e.Err, e.For.Round(100*time.Millisecond))
}

// errNoResponse is the cause reach cancels a request with when it has had
// no response within the request timeout.
var errNoResponse = fmt.Errorf("no response: %w", context.DeadlineExceeded)

// reach follows whether the API server has answered at all. Each failed
// request is logged at debug (the retries included: each goes through
// here), and the first answer as "connected".
//
// Until the first answer it also bounds each request by timeout
// (--request-timeout; docs/spec.md#run-unreachable): a request that gets no
// response within it (whoever gave up first: reach itself, the attempt's
// deadline, a list's idle timer, a TLS handshake or dial timeout) fails for
// good, so that a server that accepts connections and never answers fails
// the run within the request timeout instead of being retried for the whole
// --api-timeout. Once the server has answered, a request that times out is
// retried as any transient error (each attempt bounded by the retry
// policy's Request).
type reach struct {
	server  string
	timeout time.Duration // --request-timeout; 0: no bound of reach's own

	mu        sync.Mutex
	answered  bool
	firstFail time.Time // the first failure for nothing there, before any answer
}

func (c *reach) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		bound := !c.answered && c.timeout > 0
		c.mu.Unlock()
		var cancel context.CancelCauseFunc
		var timer *time.Timer
		if bound {
			var ctx context.Context
			ctx, cancel = context.WithCancelCause(r.Context())
			timer = time.AfterFunc(c.timeout, func() { cancel(errNoResponse) })
			r = r.WithContext(ctx)
		}
		resp, err := rt.RoundTrip(r)
		if bound {
			if !timer.Stop() && err == nil {
				// The response came as the time ran out, and its body
				// with the cancelled context cannot be read: no response.
				resp.Body.Close()
				resp, err = nil, context.Cause(r.Context())
			}
			if err == nil {
				// The body is read after RoundTrip returns: the request's
				// context ends when it is closed.
				resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
			} else {
				defer cancel(nil)
			}
		}
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
		if bound && noResponse(r.Context(), err) {
			c.mu.Lock()
			answered := c.answered
			c.mu.Unlock()
			if !answered {
				return nil, &UnreachableError{Server: c.server, Err: err, Silent: true, Timeout: c.timeout}
			}
		}
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

// noResponse reports whether a request failed for want of a response in
// time: its context's deadline (reach's own, the attempt's, a list's idle
// timer) or a dial or TLS handshake that timed out. A request cancelled
// for another reason (an interrupted run, a lost lease) is not.
func noResponse(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return errors.Is(context.Cause(ctx), context.DeadlineExceeded)
	}
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// cancelBody ends a request's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
