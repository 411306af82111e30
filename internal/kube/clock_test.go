package kube

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestServerClockFollowsTheDateHeader (docs/spec.md#rule-mark-time): the
// clock every client carries is the API server's, from the Date of its
// responses, whatever the host's clock says; an older Date than the others
// agree on never moves it back; a response without a Date, or with one
// that does not parse, leaves it alone; a clock that moved on, as most
// responses since say, is followed (TestServerClockIsTheCoreServersConsensus
// has the rest).
func TestServerClockFollowsTheDateHeader(t *testing.T) {
	server := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC) // years from the host's clock
	var date string
	c := &ServerClock{}
	rt := c.wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
		h := http.Header{}
		if date != "" {
			h.Set("Date", date)
		}
		return &http.Response{StatusCode: 200, Header: h}, nil
	}))
	send := func(d string) {
		t.Helper()
		date = d
		if _, err := rt.RoundTrip(&http.Request{URL: &url.URL{Path: "/api/v1/namespaces/ws/persistentvolumeclaims"}}); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Now().IsZero() || !c.Latest().IsZero() || !c.First().IsZero() {
		t.Fatalf("a clock that saw no response: Now %s, Latest %s; want zero", c.Now(), c.Latest())
	}
	send(server.Format(http.TimeFormat))
	check := func(step string, want time.Time) {
		t.Helper()
		now, latest := c.Now(), c.Latest()
		// Now is the Date plus the (local, monotonic) time since it came:
		// within the test's run, under a minute.
		if now.Before(want) || now.After(want.Add(time.Minute)) {
			t.Errorf("%s: Now %s, want the server's %s (the host says %s)", step, now, want, time.Now().UTC())
		}
		// A Date is cut to the second: the server was short of Date+1s.
		if latest.Before(want.Add(time.Second)) || latest.Before(now) || latest.After(want.Add(time.Minute)) {
			t.Errorf("%s: Latest %s, want at least %s and Now %s", step, latest, want.Add(time.Second), now)
		}
	}
	check("after one response", server)
	send(server.Format(http.TimeFormat))
	send(server.Add(-time.Hour).Format(http.TimeFormat))
	check("after an older Date", server)
	send("")
	send("not a date")
	check("after responses without a usable Date", server)
	later := server.Add(90 * time.Minute)
	for range 4 {
		send(later.Format(http.TimeFormat))
	}
	check("after later Dates, most of those seen", later)
	// The run began with its first response, whatever came after
	// (docs/spec.md#notice).
	if first := c.First(); !first.Equal(server) {
		t.Errorf("First %s, want the first response's Date %s", first, server)
	}
}
