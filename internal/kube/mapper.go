package kube

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// lazyMapper resolves an owner's kind to its resource through discovery,
// which is only asked when a claim has an owner of a kind the janitor does
// not list (a workspace operator's custom resource, say).
type lazyMapper struct {
	m meta.RESTMapper
}

func newLazyMapper(c *Clients) *lazyMapper {
	return &lazyMapper{m: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Kube.Discovery()))}
}

func (l *lazyMapper) resource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	mapping, err := l.m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
