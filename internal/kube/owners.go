package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// The last step of the read: which owners of the claims in scope still
// exist. Owners of the kinds the read lists are found in those lists (as
// they stream by, through sawOwner); the others are fetched one by one.

// sawOwner notes that an object the claims name as owner exists. Called
// from concurrent listers.
func (r *reader) sawOwner(uid types.UID, kind, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.wantOwners[uid]; ok {
		r.found[uid] = kind + "/" + name
	}
}

// listedKinds are the owner kinds whose every object in scope was listed:
// an owner of one of these kinds that was not seen is gone.
var listedKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Pod"}:             true,
	{Group: "apps", Kind: "Deployment"}:  true,
	{Group: "apps", Kind: "ReplicaSet"}:  true,
	{Group: "apps", Kind: "DaemonSet"}:   true,
	{Group: "apps", Kind: "StatefulSet"}: true,
	{Group: "batch", Kind: "Job"}:        true,
	{Group: "batch", Kind: "CronJob"}:    true,
}

// owners decides which claim owners still exist. Owners of listed kinds are
// looked up in what was listed; others are fetched one by one (by metadata)
// and an owner that cannot be read fails the run closed.
func (r *reader) owners(ctx context.Context, inv *inventory.Inventory) error {
	var served *kinds
	for uid, o := range r.wantOwners {
		if what, ok := r.found[uid]; ok {
			inv.LiveOwners[uid] = what
			continue
		}
		gv, err := schema.ParseGroupVersion(o.APIVersion)
		if err != nil {
			return &ReadError{What: "owner " + o.Kind + "/" + o.Name, Err: err}
		}
		if listedKinds[schema.GroupKind{Group: gv.Group, Kind: o.Kind}] {
			continue // listed and not seen: gone
		}
		if served == nil {
			served = newKinds(r.c)
		}
		alive, err := r.ownerAlive(ctx, served, inv, gv, o)
		if err != nil {
			return err
		}
		if alive {
			inv.LiveOwners[uid] = o.Kind + "/" + o.Name
		}
	}
	return nil
}

// ownerAlive fetches an owner of a kind the read does not list. The owner
// lives in its claim's namespace (or is cluster-scoped); each namespace
// whose claims name it is tried.
func (r *reader) ownerAlive(ctx context.Context, served *kinds, inv *inventory.Inventory, gv schema.GroupVersion, o inventory.OwnerRef) (bool, error) {
	gvr, namespaced, err := served.resource(ctx, gv.WithKind(o.Kind))
	what := fmt.Sprintf("owner %s %s", o.Kind, o.Name)
	if err != nil {
		return false, &ReadError{What: what, Err: err}
	}
	seen := map[string]bool{}
	for i := range inv.Claims {
		cl := &inv.Claims[i]
		for _, co := range cl.Owners {
			if co.UID != o.UID || seen[cl.Namespace] {
				continue
			}
			seen[cl.Namespace] = true
			ns := cl.Namespace
			if !namespaced {
				ns = ""
			}
			alive, err := r.ownerIn(ctx, gvr, ns, what, o)
			if err != nil || alive {
				return alive, err
			}
		}
	}
	return false, nil
}

// ownerIn reports whether the owner exists in namespace ns ("" for a
// cluster-scoped kind): an object of its name with its UID.
func (r *reader) ownerIn(ctx context.Context, gvr schema.GroupVersionResource, ns, what string, o inventory.OwnerRef) (bool, error) {
	var got *metav1.PartialObjectMetadata
	err := r.c.Retry.Do(ctx, "get "+what, func(ctx context.Context) error {
		var err error
		got, err = r.c.Meta.Resource(gvr).Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, &ReadError{What: what, Err: err}
	default:
		return got.UID == o.UID, nil
	}
}

// kinds resolves an owner's kind to its resource the way discovery does:
// it asks the API server what the kind's group version serves (GET /api/v1
// or /apis/GROUP/VERSION, an APIResourceList), once per group version. It
// is only asked when a claim has an owner of a kind the janitor does not
// list (a workspace operator's custom resource, say).
type kinds struct {
	c      *Clients
	served map[schema.GroupVersion][]metav1.APIResource
}

func newKinds(c *Clients) *kinds {
	return &kinds{c: c, served: map[schema.GroupVersion][]metav1.APIResource{}}
}

// resource returns the kind's resource and whether it is namespaced; an
// error when the group version or the kind is not served.
func (k *kinds) resource(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gv := gvk.GroupVersion()
	list, ok := k.served[gv]
	if !ok {
		var err error
		if list, err = k.discover(ctx, gv); err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		k.served[gv] = list
	}
	for _, r := range list {
		// Subresources (pods/status) carry their parent's kind.
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return gv.WithResource(r.Name), r.Namespaced, nil
		}
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("the API server serves no kind %s in %s", gvk.Kind, gv)
}

func (k *kinds) discover(ctx context.Context, gv schema.GroupVersion) ([]metav1.APIResource, error) {
	path := "/apis/" + gv.String()
	if gv.Group == "" {
		path = "/api/" + gv.Version
	}
	var list metav1.APIResourceList
	err := k.c.Retry.Do(ctx, "discover "+gv.String(), func(ctx context.Context) error {
		// JSON: the client asks for protobuf, which discovery documents
		// are served in too.
		body, err := k.c.Kube.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json").Do(ctx).Raw()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return fmt.Errorf("decode %s: %w", path, err)
		}
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the API server serves no group version %s", gv)
	}
	return list.APIResources, err
}
