package wire

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestStreamIdleTimesOut: a server that stops sending in the middle of a
// list fails the attempt after the idle time, as a transient error (retried),
// while one that keeps sending slowly is not cut.
func TestStreamIdleTimesOut(t *testing.T) {
	body, pods := podList(t, 50, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		f := w.(http.Flusher)
		switch r.URL.Path {
		case "/stall":
			_, _ = w.Write(body[:len(body)/2])
			f.Flush()
			<-r.Context().Done()
		case "/slow":
			for i := 0; i < len(body); i += len(body) / 10 {
				_, _ = w.Write(body[i:min(i+len(body)/10, len(body))])
				f.Flush()
				time.Sleep(100 * time.Millisecond)
			}
		}
	}))
	defer srv.Close()
	c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) (int, error) {
		n := 0
		_, err := Stream(context.Background(), c.Get().AbsPath(path), "application/vnd.kubernetes.protobuf", 300*time.Millisecond,
			func(body io.Reader) (string, error) {
				return ReadProtoList(body, "PodList", func([]byte) error { n++; return nil })
			})
		return n, err
	}
	start := time.Now()
	_, err = read("/stall")
	if err == nil || !errors.Is(err, ErrIdle) {
		t.Fatalf("stalled stream: %v", err)
	}
	// The retry policy retries a request that timed out (kube.Transient;
	// its tests hold an idle stream's error).
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an idle stream is not a timeout, so it would not be retried: %v", err)
	}
	t.Logf("stalled stream failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	// The slow stream takes about a second, with gaps shorter than the idle time.
	n, err := read("/slow")
	if err != nil || n != len(pods) {
		t.Fatalf("slow stream: %d pods, %v", n, err)
	}
}
