package kube_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/net/http2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
)

// TestTransientClassifiesAPIErrors is the retry rule of docs/spec.md#rescue-retries, error by error:
// 429 (honouring Retry-After) and 5xx are retried; 400/401/403/404/409/422
// and a cancelled context are permanent.
func TestTransientClassifiesAPIErrors(t *testing.T) {
	pvc := schema.GroupResource{Resource: "persistentvolumeclaims"}
	for _, c := range []struct {
		name      string
		err       error
		transient bool
		after     time.Duration
	}{
		{"429 with Retry-After: 3", apierrors.NewTooManyRequests("slow down", 3), true, 3 * time.Second},
		{"429 wrapped", fmt.Errorf("list claims: %w", apierrors.NewTooManyRequests("slow down", 7)), true, 7 * time.Second},
		{"429 without Retry-After", apierrors.NewTooManyRequests("slow down", 0), true, 0},
		{"500", apierrors.NewInternalError(errors.New("etcd is sad")), true, 0},
		{"503", apierrors.NewServiceUnavailable("try later"), true, 0},
		{"504 server timeout with a delay", apierrors.NewServerTimeout(pvc, "list", 2), true, 2 * time.Second},
		{"400", apierrors.NewBadRequest("no"), false, 0},
		{"401", apierrors.NewUnauthorized("who are you"), false, 0},
		{"403", apierrors.NewForbidden(pvc, "ws-a", errors.New("rbac")), false, 0},
		{"404", apierrors.NewNotFound(pvc, "ws-a"), false, 0},
		{"409", apierrors.NewConflict(pvc, "ws-a", errors.New("the object has been modified")), false, 0},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "PersistentVolumeClaim"}, "ws-a",
			field.ErrorList{field.Required(field.NewPath("spec"), "")}), false, 0},
		{"context.Canceled", context.Canceled, false, 0},
		{"context.Canceled wrapped", fmt.Errorf("get claim: %w", context.Canceled), false, 0},
		{"nil", nil, false, 0},
		{"an idle list stream", fmt.Errorf("read PodList: %w for 15s: %w", wire.ErrIdle, context.DeadlineExceeded), true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			transient, after := kube.Transient(c.err)
			if transient != c.transient || after != c.after {
				t.Errorf("Transient(%v) = (%v, %s), want (%v, %s)", c.err, transient, after, c.transient, c.after)
			}
		})
	}
}

// TestTransientRetryHonoursRetryAfter: RetryPolicy.Do retries a 429 and
// waits at least its Retry-After (1 s here) before the next attempt, where
// its own backoff would wait 1 ms; a 404 is returned after one attempt.
// The lower bound on the wait is a property of the code path (a timer of at
// least Retry-After), not a race: no upper bound is asserted.
func TestTransientRetryHonoursRetryAfter(t *testing.T) {
	p := kube.RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond, MaxElapsed: time.Minute}
	var at []time.Time
	err := p.Do(context.Background(), "get", func(context.Context) error {
		at = append(at, time.Now())
		if len(at) == 1 {
			return apierrors.NewTooManyRequests("slow down", 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 2 {
		t.Fatalf("%d attempts, want 2", len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Errorf("retried after %s, before the server's Retry-After of 1s", gap)
	}

	calls := 0
	err = p.Do(context.Background(), "get", func(context.Context) error {
		calls++
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, "ws-a")
	})
	if calls != 1 || !apierrors.IsNotFound(err) {
		t.Errorf("a 404: %d calls, error %v; want 1 call and the 404", calls, err)
	}
}

// TestTransientHTTP2Errors: a stream the server reset (as kube-apiserver
// does when its request timeout fires in the middle of a long list) or a
// connection it is closing is retried; a foreign response is not.
func TestTransientHTTP2Errors(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("read PodList: %w", http2.StreamError{StreamID: 3, Code: http2.ErrCodeInternal}),
		http2.GoAwayError{ErrCode: http2.ErrCodeNo},
		errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=1"),
	} {
		if ok, _ := kube.Transient(err); !ok {
			t.Errorf("%v is not retried", err)
		}
	}
	if ok, _ := kube.Transient(errors.New("read PodList: the response is a \"Status\"")); ok {
		t.Error("a foreign response is retried")
	}
}
