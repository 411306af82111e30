//go:build integration

package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Kinds of injected faults, the keys of FaultProxy.InjectedByKind.
const (
	Kind429          = "429"           // 429 Too Many Requests, Retry-After: 1
	Kind500          = "500"           // 500 Internal Server Error
	Kind503          = "503"           // 503 Service Unavailable, no Retry-After
	Kind404          = "404"           // 404 Not Found (an API that is not installed)
	KindGone         = "410-gone"      // 410 Gone (reason Expired) on a list continuation
	KindReset        = "reset"         // connection reset before the request reached the server
	KindLostResponse = "lost-response" // request applied by the server, then the connection reset
	KindLatency      = "latency"       // delay added before forwarding
	KindWatchCut     = "watch-cut"     // watch stream cut mid-way (cleanly or abruptly)
	KindHang         = "hang"          // no response at all until HangFor, then a reset
	KindTruncate     = "truncate"      // a list response cut at a random byte, then a reset
)

// Faults say what a FaultProxy injects. Rates are per request, between 0
// and 1; the status, reset, lost-response and hang rates are exclusive
// (their sum should stay at most 1), latency comes on top of any of them.
//
// By default watches only get cut (RateWatchCut); WatchOpen makes the
// status, reset and latency faults apply to opening a watch too.
type Faults struct {
	Rate429 float64 // 429 Too Many Requests with Retry-After: 1
	Rate500 float64 // 500 Internal Server Error
	// Verbs limits injection to these HTTP methods (empty: all). Rules
	// match Kubernetes verbs instead.
	Verbs []string

	Rate503 float64 // 503 Service Unavailable (no Retry-After: the client's own backoff)
	Rate404 float64 // 404 Not Found, as a missing API (e.g. the snapshot CRDs) answers
	// RateReset resets the TCP connection before the request reaches the
	// API server: nothing happened, the client sees ECONNRESET.
	RateReset float64
	// RateLostResponse forwards the request (a write takes effect) and then
	// resets the connection: the client cannot know it succeeded. Not for
	// watches (see RateHang).
	RateLostResponse float64
	// RateHang holds the request without an answer (nothing reaches the
	// server) for HangFor (default 1m) or until the client gives up, then
	// resets the connection: an API server or load balancer that accepted
	// the connection and stalls.
	RateHang float64
	HangFor  time.Duration
	// RateGone answers a list continuation (a request with ?continue=)
	// with 410 Gone, reason Expired, as when the list's snapshot was
	// compacted away.
	RateGone float64
	// RateLatency adds a uniformly random delay of up to Latency (default
	// 200ms) before forwarding.
	RateLatency float64
	Latency     time.Duration
	// RateWatchCut cuts a watch stream after a random time of up to
	// WatchCutAfter (default 2s): half of the cuts end the stream cleanly,
	// half abort the connection mid-chunk.
	RateWatchCut  float64
	WatchCutAfter time.Duration
	// RateTruncate sends a list response (status 200) only up to a random
	// byte of its body, then resets the connection: a server or proxy that
	// died in the middle of a large list.
	RateTruncate float64
	// WatchOpen applies the status, reset and latency faults to requests
	// that open a watch as well.
	WatchOpen bool
	// Resources limits injection to these resources (plural, e.g. "pods",
	// "leases"; empty: all).
	Resources []string

	// Rules give faults per verb and resource: the first rule that matches
	// a request (and has injections left) supplies the faults for it
	// instead of the fields above.
	Rules []Rule

	// DateOffset moves the Date header of every response the proxy sends
	// (forwarded or injected) by this much: an API server whose clock is
	// skewed from the janitor host's. Rules do not change it.
	DateOffset time.Duration
	// DateOffsetFor moves the Date of the responses to requests for these
	// resources (plural, e.g. "pods") by this much instead: a server clock
	// that jumps between one list and the next, to tell which list a time
	// was taken after.
	DateOffsetFor map[string]time.Duration
}

