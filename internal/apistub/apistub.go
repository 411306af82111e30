// Package apistub is the in-process STUB of the API server that the loop
// tests of prune, reap and rescue share: not a fake of Kubernetes, but the
// pieces of an httptest server that serves only what one loop sends,
// records every request in order and injects failures. Each package's
// stub keeps its few objects and its answers (what its tests pin); the
// parsing of a request, the log, the injected failures, the answers'
// encodings, the patches and the clients are written once, here.
//
// Imported by tests only (internal/archtest checks it): how the real API
// server answers is tested against a real one.
package apistub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Request is what a stub reads of one request.
type Request struct {
	// Verb is the HTTP method, but LIST for a GET of no name and WATCH
	// for a GET with watch=true.
	Verb     string
	Resource string // plural, lower case: "volumesnapshots"
	Name     string // "" for a list, a watch or a create
	Query    url.Values
	Header   http.Header
	Body     []byte // not read for a watch
}

// Parse reads the path of a core (/api/v1/…) or group (/apis/g/v/…)
// request, namespaced or not, and its body; false when the path is
// neither.
func Parse(r *http.Request) (*Request, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := &Request{Verb: r.Method, Query: r.URL.Query(), Header: r.Header}
	switch {
	case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces":
		q.Resource, q.Name = parts[4], at(parts, 5)
	case len(parts) >= 6 && parts[0] == "apis" && parts[3] == "namespaces":
		q.Resource, q.Name = parts[5], at(parts, 6)
	case len(parts) >= 3 && parts[0] == "api":
		q.Resource, q.Name = parts[2], at(parts, 3)
	case len(parts) >= 4 && parts[0] == "apis":
		q.Resource, q.Name = parts[3], at(parts, 4)
	default:
		return nil, false
	}
	switch {
	case q.Verb == http.MethodGet && q.Query.Get("watch") == "true":
		q.Verb = "WATCH"
		return q, true
	case q.Verb == http.MethodGet && q.Name == "":
		q.Verb = "LIST"
	}
	q.Body, _ = io.ReadAll(r.Body)
	return q, true
}

func at(parts []string, i int) string {
	if i < len(parts) {
		return parts[i]
	}
	return ""
}

// Key is "VERB resource": what Inject looks up and a log without names
// records.
func (q *Request) Key() string { return q.Verb + " " + q.Resource }

// Entry is "VERB resource/name" ("VERB resource" without a name).
func (q *Request) Entry() string {
	if q.Name == "" {
		return q.Key()
	}
	return q.Key() + "/" + q.Name
}

// DeleteOptions are a DELETE's options (its preconditions), sent in JSON
// or, for a core kind by kube.NewClients' clients, protobuf.
func (q *Request) DeleteOptions() metav1.DeleteOptions {
	var o metav1.DeleteOptions
	if raw, ok := unwrap(q.Body); ok {
		_ = o.Unmarshal(raw)
		return o
	}
	_ = json.Unmarshal(q.Body, &o)
	return o
}

// Preconditions names a delete's preconditions as the logs record them:
// " uid=U rv=R", or " without preconditions" unless both are set.
func Preconditions(o metav1.DeleteOptions) string {
	if p := o.Preconditions; p != nil && p.UID != nil && p.ResourceVersion != nil {
		return " uid=" + string(*p.UID) + " rv=" + *p.ResourceVersion
	}
	return " without preconditions"
}

// Deletable is the object of name in m that a delete with o may delete,
// checked as the API server checks it: a missing object is answered with
// a 404 of gr, preconditions (UID, resourceVersion) that do not hold with
// a 409; false then. The caller deletes it and answers.
func Deletable[T metav1.Object](w http.ResponseWriter, m map[string]T, name string, gr schema.GroupResource, o metav1.DeleteOptions) (T, bool) {
	obj, ok := m[name]
	if !ok {
		WriteStatus(w, apierrors.NewNotFound(gr, name))
		return obj, false
	}
	if p := o.Preconditions; p != nil && (p.UID != nil && *p.UID != obj.GetUID() || p.ResourceVersion != nil && *p.ResourceVersion != obj.GetResourceVersion()) {
		WriteStatus(w, apierrors.NewConflict(gr, name, fmt.Errorf("the precondition failed")))
		return obj, false
	}
	return obj, true
}

// Lose answers with a 500 while *n is above zero, which it counts down,
// and reports whether it did: the response of a delete that was done is
// lost.
func Lose(w http.ResponseWriter, n *int) bool {
	if *n <= 0 {
		return false
	}
	*n--
	WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("the response was lost")))
	return true
}

// Log is the requests a stub saw, in order; safe for concurrent use.
type Log struct {
	mu      sync.Mutex
	entries []string
}

// Add records one request.
func (l *Log) Add(entry string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entry)
}

// Requests are the entries so far.
func (l *Log) Requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

// Reset forgets the entries so far.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = nil
}

// Count is how many entries begin with prefix.
func (l *Log) Count(prefix string) int {
	n := 0
	for _, e := range l.Requests() {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// Writes are the entries of requests that change something (neither a GET
// nor a LIST nor a WATCH).
func (l *Log) Writes() []string {
	var out []string
	for _, e := range l.Requests() {
		if !strings.HasPrefix(e, "GET") && !strings.HasPrefix(e, "LIST") && !strings.HasPrefix(e, "WATCH") {
			out = append(out, e)
		}
	}
	return out
}

// Inject answers with the next status fail holds for key ("VERB
// resource"), which it consumes, as a Status of reason and message, and
// reports whether it did. The caller holds the lock that guards fail.
func Inject(w http.ResponseWriter, fail map[string][]int, key string, reason metav1.StatusReason, message string) bool {
	codes := fail[key]
	if len(codes) == 0 {
		return false
	}
	fail[key] = codes[1:]
	WriteJSON(w, codes[0], &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Code: int32(codes[0]), Reason: reason, Message: message})
	return true
}
