package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned/scheme"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// pageFn reads one response of a list (the whole list, or one page of it)
// and returns its continue token.
type pageFn func(ctx context.Context, opts metav1.ListOptions) (string, error)

// list reads one kind in one namespace ("" = all) into an accumulator that
// holds n() items; keep(k) drops all but its first k. Unpaginated (PageSize
// 0, the default) it is one streamed response; with --page-size, pages, and
// a 410 Gone on a continuation (the list's snapshot expired) restarts it
// from the first page. A failed attempt drops what it had added before it
// is retried: a half list is never used.
func (r *reader) list(ctx context.Context, what, ns string, acc accumulator, page pageFn, opts metav1.ListOptions) error {
	n, keep := acc.n, acc.keep
	opts.Limit = r.s.PageSize
	where := "in all namespaces"
	if ns != "" {
		where = fmt.Sprintf("in namespace %q", ns)
	}
	start := n()
	restarts := 0
	for {
		var cont string
		mark := n()
		err := r.c.Retry.DoStream(ctx, "list "+what, func(ctx context.Context) error {
			keep(mark)
			var err error
			cont, err = page(ctx, opts)
			return err
		})
		if err != nil {
			if apierrors.IsResourceExpired(err) && opts.Continue != "" && restarts < 5 {
				restarts++
				keep(start)
				opts.Continue = ""
				continue
			}
			return &ReadError{What: what + " " + where, Err: hint(what, err)}
		}
		if cont == "" {
			return nil
		}
		opts.Continue = cont
	}
}

// coreList names a list of a core (protobuf-speaking) kind: the REST
// client of its group, its resource and its list kind.
type coreList struct {
	client   rest.Interface
	resource string
	kind     string
}

// protoList streams one response of a core list as protobuf and calls item
// with each item's bytes (valid during the call only).
func (r *reader) protoList(ctx context.Context, l coreList, ns string, opts metav1.ListOptions, item func([]byte) error) (string, error) {
	req := l.client.Get().Namespace(ns).Resource(l.resource).VersionedParams(&opts, ParameterCodec)
	return wire.Stream(ctx, req, "application/vnd.kubernetes.protobuf", r.c.Retry.AttemptTimeout(), func(body io.Reader) (string, error) {
		return wire.ReadProtoList(body, l.kind, item)
	})
}

// jsonList streams one response of a snapshot list (CRDs speak JSON only)
// and calls item with the decoder on each item.
func (r *reader) jsonList(ctx context.Context, resource, ns, kind string, opts metav1.ListOptions, item func(*json.Decoder) error) (string, error) {
	req := r.c.Snap.SnapshotV1().RESTClient().Get().Namespace(ns).Resource(resource).VersionedParams(&opts, snapscheme.ParameterCodec)
	return wire.Stream(ctx, req, "application/json", r.c.Retry.AttemptTimeout(), func(body io.Reader) (string, error) {
		return wire.ReadJSONList(body, kind, item)
	})
}

// accumulator is what a list has kept so far: n counts it, keep(k) drops
// all but the first k (a failed attempt's or a restarted list's items).
type accumulator struct {
	n    func() int
	keep func(int)
}

// slice is the accumulator of a slice.
func slice[T any](s *[]T) accumulator {
	return accumulator{n: func() int { return len(*s) }, keep: func(k int) { clear((*s)[k:]); *s = (*s)[:k] }}
}

// keyed is the accumulator of a map filled in list order: order holds its
// keys as they were added, so that keep(k) can drop what came after the
// first k. (The scan's largest maps are filled here directly: a slice
// copied into a map at the end held both at once.)
func keyed[V any](m map[string]V, order *[]string) accumulator {
	return accumulator{n: func() int { return len(*order) }, keep: func(k int) {
		for _, key := range (*order)[k:] {
			delete(m, key)
		}
		clear((*order)[k:])
		*order = (*order)[:k]
	}}
}

func hint(what string, err error) error {
	if apierrors.IsNotFound(err) && strings.HasPrefix(what, "volumesnapshot") {
		return fmt.Errorf("%w (is the snapshot.storage.k8s.io/v1 API installed? the VolumeSnapshot CRDs are missing)", err)
	}
	return err
}

// protoMessage is a typed API object with its generated protobuf decoder.
type protoMessage[T any] interface {
	*T
	Reset()
	Unmarshal([]byte) error
}

// decoded returns an item function that decodes each item into one reused
// object of type T and hands it to fn (valid during the call only).
func decoded[T any, P protoMessage[T]](fn func(P)) func([]byte) error {
	var obj T
	return func(b []byte) error {
		p := P(&obj)
		p.Reset()
		if err := p.Unmarshal(b); err != nil {
			return err
		}
		fn(p)
		return nil
	}
}

// decodedJSON is decoded for the JSON of the snapshot CRDs: each item is
// decoded into a fresh T (JSON leaves the fields an item lacks untouched, so
// an object is never reused).
func decodedJSON[T any](fn func(*T)) func(*json.Decoder) error {
	return func(dec *json.Decoder) error {
		var obj T
		if err := dec.Decode(&obj); err != nil {
			return err
		}
		fn(&obj)
		return nil
	}
}