// Rule is a set of faults for the requests it matches.
type Rule struct {
	// Verbs are Kubernetes verbs: get, list, watch, create, update, patch,
	// delete, deletecollection (empty: all).
	Verbs []string
	// Groups are API groups ("" is core; empty list: all), e.g.
	// "snapshot.storage.k8s.io". Discovery requests of a group match too.
	Groups []string
	// Resources are plural resource names (empty: all).
	Resources []string
	// Times caps how many faults the rule injects (0: no cap); once spent,
	// the rule no longer matches.
	Times int
	// Faults are the rates for matching requests (their own Verbs,
	// Resources and Rules are ignored).
	Faults Faults
}

// RequestInfo is what the proxy understood of a request.
type RequestInfo struct {
	// Verb is the Kubernetes verb (get, list, watch, create, update,
	// patch, delete, deletecollection), or the lower-case HTTP method for
	// paths that are not resources (discovery, /version).
	Verb                                  string
	Group, Version, Resource, Subresource string
	Namespace, Name                       string
	// Continue is set on a list continuation.
	Continue bool
}

// FaultProxy is a plain-HTTP reverse proxy in front of the real API server
// that injects failures the real server will not produce on demand, and
// counts what it injected and which writes reached the server.
//
// The proxy draws every decision from one seeded generator; with concurrent
// clients the order of requests, and so the exact faults, still vary from
// run to run: a seed reproduces the rates and the test's own choices, not
// every single fault.
type FaultProxy struct {
	URL        string
	Kubeconfig string

	// OnRequest, when set, runs before a request is forwarded (tests use
	// it to change the cluster at an exact moment, e.g. just before a
	// DELETE reaches the server).
	OnRequest func(r *http.Request)
	// OnForward, when set, runs just before a request goes to the API
	// server, after any injected delay, when the client will get the whole
	// answer (never for a request that a fault answered instead, nor for a
	// lost response or a truncated list): the moment the server is about to
	// see a request whose answer the client will act on.
	OnForward func(r *http.Request)
	// OnAnswer, when set, runs after the API server answered a request,
	// whether or not the client heard the answer (lost responses and
	// truncated lists included): every request the server saw. Never for
	// a request that a fault answered instead.
	OnAnswer func(r *http.Request, a Answer)

	dir      string
	caPEM    []byte        // the proxy's own CA when it serves TLS
	stop     chan struct{} // closed when the test ends
	mu       sync.Mutex
	faults   Faults
	used     []int // injections per rule of faults.Rules
	rng      *rand.Rand
	injected map[int]int
	byKind   map[string]int
	detail   map[string]int
	writes   []string
	requests int
}

// ProxyOptions configure StartFaultProxyWith.
type ProxyOptions struct {
	// PassCredentials makes the proxy forward the client's own
	// Authorization header (and nothing else) instead of authenticating
	// as admin: RBAC and authentication are the real server's, e.g. for a
	// ServiceAccount token (see TokenKubeconfig). The proxy then serves
	// HTTPS (its kubeconfigs carry its CA): client-go sends credentials
	// only over TLS.
	PassCredentials bool
}

// StartFaultProxy starts a proxy for the test (stopped at cleanup) and
// writes a kubeconfig that points at it with no credentials: the proxy
// authenticates to the API server as admin.
func (c *Cluster) StartFaultProxy(t testing.TB, seed int64) *FaultProxy {
	t.Helper()
	return c.StartFaultProxyWith(t, seed, ProxyOptions{})
}

// StartFaultProxyWith is StartFaultProxy with options.
func (c *Cluster) StartFaultProxyWith(t testing.TB, seed int64, o ProxyOptions) *FaultProxy {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	upstream := c.Config
	if o.PassCredentials {
		upstream = rest.AnonymousClientConfig(c.Config)
	}
	tr, err := rest.TransportFor(upstream)
	if err != nil {
		t.Fatal(err)
	}
	quiet := log.New(io.Discard, "", 0)
	p := &FaultProxy{rng: rand.New(rand.NewSource(seed)), injected: map[int]int{}, stop: make(chan struct{}),
		byKind: map[string]int{}, detail: map[string]int{}, dir: t.TempDir()}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			if !o.PassCredentials {
				r.Out.Header.Del("Authorization")
			}
		},
		Transport:     tr,
		FlushInterval: -1, // stream watches
		ErrorLog:      quiet,
		ModifyResponse: func(resp *http.Response) error {
			p.skewDate(resp.Header, resp.Request)
			return nil
		},
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.serve(rp, w, r)
	}))
	srv.Config.ErrorLog = quiet
	if o.PassCredentials {
		// kubectl's loading rules drop credentials for a plain-HTTP
		// server: a proxy that must see the client's token speaks TLS.
		srv.StartTLS()
		p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	// Runs before srv.Close (cleanups run last-in first-out): hung and
	// delayed requests end, so Close does not wait for them.
	t.Cleanup(func() { close(p.stop) })
	p.URL = srv.URL
	p.Kubeconfig = filepath.Join(p.dir, "kubeconfig")
	if err := p.writeKubeconfig(p.Kubeconfig, ""); err != nil {
		t.Fatal(err)
	}
	return p
}

