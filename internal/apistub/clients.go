package apistub

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// Fast is a retry policy of milliseconds, within maxElapsed: a stub's
// failures are retried without slowing the tests.
func Fast(maxElapsed time.Duration) kube.RetryPolicy {
	return kube.RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: maxElapsed}
}

// Clients serves h on a loopback httptest server for the test's life and
// connects the janitor's clients to it as the command does
// (kube.NewClients: protobuf for the core kinds, the server's clock from
// the responses' Date), without a rate limiter, with retry.
func Clients(t testing.TB, h http.Handler, retry kube.RetryPolicy) *kube.Clients {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	c, err := kube.NewClients(cfg, kube.ClientOptions{Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// CheckRequests compares the requests a stub saw with want, in order.
func CheckRequests(t testing.TB, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// ByVerbAndResource counts a log's entries as "VERB resource" (the
// object's name and the options dropped): what a loopback proxy in front
// of a real API server counts in make bench.
func ByVerbAndResource(log []string) map[string]int {
	out := map[string]int{}
	for _, l := range log {
		verb, rest, _ := strings.Cut(l, " ")
		resource, _, _ := strings.Cut(rest, " ")
		resource, _, _ = strings.Cut(resource, "/")
		out[verb+" "+resource]++
	}
	return out
}

// PerClaim renders counts divided by n, most frequent first.
func PerClaim(counts map[string]int, n int) string {
	keys := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(keys, func(a, b string) int { return counts[b] - counts[a] })
	var parts []string
	total := 0
	for _, k := range keys {
		total += counts[k]
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(n)))
	}
	return fmt.Sprintf("%.2f per claim: %s", float64(total)/float64(n), strings.Join(parts, ", "))
}
