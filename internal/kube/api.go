package kube

import (
	"context"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
)

// The janitor's typed client of the built-in kinds: the verbs it calls, over
// a scheme of the five API groups it calls, instead of client-go's
// Clientset.
//
// Why not the Clientset: importing it (or anything that imports
// client-go's discovery, which the snapshot Clientset and the REST mapper
// do) links and registers every API group Kubernetes has, about 50
// group-versions and 7 MB of code, whose start-up alone mapped 5 MiB more
// of the binary into every run. The janitor reads and writes claims, pods,
// events, volumes, storage classes, attachments, leases and the workload
// kinds, nothing else; docs/benchmarks.md has the figures. client-go's
// generic typed client (gentype) is not used either: it links client-go's
// fake object tracker, and with it server-side apply's type machinery.

// scheme knows the kinds of the groups below and the options
// (metav1.ListOptions and the like) of each group version.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	// ParameterCodec encodes the options of a request to any group version
	// of the API.
	ParameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, storagev1.AddToScheme, coordinationv1.AddToScheme,
		appsv1.AddToScheme, batchv1.AddToScheme,
	} {
		utilruntime.Must(add(scheme))
	}
}

// API is the typed client of the built-in API groups the janitor calls.
// Its methods read like client-go's Clientset (CoreV1().Pods(ns).List), so
// a call site is the same with either.
type API struct {
	core, storage, coordination, apps, batch rest.Interface
}

// NewAPI builds the typed clients from a REST config, sharing one HTTP
// client (and so one connection pool) as client-go's Clientset does. The
// config's content type is kept: NewClients asks for protobuf.
func NewAPI(cfg *rest.Config) (*API, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	a := &API{}
	for _, g := range []struct {
		out *rest.Interface
		gv  schema.GroupVersion
	}{
		{&a.core, corev1.SchemeGroupVersion},
		{&a.storage, storagev1.SchemeGroupVersion},
		{&a.coordination, coordinationv1.SchemeGroupVersion},
		{&a.apps, appsv1.SchemeGroupVersion},
		{&a.batch, batchv1.SchemeGroupVersion},
	} {
		if *g.out, err = groupClient(cfg, httpClient, g.gv); err != nil {
			return nil, fmt.Errorf("client of %s: %w", g.gv, err)
		}
	}
	return a, nil
}

// groupClient is the REST client of one group version, configured as
// client-gen configures its typed clients.
func groupClient(cfg *rest.Config, h *http.Client, gv schema.GroupVersion) (rest.Interface, error) {
	c := *cfg
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(&c, h)
}

// CoreV1 is the core group's client.
func (a *API) CoreV1() CoreV1 { return CoreV1{a.core} }

// StorageV1 is storage.k8s.io/v1's client.
func (a *API) StorageV1() StorageV1 { return StorageV1{a.storage} }

// CoordinationV1 is coordination.k8s.io/v1's client.
func (a *API) CoordinationV1() CoordinationV1 { return CoordinationV1{a.coordination} }

// AppsV1 is apps/v1's client.
func (a *API) AppsV1() Group { return Group{a.apps} }

// BatchV1 is batch/v1's client.
func (a *API) BatchV1() Group { return Group{a.batch} }

// Group is the client of a group version the janitor only lists (through
// its REST client, decoding the bytes itself).
type Group struct{ c rest.Interface }

// RESTClient is the group version's REST client.
func (g Group) RESTClient() rest.Interface { return g.c }

// CoreV1 is the core group's client: the kinds the janitor calls by type.
type CoreV1 struct{ c rest.Interface }

// RESTClient is the core group's REST client.
func (v CoreV1) RESTClient() rest.Interface { return v.c }

// PersistentVolumeClaims in namespace ns.
func (v CoreV1) PersistentVolumeClaims(ns string) *Resource[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
	return typed(v.c, "persistentvolumeclaims", ns,
		func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} },
		func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} })
}

// Pods in namespace ns.
func (v CoreV1) Pods(ns string) *Resource[*corev1.Pod, *corev1.PodList] {
	return typed(v.c, "pods", ns,
		func() *corev1.Pod { return &corev1.Pod{} },
		func() *corev1.PodList { return &corev1.PodList{} })
}

// Events in namespace ns.
func (v CoreV1) Events(ns string) *Resource[*corev1.Event, *corev1.EventList] {
	return typed(v.c, "events", ns,
		func() *corev1.Event { return &corev1.Event{} },
		func() *corev1.EventList { return &corev1.EventList{} })
}

// StorageV1 is storage.k8s.io/v1's client.
type StorageV1 struct{ c rest.Interface }

// RESTClient is the group's REST client.
func (v StorageV1) RESTClient() rest.Interface { return v.c }

// StorageClasses (cluster-scoped).
func (v StorageV1) StorageClasses() *Resource[*storagev1.StorageClass, *storagev1.StorageClassList] {
	return typed(v.c, "storageclasses", "",
		func() *storagev1.StorageClass { return &storagev1.StorageClass{} },
		func() *storagev1.StorageClassList { return &storagev1.StorageClassList{} })
}

// CoordinationV1 is coordination.k8s.io/v1's client.
type CoordinationV1 struct{ c rest.Interface }

// Leases in namespace ns.
func (v CoordinationV1) Leases(ns string) *Resource[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return typed(v.c, "leases", ns,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

// Resource is the typed client of one resource in one namespace ("" for
// a cluster-scoped resource or all namespaces): the verbs the janitor
// calls, with the signatures of client-go's typed clients.
type Resource[T object, L runtime.Object] struct {
	c        rest.Interface
	resource string
	ns       string
	object   func() T
	list     func() L
}

// object is an API object with its metadata.
type object interface {
	runtime.Object
	metav1.Object
}

func typed[T object, L runtime.Object](c rest.Interface, resource, ns string, object func() T, list func() L) *Resource[T, L] {
	return &Resource[T, L]{c: c, resource: resource, ns: ns, object: object, list: list}
}

func (r *Resource[T, L]) on(req *rest.Request) *rest.Request {
	return req.NamespaceIfScoped(r.ns, r.ns != "").Resource(r.resource)
}

// Get reads one object.
func (r *Resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.object()
	err := r.on(r.c.Get()).Name(name).VersionedParams(&opts, ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// List reads the objects opts select.
func (r *Resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.list()
	err := r.on(r.c.Get()).VersionedParams(&opts, ParameterCodec).Do(ctx).Into(out)
	return out, err
}

// Create creates obj and returns the server's copy.
func (r *Resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.object()
	err := r.on(r.c.Post()).VersionedParams(&opts, ParameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Update replaces obj (named by its metadata; its resourceVersion is the
// precondition) and returns the server's copy.
func (r *Resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.object()
	err := r.on(r.c.Put()).Name(obj.GetName()).VersionedParams(&opts, ParameterCodec).Body(obj).Do(ctx).Into(out)
	return out, err
}

// Patch patches the named object and returns the server's copy.
func (r *Resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions) (T, error) {
	out := r.object()
	err := r.on(r.c.Patch(pt)).Name(name).VersionedParams(&opts, ParameterCodec).Body(data).Do(ctx).Into(out)
	return out, err
}

// Delete deletes the named object under opts' preconditions.
func (r *Resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.on(r.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}