// TokenKubeconfig writes a kubeconfig that reaches the API server through
// the proxy with a bearer token, and returns its path. Use it with
// ProxyOptions.PassCredentials.
func (p *FaultProxy) TokenKubeconfig(t testing.TB, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := p.writeKubeconfig(path, token); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *FaultProxy) writeKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["proxy-user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy-user", Namespace: "default"}
	cfg.CurrentContext = "proxy"
	return clientcmd.WriteToFile(*cfg, path)
}

// Set replaces the faults (and restarts the rules' Times).
func (p *FaultProxy) Set(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	p.used = make([]int, len(f.Rules))
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

// InjectedByKind returns how many faults of each kind (Kind429, …) were
// injected.
func (p *FaultProxy) InjectedByKind() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.byKind {
		out[k] = v
	}
	return out
}

// InjectedDetail returns the injections keyed by "kind verb resource",
// e.g. "410-gone list pods".
func (p *FaultProxy) InjectedDetail() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.detail {
		out[k] = v
	}
	return out
}

// Writes returns the non-GET requests that reached the API server, as
// "METHOD path".
func (p *FaultProxy) Writes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.writes...)
}

// Requests returns how many requests the proxy received.
func (p *FaultProxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// FormatCounts renders counts by kind in a stable order, for logs and
// docs: "429=3 500=1".
func FormatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// plan is what the proxy does with one request.
type plan struct {
	kind     string // the exclusive fault, "" for none
	latency  time.Duration
	hang     time.Duration
	cutAfter time.Duration
	abrupt   bool
	cutAt    float64 // where a truncated body ends, as a fraction of it
}

func (p *FaultProxy) serve(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	if p.OnRequest != nil {
		p.OnRequest(r)
	}
	info := ParseRequest(r)
	pl := p.decide(r, info)
	switch pl.kind {
	case Kind429, Kind500, Kind503, Kind404, KindGone:
		p.skewDate(w.Header(), r) // an injected answer comes from the same skewed server
	}
	if pl.latency > 0 {
		t := time.NewTimer(pl.latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-p.stop:
			t.Stop()
			return
		}
	}
	switch pl.kind {
	case Kind429:
		writeStatus(w, 429, "")
		return
	case Kind500:
		writeStatus(w, 500, "")
		return
	case Kind503:
		writeStatus(w, 503, "")
		return
	case Kind404:
		writeStatus(w, 404, "")
		return
	case KindGone:
		writeStatus(w, 410, "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		return
	case KindReset:
		resetConn(w)
		return
	case KindHang:
		t := time.NewTimer(pl.hang)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		case <-p.stop:
			t.Stop()
		}
		resetConn(w)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		p.mu.Lock()
		p.writes = append(p.writes, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
	}
	if p.OnForward != nil && pl.kind != KindLostResponse && pl.kind != KindTruncate {
		p.OnForward(r)
	}
	if p.OnAnswer != nil {
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		a := Answer{Sent: time.Now(), Heard: pl.kind != KindLostResponse && pl.kind != KindTruncate}
		defer func() {
			a.Done, a.Code = time.Now(), cw.code
			p.OnAnswer(r, a)
		}()
		w = cw
	}
	switch {
	case pl.kind == KindLostResponse:
		// The server applies the request; the client never hears of it.
		dw := &discardWriter{h: http.Header{}, code: http.StatusOK}
		rp.ServeHTTP(dw, r)
		if cw, ok := w.(*codeWriter); ok {
			cw.code = dw.code
		}
		resetConn(w)
	case pl.kind == KindTruncate:
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		if rec.Code != http.StatusOK || len(body) < 2 {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
		// Chunked, so that the client sees a broken body and not a
		// short one it could take for the whole.
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:int(pl.cutAt*float64(len(body)-1))])
		w.(http.Flusher).Flush()
		resetConn(w)
	case pl.kind == KindWatchCut:
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		t := time.AfterFunc(pl.cutAfter, cancel)
		defer t.Stop()
		func() {
			defer func() {
				// ReverseProxy aborts the response (panics with
				// ErrAbortHandler) when its upstream is cancelled
				// mid-body; a clean cut swallows that and ends the
				// stream properly, an abrupt one lets it through.
				if v := recover(); v != nil && (v != http.ErrAbortHandler || pl.abrupt) {
					panic(v)
				}
			}()
			rp.ServeHTTP(w, r.WithContext(ctx))
		}()
	default:
		rp.ServeHTTP(w, r)
	}
}

// skewDate moves h's Date (now when it has none), of the response to r, by
// Faults.DateOffsetFor of r's resource, else by Faults.DateOffset.
func (p *FaultProxy) skewDate(h http.Header, r *http.Request) {
	p.mu.Lock()
	off := p.faults.DateOffset
	if o, ok := p.faults.DateOffsetFor[ParseRequest(r).Resource]; ok {
		off = o
	}
	p.mu.Unlock()
	if off == 0 {
		return
	}
	d, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		d = time.Now()
	}
	h.Set("Date", d.Add(off).UTC().Format(http.TimeFormat))
}

