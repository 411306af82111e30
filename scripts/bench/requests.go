//go:build integration

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// requestCounter is a reverse proxy on loopback between one janitor process
// and the API server that counts the janitor's own requests by verb and
// resource ("get volumesnapshots", "patch persistentvolumeclaims"): the API
// server's metrics cannot tell the janitor's requests from the snapshot
// controllers'.
type requestCounter struct {
	srv        *httptest.Server
	kubeconfig string
	mu         sync.Mutex
	counts     map[string]int
}

// startRequestCounter proxies to cfg's server with cfg's credentials and
// writes a kubeconfig (in dir) that reaches it without any.
func startRequestCounter(cfg *rest.Config, dir string) (*requestCounter, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	rc := &requestCounter{counts: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1,
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := testenv.ParseRequest(r)
		key := info.Verb + " " + info.Resource
		if info.Subresource != "" {
			key += "/" + info.Subresource
		}
		if info.Resource == "" {
			key = info.Verb + " " + r.URL.Path // /version, discovery
		}
		rc.mu.Lock()
		rc.counts[key]++
		rc.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	kc := clientcmdapi.NewConfig()
	kc.Clusters["counter"] = &clientcmdapi.Cluster{Server: rc.srv.URL}
	kc.AuthInfos["counter"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["counter"] = &clientcmdapi.Context{Cluster: "counter", AuthInfo: "counter", Namespace: "default"}
	kc.CurrentContext = "counter"
	rc.kubeconfig = filepath.Join(dir, "counter.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, rc.kubeconfig); err != nil {
		rc.srv.Close()
		return nil, err
	}
	return rc, nil
}

// take returns the counts so far and starts again from zero.
func (rc *requestCounter) take() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.counts
	rc.counts = map[string]int{}
	return out
}

func (rc *requestCounter) close() { rc.srv.Close() }

// perClaim renders counts divided by n, the largest first:
// "12 in all, 6.0 per claim: create volumesnapshots 1.00, …".
func perClaim(counts map[string]int, n int) string {
	if n == 0 || len(counts) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(counts))
	total := 0
	for k, v := range counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	rest, restKinds := 0, 0
	for _, k := range keys {
		if per := float64(counts[k]) / float64(n); per >= 0.01 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, per))
			continue
		}
		rest += counts[k]
		restKinds++
	}
	if restKinds > 0 {
		// The once-per-run requests (lists, the Lease, /version).
		parts = append(parts, fmt.Sprintf("%d other kinds of request %d times in all", restKinds, rest))
	}
	return fmt.Sprintf("%d in all, %.2f per claim: %s", total, float64(total)/float64(n), strings.Join(parts, ", "))
}
