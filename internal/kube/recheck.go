package kube

import (
	"context"
	"sync"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The re-check before a rescue (docs/spec.md#rescue): between the scan and the create of
// a snapshot lie concurrency slots, retries and recreates, long enough for a
// pod to start using the claim again or for a newer claim or snapshot of its
// workspace to appear. So just before each create the janitor reads the
// claim's namespace again (pods, claims, snapshots) and the contents of the
// snapshots that bear on the claim, and classifies the claim anew on that.

// DefaultRecheckMaxAge is how old a namespace read may be when it is used to
// re-check a claim: concurrent rescues of one namespace share a read for that
// long instead of each listing its pods.
const DefaultRecheckMaxAge = 2 * time.Second

// RecheckOptions configure the re-check reads.
type RecheckOptions struct {
	// Selector selects workspace claims, as in the scan, so that the
	// re-check sees the same claims the scan did (and those new since).
	Selector labels.Selector
	// WorkspaceLabel is the label naming a claim's or snapshot's workspace.
	WorkspaceLabel string
	// MaxAge bounds the age of a shared namespace read (measured from
	// when it started); 0 means DefaultRecheckMaxAge.
	MaxAge time.Duration
	// PageSize is the limit of each list call (--page-size); 0 reads
	// each list as one streamed response, as the scan does.
	PageSize int64
}

// NamespaceRead is the re-check's read of one namespace, reduced like the
// scan's.
type NamespaceRead struct {
	Namespace string
	// Claims are the namespace's claims that the selector selects.
	Claims []inventory.Claim
	// PodRefs maps a claim name to the pods that reference it, whatever
	// their phase: by a persistentVolumeClaim volume or a generic ephemeral
	// volume (whose claim is <pod>-<volume>).
	PodRefs   map[string][]inventory.Referrer
	Snapshots []inventory.Snapshot
	// Objects are the claims as read, by name (without managedFields):
	// what a rescue records as the claim's template, so that it needs no
	// read of its own (issue 43). The read keeps them only until the next
	// read of the namespace replaces it.
	Objects map[string]*corev1.PersistentVolumeClaim
	// ServerTime is the API server's clock after the lists were read.
	ServerTime time.Time
}

// ReadNamespace lists the pods, the selected claims and the snapshots of one
// namespace. Any failed list fails the whole read: a claim must never look
// unused because its pods could not be read.
func ReadNamespace(ctx context.Context, c *Clients, ns string, o RecheckOptions) (*NamespaceRead, error) {
	o = o.withDefaults()
	nr := &NamespaceRead{Namespace: ns, Objects: map[string]*corev1.PersistentVolumeClaim{}}
	// Claims and snapshots first, pods last: a pod that appears while the
	// claims are listed is then still seen.
	claims, err := namespaceClaims(ctx, c, ns, o.PageSize, o.Selector)
	if err != nil {
		return nil, err
	}
	for _, p := range claims {
		nr.Claims = append(nr.Claims, Claim(p, o.WorkspaceLabel))
		nr.Objects[p.Name] = p
	}
	if nr.Snapshots, err = NamespaceSnapshots(ctx, c, ns, o.PageSize, o.WorkspaceLabel); err != nil {
		return nil, err
	}
	if nr.PodRefs, err = PodClaims(ctx, c, ns, o.PageSize); err != nil {
		return nil, err
	}
	nr.ServerTime = c.Clock.Latest()
	return nr, nil
}

func (o RecheckOptions) withDefaults() RecheckOptions {
	if o.Selector == nil {
		o.Selector = labels.Everything()
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultRecheckMaxAge
	}
	if o.PageSize < 0 {
		o.PageSize = 0
	}
	return o
}

// Rechecker shares namespace reads among the concurrent rescues of one run,
// each read for at most MaxAge, and builds the inventory a claim is
// re-classified on.
type Rechecker struct {
	c *Clients
	o RecheckOptions

	mu   sync.Mutex
	byNS map[string]*nsRead
}

type nsRead struct {
	started time.Time // local monotonic clock
	done    chan struct{}
	read    *NamespaceRead
	err     error
}

// NewRechecker returns a Rechecker reading through c.
func NewRechecker(c *Clients, o RecheckOptions) *Rechecker {
	return &Rechecker{c: c, o: o.withDefaults(), byNS: map[string]*nsRead{}}
}

// Namespace returns a read of ns that started at most MaxAge ago, reading
// it again when the last one is older (or failed). Concurrent callers share
// one read.
func (r *Rechecker) Namespace(ctx context.Context, ns string) (*NamespaceRead, error) {
	r.mu.Lock()
	e, ok := r.byNS[ns]
	if ok {
		select {
		case <-e.done:
			if e.err != nil || time.Since(e.started) > r.o.MaxAge {
				ok = false
			}
		default: // in flight: it started within MaxAge by construction
		}
	}
	if !ok {
		e = &nsRead{started: time.Now(), done: make(chan struct{})}
		r.byNS[ns] = e
		r.mu.Unlock()
		e.read, e.err = ReadNamespace(ctx, r.c, ns, r.o)
		close(e.done)
		return e.read, e.err
	}
	r.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.err != nil {
		// Another caller's read failed (perhaps its context ended): read
		// for ourselves rather than fail on its account.
		return ReadNamespace(ctx, r.c, ns, r.o)
	}
	return e.read, nil
}

// Inventory reads the namespace of claim for its re-check (shared, at most
// MaxAge old),
// GETs the contents of the snapshots that bear on it, and returns the
// inventory to classify it on (see RecheckInventory).
func (r *Rechecker) Inventory(ctx context.Context, base *inventory.Inventory, claim inventory.Key) (*inventory.Inventory, error) {
	inv, _, err := r.InventoryRead(ctx, base, claim)
	return inv, err
}

// InventoryRead is Inventory, with the namespace read it was built from.
func (r *Rechecker) InventoryRead(ctx context.Context, base *inventory.Inventory, claim inventory.Key) (*inventory.Inventory, *NamespaceRead, error) {
	nr, err := r.Namespace(ctx, claim.Namespace)
	if err != nil {
		return nil, nil, err
	}
	contents := map[string]inventory.Content{}
	for _, name := range RelevantContents(nr, claim.Name) {
		vc, err := GetContent(ctx, r.c, name)
		switch {
		case err != nil:
			return nil, nil, &ReadError{What: "VolumeSnapshotContent " + name, Err: err}
		case vc == nil:
			// Gone: the snapshot bound to it is not intact.
		default:
			contents[name] = Content(vc)
		}
	}
	return RecheckInventory(base, nr, claim.Name, contents), nr, nil
}

// RelevantContents names the bound contents of the snapshots whose evidence
// bears on the claim's state: the snapshots of the claim (its rescue, its own
// pending snapshot) and those of its workspace (supersession).
func RelevantContents(nr *NamespaceRead, claim string) []string {
	ws := workspaceOf(nr, claim)
	var out []string
	seen := map[string]bool{}
	for i := range nr.Snapshots {
		s := &nr.Snapshots[i]
		if s.ContentName == "" || seen[s.ContentName] {
			continue
		}
		if s.SourceClaim == claim || (ws != "" && s.Workspace == ws) {
			seen[s.ContentName] = true
			out = append(out, s.ContentName)
		}
	}
	return out
}

// RecheckInventory builds the inventory a claim is re-classified on, from a
// fresh namespace read and, for what the re-check does not read again, the
// scan's inventory base:
//   - claims: the claim and the claims of its workspace, as read now (the
//     others cannot change its state);
//   - referrers: the pods listed now, plus the scan's non-pod referrers
//     (workload templates, owners) of those claims;
//   - snapshots: the namespace's, as read now; contents: those GET now
//     (fresh), else the scan's;
//   - PVs, attachments, live owners and StatefulSet templates: the scan's.
//
// base is not modified; the maps it shares are only read.
func RecheckInventory(base *inventory.Inventory, nr *NamespaceRead, claim string, fresh map[string]inventory.Content) *inventory.Inventory {
	if base == nil {
		base = &inventory.Inventory{}
	}
	inv := &inventory.Inventory{
		Referrers:   map[inventory.Key][]inventory.Referrer{},
		LiveOwners:  base.LiveOwners,
		PVs:         base.PVs,
		Attachments: base.Attachments,
		Snapshots:   map[string][]inventory.Snapshot{nr.Namespace: nr.Snapshots},
		ServerTime:  nr.ServerTime,
	}
	ws := workspaceOf(nr, claim)
	for i := range nr.Claims {
		cl := nr.Claims[i]
		if cl.Name != claim && (ws == "" || cl.Labels.Workspace != ws) {
			continue
		}
		inv.Claims = append(inv.Claims, cl)
		k := cl.Key()
		var refs []inventory.Referrer
		refs = append(refs, nr.PodRefs[cl.Name]...)
		for _, ref := range base.Referrers[k] {
			if ref.Kind != "Pod" {
				refs = append(refs, ref)
			}
		}
		if len(refs) > 0 {
			inv.Referrers[k] = refs
		}
	}
	for _, t := range base.StatefulSetTemplates {
		if t.Namespace == nr.Namespace {
			inv.StatefulSetTemplates = append(inv.StatefulSetTemplates, t)
		}
	}
	inv.Contents = recheckContents(base, nr, claim, fresh)
	return inv
}

// workspaceOf returns the workspace of the claim named claim in nr ("" when
// it has none or is not there).
func workspaceOf(nr *NamespaceRead, claim string) string {
	ws := ""
	for i := range nr.Claims {
		if nr.Claims[i].Name == claim {
			ws = nr.Claims[i].Labels.Workspace
		}
	}
	return ws
}

// recheckContents are the contents of the namespace's snapshots: those GET
// now (fresh), else the scan's, except that a relevant content the GET did
// not find is gone now, whatever the scan saw.
func recheckContents(base *inventory.Inventory, nr *NamespaceRead, claim string, fresh map[string]inventory.Content) map[string]inventory.Content {
	out := map[string]inventory.Content{}
	relevant := map[string]bool{}
	for _, name := range RelevantContents(nr, claim) {
		relevant[name] = true
	}
	for _, s := range nr.Snapshots {
		if s.ContentName == "" {
			continue
		}
		if c, ok := fresh[s.ContentName]; ok {
			out[s.ContentName] = c
		} else if c, ok := base.Contents[s.ContentName]; ok && !relevant[s.ContentName] {
			out[s.ContentName] = c
		}
	}
	return out
}

// ReadContent reads one VolumeSnapshotContent by name, through a list with a
// field selector: the janitor's role grants list and watch on contents, not
// get (a content can name any namespace's snapshot), and this read needs no
// more. A content that does not exist is a NotFound error.
func ReadContent(ctx context.Context, c *Clients, name string) (*snapv1.VolumeSnapshotContent, error) {
	var l *snapv1.VolumeSnapshotContentList
	err := c.Retry.Do(ctx, "read VolumeSnapshotContent "+name, func(ctx context.Context) error {
		var err error
		l, err = c.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if l.Items[i].Name == name {
			return &l.Items[i], nil
		}
	}
	return nil, apierrors.NewNotFound(snapv1.Resource("volumesnapshotcontents"), name)
}
