package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The scan's read, by job:
//   - read.go: what a run reads (Scope) and the order of the reads (Read);
//   - list.go: how one list is read (streamed or paginated, retried,
//     restarted, never half used) and decoded item by item;
//   - storage.go: the claims, PVs, attachments, snapshots and contents,
//     reduced into the inventory;
//   - convert.go: the reduction of one API object to its inventory value;
//   - referrers.go: the pods and workloads that reference claims in scope;
//   - owners.go: which owners of claims still exist.

// Scope says what a run reads.
type Scope struct {
	// Namespaces to read; nil means all namespaces.
	Namespaces []string
	// Exclude lists namespaces never looked at.
	Exclude map[string]bool
	// Selector selects workspace claims (server-side).
	Selector labels.Selector
	// WorkspaceLabel is copied from snapshots' labels into the inventory.
	WorkspaceLabel string
	// NotifyLabels are the claim labels kept for notifications
	// (inventory.ClaimLabels.Notify).
	NotifyLabels []string
	// PageSize is the limit of each list call; 0 reads each list as one
	// streamed response, decoded an item at a time.
	PageSize int64
}

func (s Scope) withDefaults() Scope {
	if s.PageSize < 0 {
		s.PageSize = 0
	}
	if s.Selector == nil {
		s.Selector = labels.Everything()
	}
	return s
}

// ReadError names the read that failed. A failed read fails the whole run
// closed: a claim never looks orphaned because something could not be read.
type ReadError struct {
	What string
	Err  error
}

func (e *ReadError) Error() string { return "read " + e.What + ": " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// Read lists everything classification needs and reduces it item by item.
// Claims, PVs, attachments, snapshots and contents are listed concurrently;
// then pods and workloads, concurrently, keeping only references to the
// claims in scope (so memory follows the number of claims, not of pods).
func Read(ctx context.Context, c *Clients, s Scope) (*inventory.Inventory, error) {
	inv := &inventory.Inventory{
		Referrers:   map[inventory.Key][]inventory.Referrer{},
		LiveOwners:  map[types.UID]string{},
		PVs:         map[string]inventory.PV{},
		Attachments: map[string][]inventory.Attachment{},
		Snapshots:   map[string][]inventory.Snapshot{},
		Contents:    map[string]inventory.Content{},
	}
	r := &reader{c: c, s: s.withDefaults(), intern: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	if err := r.parallel(ctx, cancel,
		func(ctx context.Context) error { inv.ServerVersion = r.serverVersion(ctx); return nil },
		func(ctx context.Context) error { return r.claims(ctx, inv) },
		func(ctx context.Context) error { return r.pvs(ctx, inv) },
		func(ctx context.Context) error { return r.attachments(ctx, inv) },
		func(ctx context.Context) error { return r.snapshots(ctx, inv) },
		func(ctx context.Context) error { return r.contents(ctx, inv) },
	); err != nil {
		return nil, err
	}
	r.scopeClaims(inv.Claims)
	if err := r.parallel(ctx, cancel,
		func(ctx context.Context) error { return r.pods(ctx) },
		func(ctx context.Context) error { return r.workloads(ctx, inv) },
	); err != nil {
		return nil, err
	}
	// After the lists that prove no use: a mark written on this clock is
	// never earlier than the end of a use those lists could have missed.
	inv.ServerTime = c.Clock.Latest()
	inv.Referrers = r.referrers()
	if err := r.owners(ctx, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

// serverVersion returns the API server's version (GET /version, which every
// authenticated client may read), or "" when it cannot be read: the
// version only adds evidence (classify.UnusedCondition), so an unknown one
// leaves the run to what the claims show (janitor.Scan logs that).
func (r *reader) serverVersion(ctx context.Context) string {
	var v string
	err := r.c.Retry.Do(ctx, "read the server version", func(ctx context.Context) error {
		body, err := r.c.Kube.CoreV1().RESTClient().Get().AbsPath("/version").SetHeader("Accept", "application/json").Do(ctx).Raw()
		if err != nil {
			return err
		}
		var info version.Info
		if err := json.Unmarshal(body, &info); err != nil {
			return fmt.Errorf("decode /version: %w", err)
		}
		v = info.GitVersion
		return nil
	})
	if err != nil {
		return ""
	}
	return v
}

type reader struct {
	c *Clients
	s Scope

	mu         sync.Mutex
	intern     map[string]string
	inScope    map[inventory.Key]bool
	wantOwners map[types.UID]inventory.OwnerRef
	refs       map[inventory.Key][]inventory.Referrer
	found      map[types.UID]string // owner UID -> Kind/name, for owners seen in lists
	stsTmpl    []inventory.StatefulSetTemplate
}

// scopeClaims prepares the second phase of the read: the claims whose
// referrers are kept, and the owners looked for.
func (r *reader) scopeClaims(claims []inventory.Claim) {
	r.inScope = make(map[inventory.Key]bool, len(claims))
	r.wantOwners = map[types.UID]inventory.OwnerRef{}
	for i := range claims {
		cl := &claims[i]
		r.inScope[cl.Key()] = true
		for _, o := range cl.Owners {
			r.wantOwners[o.UID] = o
		}
	}
	r.refs = map[inventory.Key][]inventory.Referrer{}
	r.found = map[types.UID]string{}
}

// parallel runs fns concurrently and returns the first error, cancelling
// the others.
func (r *reader) parallel(ctx context.Context, cancel context.CancelFunc, fns ...func(context.Context) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(fns))
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errs[i] = err
				cancel()
			}
		}()
	}
	wg.Wait()
	// Report the root cause, not the cancellations it caused.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// in interns namespace strings: a hundred thousand claims share a few
// hundred namespaces.
func (r *reader) in(s string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.intern[s]; ok {
		return v
	}
	s = strings.Clone(s)
	r.intern[s] = s
	return s
}

// inBytes is in for a view into a response's bytes: a value seen before
// costs no allocation.
func (r *reader) inBytes(b []byte) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.intern[string(b)]; ok {
		return v
	}
	s := string(b)
	r.intern[s] = s
	return s
}

// namespaces returns the namespaces to list one by one, or [""] for all.
func (r *reader) namespaces() []string {
	if r.s.Namespaces == nil {
		return []string{""}
	}
	var out []string
	for _, ns := range r.s.Namespaces {
		if !r.s.Exclude[ns] {
			out = append(out, ns)
		}
	}
	return out
}
