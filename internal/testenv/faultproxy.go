package testenv

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Faults say what a FaultProxy injects. Rates are per request, between 0
// and 1; watches are never faulted (their failures are a different test).
type Faults struct {
	Rate429 float64 // 429 Too Many Requests with Retry-After: 1
	Rate500 float64 // 500 Internal Server Error
	// Verbs limits injection to these HTTP methods (empty: all).
	Verbs []string
}

// FaultProxy is a plain-HTTP reverse proxy in front of the real API server
// that injects failures the real server will not produce on demand, and
// counts what it injected and which writes reached the server.
type FaultProxy struct {
	URL        string
	Kubeconfig string

	// OnRequest, when set, runs before a request is forwarded (tests use
	// it to change the cluster at an exact moment, e.g. just before a
	// DELETE reaches the server).
	OnRequest func(r *http.Request)

	mu       sync.Mutex
	faults   Faults
	rng      *rand.Rand
	injected map[int]int
	writes   []string
}

// StartFaultProxy starts a proxy for the test (stopped at cleanup) and
// writes a kubeconfig that points at it with no credentials: the proxy
// authenticates to the API server as admin.
func (c *Cluster) StartFaultProxy(t testing.TB, seed int64) *FaultProxy {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rest.TransportFor(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{rng: rand.New(rand.NewSource(seed)), injected: map[int]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     tr,
		FlushInterval: -1, // stream watches
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.OnRequest != nil {
			p.OnRequest(r)
		}
		if code := p.decide(r); code != 0 {
			writeStatus(w, code)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			p.mu.Lock()
			p.writes = append(p.writes, r.Method+" "+r.URL.Path)
			p.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["anonymous"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "anonymous", Namespace: "default"}
	cfg.CurrentContext = "proxy"
	dir := t.TempDir()
	p.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

// Set replaces the faults.
func (p *FaultProxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Injected returns how many responses of each status code were injected.
func (p *FaultProxy) Injected() map[int]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int]int{}
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Writes returns the non-GET requests that reached the API server.
func (p *FaultProxy) Writes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes...)
}

func (p *FaultProxy) decide(r *http.Request) int {
	if r.URL.Query().Get("watch") == "true" || strings.Contains(r.URL.Path, "/watch/") {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	if len(f.Verbs) > 0 {
		ok := false
		for _, v := range f.Verbs {
			ok = ok || strings.EqualFold(v, r.Method)
		}
		if !ok {
			return 0
		}
	}
	x := p.rng.Float64()
	switch {
	case x < f.Rate429:
		p.injected[429]++
		return 429
	case x < f.Rate429+f.Rate500:
		p.injected[500]++
		return 500
	}
	return 0
}

func writeStatus(w http.ResponseWriter, code int) {
	reason := map[int]string{429: "TooManyRequests", 500: "InternalError"}[code]
	w.Header().Set("Content-Type", "application/json")
	if code == 429 {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
		"message": fmt.Sprintf("injected by the test proxy (%d)", code),
	})
}

// WriteKubeconfig writes a kubeconfig for the cluster authenticating with a
// bearer token (e.g. a ServiceAccount's, from TokenRequest).
func (c *Cluster) WriteKubeconfig(path, token string) error {
	ca, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["token"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["token"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "token", Namespace: "default"}
	cfg.CurrentContext = "token"
	return clientcmd.WriteToFile(*cfg, path)
}
