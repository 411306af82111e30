package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// RetryPolicy is the project's one retry policy (retry.Policy: initial
// and longest wait, MaxElapsed, the cap on the total time spent on one call
// (--api-timeout), and Request, how long one attempt may wait for the API
// server's response (--request-timeout, kubectl's name and meaning; a
// streamed list: each silence of its stream, within AttemptTimeout's
// bound)) around a single API call, with the API server's classification
// of its errors (Transient) and the bound of each attempt. Every command
// uses it through Do.
type RetryPolicy retry.Policy

// NewRetry is the policy of a run's API calls (retry.API): within
// maxElapsed (--api-timeout), each attempt within request
// (--request-timeout).
func NewRetry(maxElapsed, request time.Duration) RetryPolicy {
	return RetryPolicy(retry.API(maxElapsed, request))
}

// DefaultRetry is used when no policy is configured.
var DefaultRetry = NewRetry(2*time.Minute, 30*time.Second)

// Do calls op until it succeeds, fails permanently, the context ends or the
// policy's time is up. A 429's Retry-After is honoured (as the next wait,
// when longer than the backoff's). what names the call in the error.
func (p RetryPolicy) Do(ctx context.Context, what string, op func(context.Context) error) error {
	return p.do(ctx, what, true, op)
}

// DoStream is Do for a call that bounds its own attempts by progress rather
// than by time (a streamed list, which may take minutes to serve and must
// not be cut while data flows): attempts get no deadline of their own; the
// policy's time bounds the retries.
func (p RetryPolicy) DoStream(ctx context.Context, what string, op func(context.Context) error) error {
	return p.do(ctx, what, false, op)
}

// AttemptTimeout is how long one attempt may take (or, for a stream, stay
// silent): Request (--request-timeout), but at most a quarter of the
// policy's time (at least 15s), so that a retry fits in the budget of a
// call whose attempt the server left unanswered.
func (p RetryPolicy) AttemptTimeout() time.Duration {
	if p.MaxElapsed <= 0 {
		p = DefaultRetry
	}
	quarter := max(p.MaxElapsed/4, 15*time.Second)
	if p.Request > 0 {
		return min(p.Request, quarter)
	}
	return quarter
}

func (p RetryPolicy) do(ctx context.Context, what string, bounded bool, op func(context.Context) error) error {
	if p.MaxElapsed <= 0 {
		p = DefaultRetry
	}
	// Each attempt ends by the policy's deadline: a server that accepts a
	// request and never answers must not hold the run forever (an attempt
	// gets AttemptTimeout, --request-timeout, so a retry is left for the
	// case the server answers the next one).
	deadline := time.Now().Add(p.MaxElapsed)
	attempt := func(ctx context.Context) error {
		var actx context.Context
		var cancel context.CancelFunc
		if bounded {
			per := min(p.AttemptTimeout(), time.Until(deadline))
			actx, cancel = context.WithTimeout(ctx, max(per, time.Second))
		} else {
			actx, cancel = context.WithCancel(ctx)
		}
		defer cancel()
		return op(actx)
	}
	if err := retry.Policy(p).Retry(ctx, Transient, attempt); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Transient reports whether err is worth retrying, and the server's
// Retry-After when it gave one. 400, 401, 403, 404, 409 and 422 are
// permanent: retrying would only repeat them (a 409 is retried by the
// caller after a re-read, never here).
func Transient(err error) (bool, time.Duration) {
	if err == nil {
		return false, 0
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrWriteRefused) {
		return false, 0
	}
	// Nothing has ever answered at that address (reach.go): retrying for
	// the whole --api-timeout would only look like a hang.
	var unreachable *UnreachableError
	if errors.As(err, &unreachable) {
		return false, 0
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		after := time.Duration(0)
		if secs, ok := apierrors.SuggestsClientDelay(err); ok {
			after = time.Duration(secs) * time.Second
		}
		switch {
		case code == 429:
			return true, after
		case code >= 500:
			return true, after
		case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
			return true, after
		default:
			return false, 0
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A per-request timeout, not the run's: the caller's context is
		// checked separately in Do.
		return true, 0
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true, 0
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true, 0
	}
	// HTTP/2: a stream the server reset (as kube-apiserver does when its
	// request timeout fires in the middle of a long list) or a connection
	// it is closing.
	var streamErr http2.StreamError
	var goAway http2.GoAwayError
	if errors.As(err, &streamErr) || errors.As(err, &goAway) || utilnet.IsProbableEOF(err) {
		return true, 0
	}
	return false, 0
}