// decide draws the faults for one request.
func (p *FaultProxy) decide(r *http.Request, info RequestInfo) plan {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	f, rule := p.faults, -1
	for i := range p.faults.Rules {
		ru := &p.faults.Rules[i]
		if ru.matches(info) && (ru.Times == 0 || p.used[i] < ru.Times) {
			f, rule = ru.Faults, i
			break
		}
	}
	if rule < 0 && !f.applies(r, info) {
		return plan{}
	}
	var pl plan
	note := func(kind string) {
		p.byKind[kind]++
		p.detail[kind+" "+info.Verb+" "+info.Resource]++
		if rule >= 0 {
			p.used[rule]++
		}
	}
	watch := info.Verb == "watch"
	if !watch || f.WatchOpen {
		lost := f.RateLostResponse
		if watch {
			lost = 0 // a watch that was opened and never answered is a hang
		}
		x := p.rng.Float64()
		for _, c := range []struct {
			kind string
			rate float64
			code int
		}{
			{Kind429, f.Rate429, 429}, {Kind500, f.Rate500, 500}, {Kind503, f.Rate503, 503},
			{Kind404, f.Rate404, 404}, {KindReset, f.RateReset, 0}, {KindLostResponse, lost, 0},
			{KindHang, f.RateHang, 0},
		} {
			if x < c.rate {
				pl.kind = c.kind
				if c.code != 0 {
					p.injected[c.code]++
				}
				if c.kind == KindHang {
					pl.hang = f.HangFor
					if pl.hang <= 0 {
						pl.hang = time.Minute
					}
				}
				note(c.kind)
				break
			}
			x -= c.rate
		}
		if f.RateLatency > 0 && p.rng.Float64() < f.RateLatency {
			max := f.Latency
			if max <= 0 {
				max = 200 * time.Millisecond
			}
			pl.latency = time.Duration(p.rng.Int63n(int64(max)) + 1)
			note(KindLatency)
		}
	}
	if pl.kind == "" && info.Continue && f.RateGone > 0 && p.rng.Float64() < f.RateGone {
		pl.kind = KindGone
		p.injected[410]++
		note(KindGone)
	}
	if pl.kind == "" && info.Verb == "list" && f.RateTruncate > 0 && p.rng.Float64() < f.RateTruncate {
		pl.kind = KindTruncate
		pl.cutAt = p.rng.Float64()
		note(KindTruncate)
	}
	if pl.kind == "" && watch && f.RateWatchCut > 0 && p.rng.Float64() < f.RateWatchCut {
		max := f.WatchCutAfter
		if max <= 0 {
			max = 2 * time.Second
		}
		pl.kind = KindWatchCut
		pl.cutAfter = time.Duration(p.rng.Int63n(int64(max)) + 1)
		pl.abrupt = p.rng.Intn(2) == 0
		note(KindWatchCut)
	}
	return pl
}

