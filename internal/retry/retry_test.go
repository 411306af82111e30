package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

var fast = Policy{Initial: time.Millisecond, Max: time.Millisecond, MaxElapsed: time.Minute}

// TestDo: a transient error is tried again until it passes; a Permanent
// one is returned at once, unwrapped; a budget of zero is one try; a
// caller's context that ends stops the tries and names the last error.
func TestDo(t *testing.T) {
	transient := errors.New("HTTP 503")
	calls := 0
	if err := fast.Do(context.Background(), func(context.Context) error {
		if calls++; calls < 3 {
			return transient
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("transient twice: %v after %d calls, want nil after 3", err, calls)
	}

	refused := errors.New("HTTP 400")
	calls = 0
	err := fast.Do(context.Background(), func(context.Context) error { calls++; return Permanent(refused) })
	if err != refused || calls != 1 {
		t.Errorf("permanent: %v after %d calls, want %v after 1", err, calls, refused)
	}

	calls = 0
	once := fast
	once.MaxElapsed = 0
	if err := once.Do(context.Background(), func(context.Context) error { calls++; return transient }); err != transient || calls != 1 {
		t.Errorf("no budget: %v after %d calls, want %v after 1", err, calls, transient)
	}

	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	err = fast.Do(ctx, func(context.Context) error {
		if calls++; calls == 2 {
			cancel()
		}
		return transient
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "last error: HTTP 503") || calls != 2 {
		t.Errorf("cancelled: %v after %d calls", err, calls)
	}
}

// TestDoGivesUpOnAnAddressThatNeverAnswered: a connection refused since
// the call began is tried again for NeverAnsweredFor, not for the whole
// budget (a minute here).
func TestDoGivesUpOnAnAddressThatNeverAnswered(t *testing.T) {
	refused := fmt.Errorf("post: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	calls := 0
	err := fast.Do(context.Background(), func(context.Context) error { calls++; return refused })
	if err != refused || calls < 2 {
		t.Errorf("refused: %v after %d calls, want %v after more than one", err, calls, refused)
	}
}

func TestTransientStatus(t *testing.T) {
	for code, want := range map[int]bool{
		http.StatusBadRequest: false, http.StatusUnauthorized: false, http.StatusForbidden: false, http.StatusNotFound: false,
		http.StatusRequestTimeout: true, http.StatusTooEarly: true, http.StatusTooManyRequests: true,
		http.StatusInternalServerError: true, http.StatusBadGateway: true, http.StatusServiceUnavailable: true,
	} {
		if got := TransientStatus(code); got != want {
			t.Errorf("TransientStatus(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestPoll: the condition is asked until it holds; its error ends the
// poll as is; a deadline already passed still asks once, then says so.
func TestPoll(t *testing.T) {
	far := time.Now().Add(time.Hour)
	calls := 0
	if err := Poll(context.Background(), time.Millisecond, far, func(context.Context) (bool, error) {
		calls++
		return calls == 3, nil
	}); err != nil || calls != 3 {
		t.Errorf("done at the third: %v after %d calls", err, calls)
	}
	boom := errors.New("boom")
	if err := Poll(context.Background(), time.Millisecond, far, func(context.Context) (bool, error) { return false, boom }); err != boom {
		t.Errorf("condition's error: %v", err)
	}
	calls = 0
	if err := Poll(context.Background(), time.Millisecond, time.Now(), func(context.Context) (bool, error) {
		calls++
		return false, nil
	}); !errors.Is(err, ErrDeadline) || calls != 1 {
		t.Errorf("past deadline: %v after %d calls, want ErrDeadline after 1", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Poll(ctx, time.Hour, far, func(context.Context) (bool, error) { return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended: %v", err)
	}
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on an ended context waited")
	}
}

// TestRetry: the loop the API server's calls share with the posts. A wait
// is at least what again asks for (a 429's Retry-After: 300ms here, where
// the backoff would wait 1ms; a lower bound the code path sets, no upper
// bound asserted); an error again calls final is returned as is; a
// MaxElapsed of zero is one try, reported as Stopped.
func TestRetry(t *testing.T) {
	busy := errors.New("HTTP 429")
	var at []time.Time
	err := fast.Retry(context.Background(), func(error) (bool, time.Duration) { return true, 300 * time.Millisecond },
		func(context.Context) error {
			if at = append(at, time.Now()); len(at) == 1 {
				return busy
			}
			return nil
		})
	if err != nil || len(at) != 2 {
		t.Fatalf("%v after %d tries, want nil after 2", err, len(at))
	}
	if gap := at[1].Sub(at[0]); gap < 300*time.Millisecond {
		t.Errorf("tried again after %s, before the 300ms asked for", gap)
	}

	final := errors.New("HTTP 404")
	if err := fast.Retry(context.Background(), func(error) (bool, time.Duration) { return false, 0 },
		func(context.Context) error { return final }); err != final {
		t.Errorf("final: %v, want %v as is", err, final)
	}

	once := fast
	once.MaxElapsed = 0
	calls := 0
	err = once.Retry(context.Background(), func(error) (bool, time.Duration) { return true, 0 },
		func(context.Context) error { calls++; return busy })
	var s *Stopped
	if !errors.As(err, &s) || s.Attempts != 1 || s.Ended != nil || !errors.Is(err, busy) || calls != 1 ||
		err.Error() != "gave up after 1 attempts: HTTP 429" {
		t.Errorf("one try: %v after %d calls", err, calls)
	}
}
