package kube

import (
	"net/http"
	"net/url"
	"testing"
	"time"
)

// TestServerClockIsTheCoreServersConsensus (docs/spec.md#rule-server-clock):
// the clock follows the Date headers that the core API server's responses
// agree on. One response ahead (a replica whose clock runs fast, an
// aggregated API proxied through the owner lookup) or behind never moves it
// where the others do not; a response to a path outside the core API server
// (an aggregated group) is not read at all; the responses of one server,
// whose Dates differ by their truncation to the second, give the latest of
// them, as before. Each case sends its responses in order, within
// milliseconds, so a response's offset is its Date's distance from the base.
func TestServerClockIsTheCoreServersConsensus(t *testing.T) {
	base := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC) // years from the host's clock
	type resp struct {
		path   string
		offset time.Duration // its Date, from base
	}
	pods := "/api/v1/namespaces/ws/pods"
	claims := "/api/v1/namespaces/ws/persistentvolumeclaims"
	aggregated := "/apis/custom.metrics.example.com/v1/namespaces/ws/notebooks/nb-1"
	h := time.Hour
	cases := []struct {
		name  string
		host  string // rest.Config's Host, when it carries a path
		resps []resp
		want  time.Duration // the clock's time, from base
	}{
		{"one response", "", []resp{{claims, 0}}, 0},
		{"one server: the latest of Dates a second apart", "", []resp{{claims, 0}, {pods, time.Second}, {claims, time.Second}}, time.Second},
		{"a replica an hour ahead, once, among agreeing responses", "", []resp{{claims, 0}, {pods, 0}, {claims, h}, {pods, 0}}, 0},
		{"a replica an hour ahead answers first", "", []resp{{claims, h}, {pods, 0}, {claims, 0}}, 0},
		{"a replica an hour ahead answers second", "", []resp{{claims, 0}, {pods, h}}, 0},
		{"a replica an hour behind, once", "", []resp{{claims, 0}, {pods, 0}, {claims, -h}}, 0},
		{"an aggregated API an hour ahead is not the API server", "", []resp{{claims, 0}, {aggregated, h}, {aggregated, h}, {aggregated, h}}, 0},
		{"the server's clock stepped forward: most responses since agree", "",
			[]resp{{claims, 0}, {pods, 0}, {claims, 90 * time.Minute}, {pods, 90 * time.Minute}, {claims, 90 * time.Minute}}, 90 * time.Minute},
		{"a server behind a path prefix (a proxy)", "https://proxy.example.com/k8s/clusters/c-1",
			[]resp{{"/k8s/clusters/c-1" + claims, 0}, {"/k8s/clusters/c-1" + pods, 0}, {"/k8s/clusters/c-1" + claims, h}}, 0},
		{"/version and the snapshot API are the API server's", "",
			[]resp{{"/version", 0}, {"/apis/snapshot.storage.k8s.io/v1/namespaces/ws/volumesnapshots", 0}, {claims, h}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newServerClock(tc.host)
			var date string
			rt := c.wrap(roundTripFunc(func(*http.Request) (*http.Response, error) {
				h := http.Header{}
				h.Set("Date", date)
				return &http.Response{StatusCode: 200, Header: h}, nil
			}))
			for _, r := range tc.resps {
				date = base.Add(r.offset).Format(http.TimeFormat)
				if _, err := rt.RoundTrip(&http.Request{URL: &url.URL{Path: r.path}}); err != nil {
					t.Fatal(err)
				}
			}
			want := base.Add(tc.want)
			// Now is the Date followed plus the (local, monotonic) time since
			// it came: within the test's run, well under a second.
			if now := c.Now(); now.Before(want) || !now.Before(want.Add(2*time.Second)) {
				t.Errorf("Now %s, want %s", now, want)
			}
			if latest := c.Latest(); latest.Before(want.Add(time.Second)) || !latest.Before(want.Add(2*time.Second)) {
				t.Errorf("Latest %s, want %s (a Date is cut to the second)", latest, want.Add(time.Second))
			}
		})
	}
}