// applies reports whether the top-level faults cover a request (their HTTP
// method and resource filters).
func (f *Faults) applies(r *http.Request, info RequestInfo) bool {
	if len(f.Verbs) > 0 && !containsFold(f.Verbs, r.Method) {
		return false
	}
	if len(f.Resources) > 0 && !containsFold(f.Resources, info.Resource) {
		return false
	}
	return true
}

func (ru *Rule) matches(info RequestInfo) bool {
	if len(ru.Verbs) > 0 && !containsFold(ru.Verbs, info.Verb) {
		return false
	}
	if len(ru.Groups) > 0 {
		ok := false
		for _, g := range ru.Groups {
			ok = ok || g == info.Group
		}
		if !ok {
			return false
		}
	}
	if len(ru.Resources) > 0 && !containsFold(ru.Resources, info.Resource) {
		return false
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// ParseRequest reads the Kubernetes verb, group, resource, namespace and
// name from a request's method, path and query.
func ParseRequest(r *http.Request) RequestInfo {
	var info RequestInfo
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	watch := false
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		info.Version, parts = parts[1], parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		info.Group, info.Version, parts = parts[1], parts[2], parts[3:]
	case len(parts) == 2 && parts[0] == "apis":
		info.Group, parts = parts[1], nil
	default:
		parts = nil
	}
	if len(parts) > 0 && parts[0] == "watch" {
		watch, parts = true, parts[1:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		info.Namespace, parts = parts[1], parts[2:]
	} else if len(parts) == 2 && parts[0] == "namespaces" {
		info.Namespace = parts[1]
	}
	if len(parts) > 0 {
		info.Resource = parts[0]
	}
	if len(parts) > 1 {
		info.Name = parts[1]
	}
	if len(parts) > 2 {
		info.Subresource = strings.Join(parts[2:], "/")
	}
	q := r.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" {
		watch = true
	}
	info.Continue = q.Get("continue") != ""
	switch {
	case info.Resource == "":
		info.Verb = strings.ToLower(r.Method)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		switch {
		case watch:
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		default:
			info.Verb = "get"
		}
	case r.Method == http.MethodPost:
		info.Verb = "create"
	case r.Method == http.MethodPut:
		info.Verb = "update"
	case r.Method == http.MethodPatch:
		info.Verb = "patch"
	case r.Method == http.MethodDelete && info.Name == "":
		info.Verb = "deletecollection"
	case r.Method == http.MethodDelete:
		info.Verb = "delete"
	default:
		info.Verb = strings.ToLower(r.Method)
	}
	return info
}

// resetConn closes the client's connection with a TCP RST (SO_LINGER 0):
// the client sees "connection reset by peer", not a response.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// discardWriter swallows a response the client must never see.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }

// Answer is what the API server did with one request (OnAnswer).
type Answer struct {
	// Sent is when the proxy sent the request to the server, Done when
	// the server's answer ended.
	Sent, Done time.Time
	// Code is the status the server answered.
	Code int
	// Heard is whether the client got the whole answer: false for a lost
	// response or a truncated list.
	Heard bool
}

// codeWriter remembers the status code written through it (OnAnswer).
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands over the connection (resetConn).
func (c *codeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := c.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer cannot hijack its connection")
	}
	return hj.Hijack()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func writeStatus(w http.ResponseWriter, code int, message string) {
	reason := map[int]string{404: "NotFound", 410: "Expired", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}[code]
	if message == "" {
		message = http.StatusText(code)
	}
	w.Header().Set("Content-Type", "application/json")
	if code == 429 {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
		"message": fmt.Sprintf("%s (injected by the test proxy (%d))", message, code),
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
