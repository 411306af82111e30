package lock

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestExpired is the renew deadline of docs/spec.md#run-lease: two thirds of --lock-duration
// after the last successful renewal, the run stops acting.
func TestExpired(t *testing.T) {
	for _, c := range []struct {
		name     string
		since    time.Duration // now - last successful renewal
		duration time.Duration
		want     bool
	}{
		{"just renewed", 0, time.Minute, false},
		{"one renewal period late", 20 * time.Second, time.Minute, false},
		{"just before the deadline", 40*time.Second - time.Millisecond, time.Minute, false},
		{"at the deadline (two thirds)", 40 * time.Second, time.Minute, true},
		{"past the deadline, before expiry", 50 * time.Second, time.Minute, true},
		{"past expiry", 2 * time.Minute, time.Minute, true},
		{"3s lease, 1.9s without renewal", 1900 * time.Millisecond, 3 * time.Second, false},
		{"3s lease, 2s without renewal", 2 * time.Second, 3 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Expired(t0, t0.Add(c.since), c.duration); got != c.want {
				t.Fatalf("Lost after %s of a %s lease = %v, want %v", c.since, c.duration, got, c.want)
			}
		})
	}
	// A stalled call must leave room before the deadline: it is bounded
	// well below it, and so is the pause after a failure.
	for _, d := range []time.Duration{time.Second, 3 * time.Second, time.Minute} {
		if renewTimeout(d)+retryPeriod(d) >= RenewDeadline(d)-d/3 {
			t.Errorf("%s lease: a renewal call (%s) and a retry pause (%s) do not fit twice in the time between a renewal and the deadline",
				d, renewTimeout(d), retryPeriod(d))
		}
	}
}

// leaseServer is the Lease API of one lease, enough for Acquire, renew
// and Release, with switches to stall renewals or hand the lease to
// another holder.
type leaseServer struct {
	mu      sync.Mutex
	lease   *coordv1.Lease
	rv      int
	stall   bool // PUTs hang until the client gives up
	stalled chan struct{}
	gaveUp  int // stalled PUTs the client cancelled
	puts    int
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if r.Method == http.MethodPut && s.stall {
		s.mu.Unlock()
		// The server sees the client hang up only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case s.stalled <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		s.mu.Lock()
		s.gaveUp++
		s.mu.Unlock()
		return
	}
	defer s.mu.Unlock()
	status := func(code int, reason string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(code), Reason: metav1.StatusReason(reason), Message: reason})
	}
	reply := func(code int) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		l := s.lease.DeepCopy()
		l.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
		_ = json.NewEncoder(w).Encode(l)
	}
	read := func() *coordv1.Lease {
		var l coordv1.Lease
		if err := json.NewDecoder(r.Body).Decode(&l); err != nil {
			return nil
		}
		return &l
	}
	switch r.Method {
	case http.MethodGet:
		if s.lease == nil {
			status(404, "NotFound")
			return
		}
		reply(200)
	case http.MethodPost:
		if s.lease != nil {
			status(409, "AlreadyExists")
			return
		}
		s.lease = read()
		s.rv++
		s.lease.ResourceVersion, s.lease.UID = strconv.Itoa(s.rv), "lease-uid"
		reply(201)
	case http.MethodPut:
		s.puts++
		l := read()
		if s.lease == nil {
			status(404, "NotFound")
			return
		}
		if l.ResourceVersion != s.lease.ResourceVersion {
			status(409, "Conflict")
			return
		}
		s.rv++
		s.lease = l
		s.lease.ResourceVersion = strconv.Itoa(s.rv)
		reply(200)
	case http.MethodDelete:
		s.lease = nil
		status(200, "")
	}
}

// takeOver makes another run the holder, as its take-over of an expired
// lease would.
func (s *leaseServer) takeOver(holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	s.lease = s.lease.DeepCopy()
	s.lease.Spec.HolderIdentity = &holder
	s.lease.ResourceVersion = strconv.Itoa(s.rv)
}

func start(t *testing.T, s *leaseServer, d time.Duration) *Lease {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return acquire(t, &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, d)
}

