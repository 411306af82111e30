//go:build integration

package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/scheme"
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
	// objects counts the objects the janitor read, by resource: the items
	// of every list answer (page by page), and one per get.
	objects map[string]int
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
	rc := &requestCounter{counts: map[string]int{}, objects: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
			r.Out.Header.Del("Authorization")
		},
		Transport:     tr,
		FlushInterval: -1,
		// Lists are read whole here to count their items (the answer is
		// then passed on from memory: a little later than streamed).
		ModifyResponse: func(resp *http.Response) error {
			info := testenv.ParseRequest(resp.Request)
			if resp.StatusCode != http.StatusOK || info.Resource == "" || info.Subresource != "" {
				return nil
			}
			switch info.Verb {
			case "get":
				rc.mu.Lock()
				rc.objects[info.Resource]++
				rc.mu.Unlock()
			case "list":
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					return err
				}
				resp.Body = io.NopCloser(bytes.NewReader(body))
				plain := body
				if resp.Header.Get("Content-Encoding") == "gzip" {
					zr, err := gzip.NewReader(bytes.NewReader(body))
					if err != nil {
						return err
					}
					if plain, err = io.ReadAll(zr); err != nil {
						return err
					}
				}
				n := countItems(plain, resp.Header.Get("Content-Type"))
				rc.mu.Lock()
				if n < 0 {
					// Not readable here: counted apart, so that it shows.
					rc.objects[info.Resource+" (not counted)"]++
				} else {
					rc.objects[info.Resource] += n
				}
				rc.mu.Unlock()
			}
			return nil
		},
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

// takeObjects returns the objects read so far and starts again from zero.
func (rc *requestCounter) takeObjects() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.objects
	rc.objects = map[string]int{}
	return out
}

// countItems counts the items of one list answer: protobuf (core kinds,
// decoded with client-go's scheme) or JSON (the snapshot CRDs). -1 when it
// cannot be read.
func countItems(body []byte, contentType string) int {
	if strings.Contains(contentType, "json") {
		var l struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &l); err != nil {
			return -1
		}
		return len(l.Items)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return -1
	}
	if !meta.IsListType(obj) {
		return -1
	}
	return meta.LenList(obj)
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
