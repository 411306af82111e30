package rescue

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// TestHubVouchesOnlyForWhatItsWatchCovers (docs/spec.md#rescue-wait): the
// run's one watch of a namespace's snapshots begins after the
// resourceVersion of the first wait's read. A later wait may rely on it
// only when its own read is at or after that resourceVersion, or was sent
// after the watch was opened; otherwise a change between its read and the
// watch's start could have gone by, and it must read its snapshot again.
func TestHubVouchesOnlyForWhatItsWatchCovers(t *testing.T) {
	s := &countStub{claims: map[string]*corev1.PersistentVolumeClaim{}, snaps: map[string]*snapshotv1.VolumeSnapshot{},
		contents: map[string]*snapshotv1.VolumeSnapshotContent{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := kube.NewClients(&rest.Config{Host: srv.URL, QPS: -1}, kube.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newSnapshotHub(ctx, c)
	before := time.Now().Add(-time.Minute)
	if _, safe := h.subscribe("ws", "first", "50", before); !safe {
		t.Error("the first wait opens the watch at its own read: safe")
	}
	cases := []struct {
		name, rv string
		readAt   time.Time
		safe     bool
	}{
		{"read before the watch's start, sent before it opened", "49", before, false},
		{"read at the watch's start", "50", before, true},
		{"read after the watch's start", "51", before, true},
		{"read sent after the watch opened", "10", time.Now(), true},
		{"a resourceVersion that does not compare", "", before, false},
	}
	for _, tc := range cases {
		if _, safe := h.subscribe("ws", tc.name, tc.rv, tc.readAt); safe != tc.safe {
			t.Errorf("%s: safe %v, want %v", tc.name, safe, tc.safe)
		}
	}
	if _, safe := h.subscribe("other", "x", "1", before); !safe {
		t.Error("another namespace has its own watch")
	}
}
