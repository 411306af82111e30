package kube

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestWriteGuard (an httptest stub that records what reaches it): with
// the Lease's check set, a write is sent only while the check passes, and
// carries the moment of the check; reads and the Lease's own writes are
// never held back (docs/spec.md#run-lease).
func TestWriteGuard(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // "METHOD path" -> CheckedHeader
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Method+" "+r.URL.Path] = r.Header.Get(CheckedHeader)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
	}))
	defer srv.Close()
	c, err := NewClients(&rest.Config{Host: srv.URL}, ClientOptions{Retry: NewRetry(time.Second, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims := c.Kube.CoreV1().PersistentVolumeClaims("ns")
	leases := c.Kube.CoordinationV1().Leases("ns")
	const claimPath, leasePath = "/api/v1/namespaces/ns/persistentvolumeclaims/a", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/pvc-janitor"
	reset := func() { mu.Lock(); clear(got); mu.Unlock() }
	seen := func(key string) (string, bool) { mu.Lock(); defer mu.Unlock(); h, ok := got[key]; return h, ok }

	// No check set (a command without the Lease): sent, unstamped.
	_ = claims.Delete(ctx, "a", metav1.DeleteOptions{})
	if h, ok := seen("DELETE " + claimPath); !ok || h != "" {
		t.Errorf("without a check: sent %v, header %q; want sent, no header", ok, h)
	}

	// The Lease vouches: sent, stamped with the check's moment.
	reset()
	c.Guard.Set(func() error { return nil })
	before := time.Now()
	_ = claims.Delete(ctx, "a", metav1.DeleteOptions{})
	h, ok := seen("DELETE " + claimPath)
	at, perr := time.Parse(time.RFC3339Nano, h)
	if !ok || perr != nil || at.Before(before.Add(-time.Millisecond)) || at.After(time.Now()) {
		t.Errorf("with the Lease vouching: sent %v, header %q (%v); want sent, stamped with the check's moment", ok, h, perr)
	}

	// The Lease no longer vouches: no write leaves, and none is retried;
	// reads and the Lease's own writes still go.
	reset()
	lost := errors.New("lease ns/pvc-janitor not renewed for 2s")
	c.Guard.Set(func() error { return lost })
	err = claims.Delete(ctx, "a", metav1.DeleteOptions{})
	if !errors.Is(err, ErrWriteRefused) || !errors.Is(err, lost) {
		t.Errorf("delete after the deadline: %v; want ErrWriteRefused wrapping the Lease's reason", err)
	}
	if transient, _ := Transient(err); transient {
		t.Errorf("a refused write is transient: it would be retried")
	}
	if _, ok := seen("DELETE " + claimPath); ok {
		t.Errorf("a write was sent after the Lease stopped vouching for it")
	}
	_, _ = claims.Get(ctx, "a", metav1.GetOptions{})
	_ = leases.Delete(ctx, "pvc-janitor", metav1.DeleteOptions{})
	if _, ok := seen("GET " + claimPath); !ok {
		t.Errorf("a read was held back")
	}
	if h, ok := seen("DELETE " + leasePath); !ok || h != "" {
		t.Errorf("the Lease's own write: sent %v, header %q; want sent, unstamped", ok, h)
	}
}
