package kube

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"
)

// silentListener accepts connections on loopback and never writes a byte:
// an API server's port held by something that does not answer (a hung
// server, a proxy whose backend is gone). It returns the address.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// TestSilentServerFailsWithinRequestTimeout (docs/spec.md#run-unreachable):
// a server that accepts connections and never answers fails a read within
// --request-timeout (1s here), not after the whole --api-timeout (2m),
// over TLS (the handshake never completes) and plain HTTP (the request is
// never answered), for a streamed list and a single call alike; the error
// names the server and the flag.
func TestSilentServerFailsWithinRequestTimeout(t *testing.T) {
	addr := silentListener(t)
	for _, scheme := range []string{"https", "http"} {
		server := scheme + "://" + addr
		c, err := NewClients(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: scheme == "https"}},
			ClientOptions{Retry: RetryPolicy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, MaxElapsed: 2 * time.Minute, Request: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(context.Background())
		// Bounded, so that a failure to fail shows as one.
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		calls := map[string]func() error{
			"list": func() error { _, err := Read(ctx, c, Scope{Namespaces: []string{"ws"}}); return err },
			"get": func() error {
				return c.Retry.Do(ctx, "read the server version", func(ctx context.Context) error {
					return c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
				})
			},
		}
		for name, call := range calls {
			start := time.Now()
			err := call()
			took := time.Since(start)
			if err == nil {
				t.Fatalf("%s %s: a silent server answered", scheme, name)
			}
			if took > 3*time.Second {
				t.Errorf("%s %s: failed after %s, want within the 1s request timeout (and some slack): %v", scheme, name, took.Round(time.Millisecond), err)
			}
			if msg := err.Error(); !strings.Contains(msg, server) || !strings.Contains(msg, "--request-timeout 1s") {
				t.Errorf("%s %s: error %q, want it to name the server %s and --request-timeout", scheme, name, msg, server)
			}
			t.Logf("%s %s: failed after %s: %v", scheme, name, took.Round(time.Millisecond), err)
		}
		if !strings.Contains(logs.String(), `"message":"request failed"`) || strings.Contains(logs.String(), `"connected"`) {
			t.Errorf("%s: want each failed request at debug and no connected line:\n%s", scheme, logs.String())
		}
	}
}

// TestSilenceAfterAnAnswerIsRetried: once the API server has answered, a
// request it leaves unanswered for --request-timeout is retried within the
// retry policy's time (--api-timeout), as any transient fault: an API
// server busy for a moment is not a wrong address.
func TestSilenceAfterAnAnswerIsRetried(t *testing.T) {
	var mu sync.Mutex
	silent := false
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := silent
		mu.Unlock()
		if s {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"gitVersion":"v1.37.0"}`))
	}))
	defer srv.Close()
	defer close(release)
	c, err := NewClients(&rest.Config{Host: srv.URL},
		ClientOptions{Retry: RetryPolicy{Initial: 100 * time.Millisecond, Max: 200 * time.Millisecond, MaxElapsed: 3 * time.Second, Request: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func() error {
		return c.Retry.Do(ctx, "read the server version", func(ctx context.Context) error {
			return c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		})
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	silent = true
	mu.Unlock()
	start := time.Now()
	err = get()
	took := time.Since(start)
	if err == nil {
		t.Fatal("a silent server answered")
	}
	if took < 2*time.Second || strings.Contains(err.Error(), "--request-timeout") {
		t.Errorf("gave up after %s (%v): a server that answered before is retried for the policy's 3s", took, err)
	}
}

// TestAttemptTimeout: an attempt waits --request-timeout, but never more
// than a quarter of --api-timeout (15s at least), so that a retry fits:
// the bound every attempt had before --request-timeout, kept for short
// budgets (TestHungRequestsAreBounded, TestChaos).
func TestAttemptTimeout(t *testing.T) {
	for _, c := range []struct {
		p    RetryPolicy
		want time.Duration
	}{
		{RetryPolicy{}, 30 * time.Second}, // DefaultRetry
		{RetryPolicy{MaxElapsed: 2 * time.Minute, Request: 30 * time.Second}, 30 * time.Second},
		{RetryPolicy{MaxElapsed: 2 * time.Minute, Request: time.Second}, time.Second},
		{RetryPolicy{MaxElapsed: 8 * time.Second, Request: 30 * time.Second}, 15 * time.Second},
		{RetryPolicy{MaxElapsed: 30 * time.Second, Request: 30 * time.Second}, 15 * time.Second},
		{RetryPolicy{MaxElapsed: 10 * time.Minute, Request: 30 * time.Second}, 30 * time.Second},
		{RetryPolicy{MaxElapsed: 10 * time.Minute}, 150 * time.Second},
	} {
		if got := c.p.AttemptTimeout(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.p, got, c.want)
		}
	}
}
