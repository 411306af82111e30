package apistub

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestParse: the log's names of a request, namespaced or not, core or of
// a group; a GET without a name is a LIST, one with watch=true a WATCH; a
// path of neither kind is not the API's.
func TestParse(t *testing.T) {
	for _, c := range []struct{ method, url, entry string }{
		{"GET", "/api/v1/namespaces/ws/persistentvolumeclaims/a", "GET persistentvolumeclaims/a"},
		{"GET", "/api/v1/namespaces/ws/pods?limit=500", "LIST pods"},
		{"GET", "/api/v1/persistentvolumes", "LIST persistentvolumes"},
		{"DELETE", "/apis/snapshot.storage.k8s.io/v1/namespaces/ws/volumesnapshots/s", "DELETE volumesnapshots/s"},
		{"GET", "/apis/snapshot.storage.k8s.io/v1/namespaces/ws/volumesnapshots?watch=true", "WATCH volumesnapshots"},
		{"PATCH", "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/c", "PATCH volumesnapshotcontents/c"},
	} {
		q, ok := Parse(httptest.NewRequest(c.method, c.url, nil))
		if !ok || q.Entry() != c.entry {
			t.Errorf("%s %s: %v %v, want %q", c.method, c.url, q, ok, c.entry)
		}
	}
	if _, ok := Parse(httptest.NewRequest("GET", "/version", nil)); ok {
		t.Error("/version parsed as an API request")
	}
}

// TestDeletable: a missing object is a 404, preconditions that differ a
// 409, preconditions that hold (or none) let the delete go.
func TestDeletable(t *testing.T) {
	snaps := map[string]*snapshotv1.VolumeSnapshot{"s": {ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u1", ResourceVersion: "7"}}}
	pre := func(uid types.UID, rv string) metav1.DeleteOptions {
		return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	}
	for _, c := range []struct {
		name string
		opts metav1.DeleteOptions
		ok   bool
		code int
	}{
		{"gone", metav1.DeleteOptions{}, false, http.StatusNotFound},
		{"s", pre("u2", "7"), false, http.StatusConflict},
		{"s", pre("u1", "6"), false, http.StatusConflict},
		{"s", pre("u1", "7"), true, http.StatusOK},
		{"s", metav1.DeleteOptions{}, true, http.StatusOK},
	} {
		w := httptest.NewRecorder()
		if _, ok := Deletable(w, snaps, c.name, SnapsGR, c.opts); ok != c.ok || w.Code != c.code {
			t.Errorf("%s %+v: %v and %d, want %v and %d", c.name, c.opts.Preconditions, ok, w.Code, c.ok, c.code)
		}
	}
}

// TestInjectAndLose: injected statuses are answered in order, once each;
// a lost response is a 500 as many times as asked.
func TestInjectAndLose(t *testing.T) {
	fail := map[string][]int{"DELETE volumesnapshots": {503, 403}}
	var codes []int
	for range 3 {
		w := httptest.NewRecorder()
		if Inject(w, fail, "DELETE volumesnapshots", metav1.StatusReasonForbidden, "injected") {
			codes = append(codes, w.Code)
		}
	}
	if len(codes) != 2 || codes[0] != 503 || codes[1] != 403 {
		t.Errorf("injected %v, want [503 403]", codes)
	}
	n, lost := 1, 0
	for range 3 {
		if Lose(httptest.NewRecorder(), &n) {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("%d responses lost, want 1", lost)
	}
}

// TestApplyJSONPatch: a test that does not hold is a 422 and changes
// nothing; a replace that follows one that holds is applied.
func TestApplyJSONPatch(t *testing.T) {
	vc := &snapshotv1.VolumeSnapshotContent{Spec: snapshotv1.VolumeSnapshotContentSpec{DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain}}
	out := &snapshotv1.VolumeSnapshotContent{}
	w := httptest.NewRecorder()
	if ApplyJSONPatch(w, vc, []byte(`[{"op":"test","path":"/spec/deletionPolicy","value":"Delete"},{"op":"replace","path":"/spec/deletionPolicy","value":"Delete"}]`), out) ||
		w.Code != http.StatusUnprocessableEntity {
		t.Errorf("a test that fails: %d, want 422", w.Code)
	}
	body := `[{"op":"test","path":"/spec/deletionPolicy","value":"Retain"},{"op":"replace","path":"/spec/deletionPolicy","value":"Delete"}]`
	if !ApplyJSONPatch(httptest.NewRecorder(), vc, []byte(body), out) || out.Spec.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete {
		t.Errorf("a test that holds: %q, want Delete", out.Spec.DeletionPolicy)
	}
	if got := PatchSummary("application/json-patch+json", []byte(body)); !strings.Contains(got, "deletionPolicy=Delete") {
		t.Errorf("summary %q", got)
	}
}
