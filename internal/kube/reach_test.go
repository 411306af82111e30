package kube

import (
	"bytes"
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

// closedPort returns a loopback address where nothing listens: a port the
// kernel handed out and that was closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestUnreachableServerFailsFast (docs/spec.md#run-unreachable): with
// nothing listening on the API server's port, a read fails within seconds
// (kubectl fails at once), not after the whole --api-timeout (2m, the
// default, here), naming the server and the cause; every failed attempt is
// logged at debug, and nothing claims to be connected.
func TestUnreachableServerFailsFast(t *testing.T) {
	server := "https://" + closedPort(t)
	c, err := NewClients(&rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{Insecure: true}},
		ClientOptions{Retry: RetryPolicy{Initial: 200 * time.Millisecond, Max: 10 * time.Second, MaxElapsed: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(context.Background())
	// Bounded, so that the failure before the fix shows as one.
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err = Read(ctx, c, Scope{Namespaces: []string{"ws"}})
	took := time.Since(start)
	if err == nil {
		t.Fatal("a read from a closed port succeeded")
	}
	if took > 5*time.Second {
		t.Errorf("the read failed after %s, want within 5s: %v", took.Round(time.Millisecond), err)
	}
	if msg := err.Error(); !strings.Contains(msg, server) || !strings.Contains(msg, "connection refused") {
		t.Errorf("error %q, want it to name the server %s and the cause", msg, server)
	}
	if !strings.Contains(logs.String(), `"message":"request failed"`) {
		t.Errorf("no failed attempt logged at debug:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), `"connected"`) {
		t.Errorf("logged connected without a response:\n%s", logs.String())
	}
	t.Logf("failed after %s: %v", took.Round(time.Millisecond), err)
}

// TestRefusedAfterAnAnswerIsRetried: once the API server has answered, a
// refused connection is an API server restarting (an upgrade, a failover)
// and is retried within the retry policy's time as before; the first
// answer is logged as connected.
func TestRefusedAfterAnAnswerIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"gitVersion":"v1.37.0"}`))
	}))
	c, err := NewClients(&rest.Config{Host: srv.URL},
		ClientOptions{Retry: RetryPolicy{Initial: 100 * time.Millisecond, Max: 200 * time.Millisecond, MaxElapsed: 4 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(context.Background())
	get := func() error {
		return c.Retry.Do(ctx, "read the server version", func(ctx context.Context) error {
			return c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		})
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), `"message":"connected"`); n != 1 {
		t.Errorf("%d connected lines after the first answer, want 1:\n%s", n, logs.String())
	}
	srv.Close()
	start := time.Now()
	if err := get(); err == nil {
		t.Fatal("a read from a closed server succeeded")
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("gave up after %s: a server that answered before is retried for the policy's 4s", took)
	}
}

// lockedBuffer is a log sink the run's concurrent lists write to at once
// (zerolog does not serialise writes): found by make race.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
