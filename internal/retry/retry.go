// Package retry is how the janitor waits: the one retry policy (Policy,
// exponential backoff on cenkalti/backoff/v4, and its loop, Retry) of
// every call that is tried again, the one poll helper for a condition read
// again until it holds, and the one context-bound sleep. A run's posts
// (the --notify-webhook summary, the notification routes, the Pushgateway
// push) are retried by Outbound's Do; the API server's calls by
// kube.RetryPolicy, the same type with kube's classification of the API
// server's errors (kube.Transient).
package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Policy is the project's one retry policy: exponential backoff with
// jitter (cenkalti/backoff/v4: waits from Initial growing by half, each
// randomized by ±50%, at most Max), every attempt and wait bound by the
// context and by MaxElapsed, the total time of the call. The API server's
// calls use it as kube.RetryPolicy (the same fields, with kube's
// classification of its errors: kube.Transient); a run's posts use
// Outbound.
type Policy struct {
	Initial    time.Duration // first wait
	Max        time.Duration // cap on one wait
	MaxElapsed time.Duration // cap on the whole call, retries included; 0: one try
	// Request bounds one attempt of an API call (--request-timeout, within
	// kube.RetryPolicy.AttemptTimeout's bound). A post's attempts are
	// bound by MaxElapsed only.
	Request time.Duration
}

// DefaultBudget is how long a post may take, retries included, when its
// caller sets no budget (the --notify-webhook summary): --notify-retry-time's
// default.
const DefaultBudget = 20 * time.Second

// Outbound is the policy of a post within budget: waits of 200ms growing
// up to 5s.
func Outbound(budget time.Duration) Policy {
	return Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second, MaxElapsed: budget}
}

// API is the policy of the API server's calls (kube.RetryPolicy): waits of
// 200ms growing up to 10s, within maxElapsed (--api-timeout), each attempt
// within request (--request-timeout).
func API(maxElapsed, request time.Duration) Policy {
	return Policy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, MaxElapsed: maxElapsed, Request: request}
}

// permanent marks an error that another try would only repeat.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth another try: Do returns it at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// Do is a post's retry: it calls op until it returns nil or a Permanent
// error, the context ends or MaxElapsed is spent, and returns op's last
// error (unwrapped from Permanent; with the context's error first when the
// caller's context ended). Every attempt's context ends with MaxElapsed. A
// MaxElapsed of zero or less is one try.
func (p Policy) Do(ctx context.Context, op func(context.Context) error) error {
	parent := ctx
	if p.MaxElapsed > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.MaxElapsed)
		defer cancel()
	}
	start, answered := time.Now(), false
	err := p.Retry(ctx, func(err error) (bool, time.Duration) {
		if errors.As(err, new(*permanent)) {
			return false, 0
		}
		answered = answered || !unanswered(err)
		return answered || time.Since(start) < NeverAnsweredFor, 0
	}, op)
	var stopped *Stopped
	var pe *permanent
	switch {
	case errors.As(err, &stopped) && parent.Err() != nil:
		return fmt.Errorf("%w (last error: %v)", parent.Err(), stopped.Last)
	case stopped != nil:
		return stopped.Last // the budget is spent: what the last try met
	case errors.As(err, &pe):
		return pe.err
	}
	return err
}

// Stopped is Retry's error when op's last error was worth another try but
// none was made: the policy's time was spent, or the context ended
// (Ended: its error).
type Stopped struct {
	Attempts int
	Last     error // op's last error
	Ended    error // the context's error, when it ended the call
}

func (s *Stopped) Error() string {
	if s.Ended != nil {
		return fmt.Sprintf("%v (last error: %v)", s.Ended, s.Last)
	}
	return fmt.Sprintf("gave up after %d attempts: %v", s.Attempts, s.Last)
}

// Unwrap is the context's error when it ended the call, else op's last.
func (s *Stopped) Unwrap() error {
	if s.Ended != nil {
		return s.Ended
	}
	return s.Last
}

// Retry is the loop every retried call runs, a post's (Do) and an API
// call's (kube.RetryPolicy.Do): op is called until it returns nil or again
// reports its error not worth another try (returned as is), or no try is
// left (*Stopped): the context ended, or the backoff's next wait would end
// past MaxElapsed since the first try (zero or less: one try). A wait is
// the backoff's, or the one again asks for (a 429's Retry-After) when
// longer. Retry bounds no attempt: op's context is ctx.
func (p Policy) Retry(ctx context.Context, again func(error) (bool, time.Duration), op func(context.Context) error) error {
	b := p.backOff()
	for attempts := 1; ; attempts++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		retry, after := again(err)
		if !retry {
			return err
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return &Stopped{Attempts: attempts, Last: err}
		}
		if !Sleep(ctx, max(wait, after)) {
			return &Stopped{Attempts: attempts, Last: err, Ended: ctx.Err()}
		}
	}
}

// backOff is the policy's backoff, started now.
func (p Policy) backOff() backoff.BackOff {
	if p.MaxElapsed <= 0 {
		return &backoff.StopBackOff{}
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = p.Initial, p.Max, p.MaxElapsed
	b.RandomizationFactor = 0.5
	b.Reset()
	return b
}

// NeverAnsweredFor is how long Do tries an address that has refused every
// connection (or named no host) since the call began: a wrong or absent
// endpoint retried for the whole budget would only look like a hang, as
// kube does for an API server that has never answered
// (docs/spec.md#run-unreachable). Once one attempt connected, the whole
// budget applies.
const NeverAnsweredFor = 2 * time.Second

// unanswered reports whether err is a connection that was never made: a
// dial that failed (refused, no route, no such host).
func unanswered(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// TransientStatus reports whether an HTTP answer is worth another try: a
// timeout (408), too early (425), too many requests (429) or a server's
// error (5xx). Any other 4xx is the request's own fault and would only be
// repeated.
func TransientStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return code >= 500
}

// ErrDeadline is Poll's error when the deadline passed before the condition
// held.
var ErrDeadline = errors.New("deadline passed")

// Poll calls cond now and then every interval until it reports done,
// returns an error (returned as is), the deadline passes (ErrDeadline) or
// the context ends (its error). The condition is asked at least once, and
// once more after the deadline's last wait.
func Poll(ctx context.Context, every time.Duration, deadline time.Time, cond func(context.Context) (bool, error)) error {
	for {
		done, err := cond(ctx)
		if err != nil || done {
			return err
		}
		if !time.Now().Before(deadline) {
			return ErrDeadline
		}
		if !Sleep(ctx, min(every, time.Until(deadline))) {
			return ctx.Err()
		}
	}
}

// Sleep waits d or until the context ends, and reports whether it waited
// the whole d.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
