package rescue

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// writeRecorder is an in-process stub of the API server, not a real one: it
// serves one VolumeSnapshotClass list (a default class for the driver
// "with-class.csi"), answers every other read with 404, accepts every
// write, and records the writes (method and path). What the API server
// would do with a write does not matter here: a dry run must send none.
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeRecorder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	rw.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodGet {
		w.mu.Lock()
		w.writes = append(w.writes, r.Method+" "+r.URL.Path)
		w.mu.Unlock()
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write([]byte(`{}`))
		return
	}
	if r.URL.Path == "/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses" {
		_, _ = rw.Write([]byte(`{"kind":"VolumeSnapshotClassList","apiVersion":"snapshot.storage.k8s.io/v1","metadata":{},"items":[
			{"metadata":{"name":"with-class","annotations":{"` + DefaultClassAnnotation + `":"true"}},"driver":"with-class.csi","deletionPolicy":"Retain"}]}`))
		return
	}
	rw.WriteHeader(http.StatusNotFound)
	_, _ = fmt.Fprintf(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
}

func (w *writeRecorder) recorded() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

// TestDryRunRescueWritesNothing (docs/spec.md#commands: a dry run changes
// nothing in the cluster): a dry-run rescue of Orphaned claims sends no
// write, whichever way each claim's rescue would go: a class found (it
// would snapshot), no default class for the claim's CSI driver, a volume
// that is not CSI, a PV that is gone (each would fail). The failures are
// reported as what a real run would meet, on the claim's state as scanned:
// a dry run leaves it as it is.
func TestDryRunRescueWritesNothing(t *testing.T) {
	stub := &writeRecorder{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	c, err := kube.NewClients(&rest.Config{Host: srv.URL}, kube.ClientOptions{
		Retry: kube.RetryPolicy{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, MaxElapsed: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	inv := &inventory.Inventory{PVs: map[string]inventory.PV{
		"pv-class":    {Name: "pv-class", CSIDriver: "with-class.csi"},
		"pv-noclass":  {Name: "pv-noclass", CSIDriver: "no-class.csi"},
		"pv-hostpath": {Name: "pv-hostpath"},
	}}
	cases := []struct {
		claim, volume string
		action        string
		reason        string
	}{
		{"ws-class", "pv-class", ActionWould, ""},
		{"ws-noclass", "pv-noclass", ActionFailed, "no default VolumeSnapshotClass for CSI driver no-class.csi"},
		{"ws-hostpath", "pv-hostpath", ActionFailed, "is not a CSI volume"},
		{"ws-nopv", "pv-gone", ActionFailed, `PersistentVolume "pv-gone" of the claim was not found`},
	}
	for _, tc := range cases {
		inv.Claims = append(inv.Claims, inventory.Claim{Namespace: "ws", Name: tc.claim, UID: types.UID("uid-" + tc.claim[3:]),
			ResourceVersion: "7", Phase: "Bound", VolumeName: tc.volume,
			Annotations: map[string]string{inventory.AnnotationOrphanedSince: since.Format(time.RFC3339)}})
	}
	ds := make([]classify.Decision, len(inv.Claims))
	targets := make([]int, len(inv.Claims))
	for i := range inv.Claims {
		ds[i] = classify.Decision{Claim: &inv.Claims[i], State: classify.Orphaned, OrphanedSince: &since,
			Reason: "no pod or workload references this claim"}
		targets[i] = i
	}
	out, err := SnapshotTargets(context.Background(), c, inv, ds, targets, Options{DryRun: true, Attempts: 3, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		o := out[i]
		if o.Action != tc.action || !strings.Contains(o.Message, tc.reason) {
			t.Errorf("%s: action %q (%s), want %q saying %q", tc.claim, o.Action, o.Message, tc.action, tc.reason)
		}
		if o.State != classify.Orphaned {
			t.Errorf("%s: state %s after a dry run, want Orphaned as scanned: a dry run changes no claim", tc.claim, o.State)
		}
	}
	if w := stub.recorded(); len(w) != 0 {
		t.Errorf("a dry-run rescue sent %d writes, want none:\n%s", len(w), strings.Join(w, "\n"))
	}
}
