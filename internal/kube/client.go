package kube

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned/typed/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// Clients are the API clients a run uses.
type Clients struct {
	// Kube speaks protobuf for core kinds (api.go: the groups the janitor
	// calls, not client-go's Clientset).
	Kube *API
	// Snap speaks JSON (CRDs have no protobuf).
	Snap Snapshots
	// Meta reads the metadata of arbitrary owners.
	Meta metadata.Interface
	// Clock is the API server's clock, from response Date headers.
	Clock *ServerClock
	// Cluster names the kubeconfig cluster (for the report).
	Cluster string
	// Namespace is the kubeconfig context's namespace ("default" if unset).
	Namespace string
	// Retry is the policy of every single API call made with these
	// clients (ClientOptions.Retry; zero: DefaultRetry): one budget,
	// --api-timeout, for the whole run.
	Retry RetryPolicy
	// Uses records the claims this run saw in use after its scan (docs/spec.md#rule-use-restarts-clock:
	// a claim seen in use is never rescued or reaped in that run),
	// so that the reap honours a use a re-check or a re-read saw even when writing it
	// down on the claim failed.
	Uses UseLog
	// Guard holds back the writes the run's Lease no longer vouches for
	// (janitor.Lock sets its check; docs/spec.md#run-lease).
	Guard *WriteGuard
}

// UseLog is the set of claims (by UID) a run saw in use, with what showed
// it. Safe for concurrent use; the zero value is empty and ready.
type UseLog struct {
	mu        sync.Mutex
	seen      map[types.UID]string
	unwritten map[types.UID]string // namespace/name of uses whose mark removal failed
}

// Record notes that the claim with this UID was seen in use.
func (u *UseLog) Record(uid types.UID, what string) {
	if uid == "" {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen == nil {
		u.seen = map[types.UID]string{}
	}
	if _, ok := u.seen[uid]; !ok {
		u.seen[uid] = what
	}
}

// Unwritten notes that the removal of the marks of a claim seen in use
// failed: the use is known to this run only, and a later run on a cluster
// without the Unused condition cannot see it. key names the claim.
func (u *UseLog) Unwritten(uid types.UID, key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.unwritten == nil {
		u.unwritten = map[types.UID]string{}
	}
	u.unwritten[uid] = key
}

// Written notes that the removal of the marks of the claim with this UID
// landed (or that there was nothing left to remove).
func (u *UseLog) Written(uid types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.unwritten, uid)
}

// Unrecorded returns the claims (namespace/name, sorted) whose use this run saw
// and could not write down.
func (u *UseLog) Unrecorded() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, 0, len(u.unwritten))
	for _, k := range u.unwritten {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Seen reports whether the claim with this UID was seen in use, and what
// showed it.
func (u *UseLog) Seen(uid types.UID) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	what, ok := u.seen[uid]
	return what, ok
}

// ClientOptions select and tune the connection.
type ClientOptions struct {
	Kubeconfig string // --kubeconfig; empty: KUBECONFIG, ~/.kube/config, in-cluster
	Context    string // --context
	QPS        float32
	Burst      int
	UserAgent  string
	Retry      RetryPolicy // the Clients' Retry
}

// LoadConfig resolves the kubeconfig as kubectl does and returns the REST
// config, the cluster's name and the context's namespace.
func LoadConfig(o ClientOptions) (*rest.Config, string, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	cluster := cfg.Host
	if raw, err := cc.RawConfig(); err == nil {
		name := raw.CurrentContext
		if o.Context != "" {
			name = o.Context
		}
		if c, ok := raw.Contexts[name]; ok && c.Cluster != "" {
			cluster = c.Cluster
		}
	}
	return cfg, cluster, ns, nil
}

// NewClients builds the clients from a REST config. The clock transport is
// installed on every client, so that every response of the API server
// counts towards the server clock.
func NewClients(cfg *rest.Config, o ClientOptions) (*Clients, error) {
	clock := newServerClock(cfg.Host)
	base := rest.CopyConfig(cfg)
	if o.QPS > 0 {
		base.QPS = o.QPS
	}
	if o.Burst > 0 {
		base.Burst = o.Burst
	}
	if o.UserAgent != "" {
		base.UserAgent = o.UserAgent
	}
	base.Wrap(clock.wrap)
	// Before the first answer, a request unanswered for --request-timeout
	// ends the run (reach.go).
	base.Wrap((&reach{server: cfg.Host, timeout: o.Retry.AttemptTimeout()}).wrap)
	// Outermost, so that a write is checked after the rate limiter's
	// wait, right before it is sent.
	guard := &WriteGuard{}
	base.Wrap(guard.wrap)
	// One rate limiter shared by all clients: --qps is the janitor's total.
	if base.QPS > 0 {
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(base.QPS, max(base.Burst, 1))
	}
	proto := rest.CopyConfig(base)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kube, err := NewAPI(proto)
	if err != nil {
		return nil, err
	}
	snap, err := snapv1.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	return &Clients{Kube: kube, Snap: snapshotAPI{snap}, Meta: meta, Clock: clock, Retry: o.Retry, Guard: guard}, nil
}

// Snapshots is the snapshot API's client: the snapshot Clientset's one
// group, without the Clientset (see api.go for why). The Clientset itself
// satisfies it, so tests may pass one.
type Snapshots interface {
	SnapshotV1() snapv1.SnapshotV1Interface
}

type snapshotAPI struct{ v1 *snapv1.SnapshotV1Client }

func (s snapshotAPI) SnapshotV1() snapv1.SnapshotV1Interface { return s.v1 }