// inProcess serves each request by calling the handler directly: no
// socket, so a test in a synctest bubble sees every wait of the lease's
// renewals as durable, and its clock is the bubble's.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// startInProcess is start with the lease server called in process.
func startInProcess(t *testing.T, s *leaseServer, d time.Duration) *Lease {
	t.Helper()
	// QPS -1: no client-side rate limiter, whose 5 per second a renewal
	// every 100 ms would exceed (the janitor's own client sets --qps).
	return acquire(t, &rest.Config{Host: "http://lease.invalid", Transport: inProcess{s}, QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, d)
}

func acquire(t *testing.T, cfg *rest.Config, d time.Duration) *Lease {
	t.Helper()
	cs, err := kube.NewAPI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(context.Background(), &kube.Clients{Kube: cs, Clock: &kube.ServerClock{},
		Retry: kube.RetryPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxElapsed: time.Second}}, "ns", d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return l
}

// waitLost waits (bounded) for the lease to count as lost.
func waitLost(t *testing.T, l *Lease, bound time.Duration) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(bound):
		t.Fatalf("the lease was not given up within %s", bound)
	}
}

// TestRenewalStallLosesTheLease: renewals that hang (the API server accepts
// the connection and never answers) must not leave the run acting: each
// call is cancelled, and the lease counts as lost by its renew deadline.
func TestRenewalStallLosesTheLease(t *testing.T) {
	s := &leaseServer{stalled: make(chan struct{}, 1)}
	const d = 600 * time.Millisecond
	l := start(t, s, d)
	s.mu.Lock()
	s.stall = true
	s.mu.Unlock()
	<-s.stalled
	waitLost(t, l, 20*d)
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "not renewed for") {
		t.Fatalf("lost lease error %v, want one naming the renew deadline", err)
	}
	// The stalled call was abandoned by the client, not left hanging.
	for i := 0; ; i++ {
		s.mu.Lock()
		gaveUp := s.gaveUp
		s.mu.Unlock()
		if gaveUp > 0 {
			break
		}
		if i == 100 {
			t.Fatal("no stalled renewal was cancelled by the client: a renewal call is not bounded")
		}
		time.Sleep(d / 10)
	}
}

// TestRenewalFindsTakeOver: another run took the lease over; the next
// renewal meets a conflict, reads the lease and gives it up, naming the
// new holder.
func TestRenewalFindsTakeOver(t *testing.T) {
	s := &leaseServer{}
	const d = 600 * time.Millisecond
	l := start(t, s, d)
	s.takeOver("other-run")
	waitLost(t, l, 20*d)
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), `taken over by "other-run"`) {
		t.Fatalf("lost lease error %v, want one naming the new holder", err)
	}
}

// TestRenewalKeepsAHealthyLease: renewals that succeed keep the lease past
// several deadlines, and Release deletes it. It runs in a synctest bubble
// with the server in process: the bubble's clock moves only when every
// goroutine waits, so a busy machine cannot make a renewal late, and ten
// lease durations pass without anyone sleeping for them.
func TestRenewalKeepsAHealthyLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &leaseServer{}
		const d = 300 * time.Millisecond
		l := startInProcess(t, s, d)
		select {
		case <-l.Lost():
			t.Fatalf("a renewed lease was given up: %v", l.Err())
		case <-time.After(10 * d): // the bubble's clock: ten lease durations, 15 renew deadlines
		}
		s.mu.Lock()
		puts := s.puts
		s.mu.Unlock()
		// One renewal per third of the lease: about 30 in ten durations.
		if puts < 20 {
			t.Fatalf("%d renewals in %s of a %s lease, want one every third of it", puts, 10*d, d)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.lease != nil {
			t.Fatal("release left the lease")
		}
	})
}

// TestCheckStopsAtTheRenewDeadline: Check vouches for a write only while
// the last successful write of the lease was sent less than two thirds of
// its duration ago, on the local clock, whether or not the renewal has
// noticed yet (a process stopped past its deadline and let go on), and
// never once the lease is lost.
func TestCheckStopsAtTheRenewDeadline(t *testing.T) {
	d := 3 * time.Second
	for _, c := range []struct {
		name string
		ago  time.Duration
		lost bool
		ok   bool
	}{
		{"renewed just now", 0, false, true},
		{"a moment before the deadline", RenewDeadline(d) - 200*time.Millisecond, false, true},
		{"at the deadline", RenewDeadline(d), false, false},
		{"long past it (stopped, then let go on)", 5 * time.Second, false, false},
		{"lost", 0, true, false},
	} {
		l := &Lease{ns: "ns", duration: d, lost: make(chan struct{})}
		l.setOK(time.Now().Add(-c.ago))
		if c.lost {
			l.err = errors.New("taken over")
			close(l.lost)
		}
		if err := l.Check(); (err == nil) != c.ok {
			t.Errorf("%s: Check() = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
