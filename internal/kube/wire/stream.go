// Package wire decodes the API server's list responses as they stream in,
// one item at a time, so that memory holds one item of a list, never the
// whole response (a hundred thousand pods are gigabytes of protobuf).
//
// It knows the wire formats only: the protobuf envelope of core lists, the
// JSON of the snapshot CRDs' lists, and the few fields of a Pod the scan
// needs. It takes no client beyond the request it is handed and keeps no
// state, so its tests need no cluster.
//
// The decoders fail closed: a response that ends before its last byte, that
// is not the list asked for, or that carries anything after it is an error,
// never a shorter list. A truncated response is io.ErrUnexpectedEOF, which
// the retry policy (kube.Transient) retries.
package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// ErrIdle is returned when a list stream stops delivering data. It wraps
// context.DeadlineExceeded, so the retry policy retries it.
var ErrIdle = errors.New("the API server sent no data")

// Stream GETs req and hands its body to decode. The request is not bounded
// as a whole (a list of a hundred thousand pods may take minutes to serve on
// a busy server) but by its progress: idle without a byte for idle, it is
// cancelled and fails with a timeout the retry policy retries.
func Stream(ctx context.Context, req *rest.Request, accept string, idle time.Duration, decode func(io.Reader) (string, error)) (string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var idled atomic.Bool
	t := time.AfterFunc(idle, func() {
		idled.Store(true)
		// A timeout for whoever looks at the request's context (the
		// client's transports: kube's reach).
		cancel(fmt.Errorf("%w for %s: %w", ErrIdle, idle, context.DeadlineExceeded))
	})
	defer t.Stop()
	wrap := func(err error) error {
		// The idle timer's own cancellation: say so. Another error (the
		// transport's judgement of the same silence included) stands.
		if idled.Load() && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return fmt.Errorf("%w for %s: %w", ErrIdle, idle, context.DeadlineExceeded)
		}
		return err
	}
	body, err := req.SetHeader("Accept", accept).Stream(ctx)
	if err != nil {
		return "", wrap(err)
	}
	defer body.Close()
	cont, err := decode(&idleReader{r: body, t: t, idle: idle})
	if err != nil {
		return "", wrap(err)
	}
	return cont, nil
}

// idleReader pushes the idle deadline back on every byte read.
type idleReader struct {
	r    io.Reader
	t    *time.Timer
	idle time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.t.Reset(i.idle)
	}
	return n, err
}