// ServerClock tracks the API server's clock from the Date header of its
// responses. Marks are written on this clock, never the janitor host's, so
// that a skewed CronJob node cannot move a claim's orphaned-since.
//
// The clock is the consensus of the core API server's responses
// (docs/spec.md#rule-server-clock), not the latest Date of any response:
// one replica ahead, or an aggregated API reached by the owner lookup,
// would otherwise shorten grace, notice and min-age for the rest of the
// run. Only responses to the paths the API server itself serves are read
// (coreAPIPath), and of those the last clockWindow are kept as offsets
// from the local monotonic clock (consensus picks one).
type ServerClock struct {
	mu      sync.Mutex
	prefix  string        // the path of the config's Host, before /api and /apis
	samples []clockSample // the last clockWindow responses read, a ring
	next    int           // where the next sample goes once the ring is full
	base    time.Time     // the local (monotonic) time offsets are taken from
	follow  clockSample   // the sample the clock follows (zero: none yet)
	first   time.Time     // the Date of the first response read (zero: none yet)
}

// clockSample is one response's Date and when it arrived, on the local
// monotonic clock.
type clockSample struct {
	date time.Time
	at   time.Time
}

// clockWindow is how many recent responses the consensus is taken over: a
// run's reads alone are a dozen, and a clock that steps (NTP) is followed
// once half the window has seen the new time.
const clockWindow = 31

// newServerClock is the clock of clients whose config's Host is host (a
// proxy may serve the API server under a path prefix).
func newServerClock(host string) *ServerClock {
	c := &ServerClock{}
	if u, err := url.Parse(host); err == nil {
		c.prefix = strings.TrimSuffix(u.Path, "/")
	}
	return c
}

// Now is the server's time: the followed Date plus the local time elapsed
// since. Zero when no response has been seen yet.
func (c *ServerClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.follow.date.IsZero() {
		return time.Time{}
	}
	return c.follow.date.Add(time.Since(c.follow.at)).UTC().Truncate(time.Second)
}

// Latest is an upper bound of the server's time when it served the
// responses the clock follows: a Date header is truncated to the second,
// so the server's clock was short of the followed Date plus one second.
// Marks are taken from this bound right after the lists that prove no use
// (docs/spec.md#rule-mark-time: a mark must never precede the end of a use
// those lists could have missed); it is never below Now. Zero when no
// response has been seen yet.
func (c *ServerClock) Latest() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.follow.date.IsZero() {
		return time.Time{}
	}
	return c.follow.date.Add(max(time.Second, time.Since(c.follow.at))).UTC()
}

// First is the Date of the first response of the API server these
// clients read: its clock at the run's first read, in whole seconds
// (docs/spec.md#notice: a notice ends only for a run begun at or after
// it). Zero when no response has been seen yet.
func (c *ServerClock) First() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// observe reads the Date of a response to path.
func (c *ServerClock) observe(path string, h http.Header) {
	if !coreAPIPath(strings.TrimPrefix(path, c.prefix)) {
		return
	}
	d := h.Get("Date")
	if d == "" {
		return
	}
	t, err := http.ParseTime(d)
	if err != nil {
		return
	}
	s := clockSample{date: t, at: time.Now()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base.IsZero() {
		c.base = s.at
		c.first = t.UTC()
	}
	if len(c.samples) < clockWindow {
		c.samples = append(c.samples, s)
	} else {
		c.samples[c.next] = s
		c.next = (c.next + 1) % clockWindow
	}
	offsets := make([]time.Duration, len(c.samples))
	for i, s := range c.samples {
		// The Date's distance from the local clock when it arrived: the
		// wall clock of the Date against the monotonic one of arrival,
		// both from one base, so that the host's clock never enters.
		offsets[i] = s.date.Sub(c.base.Round(0)) - s.at.Sub(c.base)
	}
	c.follow = c.samples[consensus(offsets)]
}

// consensus returns the index of the offset the clock follows: the
// largest of those at most one second above the (lower) median.
//
// Why the median: one server's responses give offsets within a second of
// each other (each Date is truncated to the second, and arrives within
// milliseconds), all at or below its true offset; a response from another
// clock (a replica ahead or behind, a proxied API) lies outside that
// second. The median ignores any minority of such responses in either
// direction, where the latest Date (the earlier rule) followed any single
// response ahead, and the earliest would follow any single one behind
// (marks dated too early shorten grace just as a clock ahead does). Of
// two that disagree, the lower median takes the earlier: a run then waits
// longer, never shorter. Why the largest within a second above it: that is
// the latest Date of the server the median stands for, the tightest bound
// of its time, as the clock was before.
func consensus(offsets []time.Duration) int {
	sorted := slices.Clone(offsets)
	slices.Sort(sorted)
	median := sorted[(len(sorted)-1)/2]
	best := -1
	for i, o := range offsets {
		if o <= median+time.Second && (best < 0 || o > offsets[best]) {
			best = i
		}
	}
	return best
}

// coreGroups are the API groups of the requests the janitor sends that the
// API server serves itself (snapshot.storage.k8s.io as CRDs). An owner of
// another group may be an aggregated API, served by another server with
// its own clock.
var coreGroups = map[string]bool{
	"apps": true, "batch": true, "storage.k8s.io": true, "coordination.k8s.io": true,
	"events.k8s.io": true, "snapshot.storage.k8s.io": true,
}

// coreAPIPath reports whether a request to path (the config's Host path
// removed) is served by the API server itself.
func coreAPIPath(path string) bool {
	switch {
	case path == "/version" || path == "/api" || strings.HasPrefix(path, "/api/"):
		return true
	case strings.HasPrefix(path, "/apis/"):
		group, _, _ := strings.Cut(strings.TrimPrefix(path, "/apis/"), "/")
		return coreGroups[group]
	}
	return false
}

func (c *ServerClock) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if resp != nil && r.URL != nil {
			c.observe(r.URL.Path, resp.Header)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
