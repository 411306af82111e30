// Package retry is how the janitor waits on what is outside the API
// server: one retry policy for every post a run publishes (the
// --notify-webhook summary, the notification routes, the Pushgateway push),
// one poll helper for a condition read again until it holds, and the one
// context-bound sleep. The policy is cenkalti/backoff/v4's exponential
// backoff, as kube.RetryPolicy's is for the API server's calls.
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

// Policy is exponential backoff with jitter, every attempt and wait bound
// by the context and by Budget, the total time of the call.
type Policy struct {
	Initial time.Duration // first wait
	Max     time.Duration // cap on one wait
	Budget  time.Duration // cap on the whole call, retries included; 0: one try
}

// DefaultBudget is how long a post may take, retries included, when its
// caller sets no budget (the --notify-webhook summary): --notify-retry-time's
// default.
const DefaultBudget = 20 * time.Second

// Outbound is the policy of a post within budget: waits of 200ms doubling
// up to 5s.
func Outbound(budget time.Duration) Policy {
	return Policy{Initial: 200 * time.Millisecond, Max: 5 * time.Second, Budget: budget}
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

// Do calls op until it returns nil or a Permanent error, the context ends
// or the budget is spent, and returns op's last error (unwrapped from
// Permanent; with the context's error first when the caller's context
// ended). Every attempt's context ends with the budget. A budget of zero or
// less is one try.
func (p Policy) Do(ctx context.Context, op func(context.Context) error) error {
	parent := ctx
	var policy backoff.BackOff = &backoff.StopBackOff{}
	if p.Budget > 0 {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = p.Initial, p.Max, p.Budget
		b.Reset()
		policy = b
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Budget)
		defer cancel()
	}
	var last error
	start, answered := time.Now(), false
	err := backoff.Retry(func() error {
		last = op(ctx)
		if pe := (*permanent)(nil); errors.As(last, &pe) {
			last = pe.err
			return backoff.Permanent(last)
		}
		if answered = answered || !unanswered(last); !answered && time.Since(start) >= NeverAnsweredFor {
			return backoff.Permanent(last)
		}
		return last
	}, backoff.WithContext(policy, ctx))
	switch {
	case err == nil || last == nil:
		return err
	case parent.Err() != nil:
		return fmt.Errorf("%w (last error: %v)", parent.Err(), last)
	}
	return last // the budget is spent: what the last try met
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
