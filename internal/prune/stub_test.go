package prune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// apiStub is an in-process STUB of the API server, not a fake of
// Kubernetes: it serves only the requests a prune sends (the scan's lists,
// the janitor's rescues and the namespace's claims, the rescue's re-reads,
// the intent's patches, the contents' patches and reads, the deletes with
// their preconditions, Events), answers them from a few objects, records
// every request in order and injects failures. The tests pin what prune
// sends and what it makes of the answers; how the real API server answers
// is tested against a real one (prune_test.go, actors_test.go, contents_test.go).
// reap's stub (internal/reap/stub_test.go) is internal to package reap,
// hence this one.
type apiStub struct {
	mu       sync.Mutex
	claims   map[string]*corev1.PersistentVolumeClaim // namespace ws, by name
	snaps    map[string]*snapshotv1.VolumeSnapshot    // namespace ws, by name
	contents map[string]*snapshotv1.VolumeSnapshotContent
	rv       int
	// log is every request of the prune, in order, as "VERB what"; the
	// scan's lists (kube.Read) are left out of it and counted in scans.
	log   []string
	scans int
	// fail answers the next requests of a "VERB resource" with these
	// statuses, in order, instead of serving them.
	fail map[string][]int
	// before runs (locked) after a request is logged and before it is
	// served: a second actor at that moment.
	before func(s *apiStub, entry string)
	// controllerBump: a content's patch moves its snapshot's
	// resourceVersion on, as the snapshot controller's update does.
	controllerBump bool
	// leak keeps a Delete content when its snapshot is deleted (the
	// snapshot controller judged an older copy of it).
	leak bool
	// lose answers the next accepted deletes with a 500: their response
	// is lost, the deletion happened.
	lose int
	// finalized: a deleted snapshot stays, with its deletionTimestamp, as
	// the snapshot controller's finalizers keep it.
	finalized bool
}

func newStub() *apiStub {
	return &apiStub{claims: map[string]*corev1.PersistentVolumeClaim{}, snaps: map[string]*snapshotv1.VolumeSnapshot{},
		contents: map[string]*snapshotv1.VolumeSnapshotContent{}, fail: map[string][]int{}}
}

func (s *apiStub) bump(m *metav1.ObjectMeta) {
	s.rv++
	m.ResourceVersion = strconv.Itoa(s.rv)
}

// rescue stores one of the janitor's rescues of workspace ws whose data
// time is dataAgo before now, of a source claim that is gone, ready, with
// its content of the deletion policy.
func (s *apiStub) rescue(name, ws string, dataAgo time.Duration, policy snapshotv1.DeletionPolicy) *snapshotv1.VolumeSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := time.Now().Add(-dataAgo).UTC().Truncate(time.Second)
	cut := metav1.NewTime(at)
	ready, handle, src, content := true, "h-"+name, "src-"+ws, "content-"+name
	size := int64(1 << 30)
	vs := &snapshotv1.VolumeSnapshot{
		TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: cut,
			Labels: map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": ws},
			Annotations: map[string]string{inventory.AnnotationSourceUID: "gone-" + name, inventory.AnnotationSourceName: src,
				inventory.AnnotationOrphanedSince: at.Format(time.RFC3339)}},
		Spec: snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src}},
		Status: &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, CreationTime: &cut, ReadyToUse: &ready,
			RestoreSize: resource.NewQuantity(size, resource.BinarySI)},
	}
	s.bump(&vs.ObjectMeta)
	s.snaps[name] = vs
	vc := &snapshotv1.VolumeSnapshotContent{
		TypeMeta:   metav1.TypeMeta{Kind: "VolumeSnapshotContent", APIVersion: "snapshot.storage.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: content, UID: types.UID("uid-" + content)},
		Spec: snapshotv1.VolumeSnapshotContentSpec{DeletionPolicy: policy,
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ws", Name: name, UID: vs.UID}},
		Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: &ready, CreationTime: ptr(at.UnixNano())},
	}
	s.bump(&vc.ObjectMeta)
	s.contents[content] = vc
	return vs
}

// claim stores a claim of namespace ws.
func (s *apiStub) claim(p *corev1.PersistentVolumeClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = p.DeepCopy()
	p.Namespace = "ws"
	if p.UID == "" {
		p.UID = types.UID("uid-" + p.Name)
	}
	s.bump(&p.ObjectMeta)
	s.claims[p.Name] = p
}

// change applies f to the stored snapshot name as a new version.
func (s *apiStub) change(name string, f func(*snapshotv1.VolumeSnapshot)) {
	f(s.snaps[name])
	s.bump(&s.snaps[name].ObjectMeta)
}

func (s *apiStub) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// writes are the requests that change something.
func (s *apiStub) writes() []string {
	var out []string
	for _, l := range s.requests() {
		if !strings.HasPrefix(l, "GET") && !strings.HasPrefix(l, "LIST") {
			out = append(out, l)
		}
	}
	return out
}

func (s *apiStub) count(prefix string) int {
	n := 0
	for _, l := range s.requests() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), &st)
}

// protoMagic starts every protobuf response of the API server.
const protoMagic = "k8s\x00"

// writeProtoList answers a list the scan streams as protobuf: the envelope
// (runtime.Unknown) of kind and the list's bytes.
func writeProtoList(w http.ResponseWriter, apiVersion, kind string, list interface{ Marshal() ([]byte, error) }) {
	raw, err := list.Marshal()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw,
		ContentType: "application/vnd.kubernetes.protobuf"}).Marshal()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
	_, _ = w.Write(append([]byte(protoMagic), env...))
}

// coreKinds are the list kinds of the core lists the scan reads.
var coreKinds = map[string][2]string{
	"persistentvolumeclaims": {"v1", "PersistentVolumeClaimList"}, "persistentvolumes": {"v1", "PersistentVolumeList"},
	"pods": {"v1", "PodList"}, "volumeattachments": {"storage.k8s.io/v1", "VolumeAttachmentList"},
	"deployments": {"apps/v1", "DeploymentList"}, "replicasets": {"apps/v1", "ReplicaSetList"},
	"daemonsets": {"apps/v1", "DaemonSetList"}, "statefulsets": {"apps/v1", "StatefulSetList"},
	"jobs": {"batch/v1", "JobList"}, "cronjobs": {"batch/v1", "CronJobList"},
}

var (
	snapsGR    = schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"}
	contentsGR = schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"}
)

func (s *apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/version" {
		s.scans++
		writeJSON(w, 200, map[string]string{"gitVersion": "v1.37.2"})
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var resource, name string
	switch {
	case len(parts) >= 5 && parts[0] == "api" && parts[2] == "namespaces":
		resource = parts[4]
		if len(parts) > 5 {
			name = parts[5]
		}
	case len(parts) >= 6 && parts[0] == "apis" && parts[3] == "namespaces":
		resource = parts[5]
		if len(parts) > 6 {
			name = parts[6]
		}
	case len(parts) == 3 && parts[0] == "api":
		resource = parts[2]
	case len(parts) >= 4 && parts[0] == "apis":
		resource = parts[3]
		if len(parts) > 4 {
			name = parts[4]
		}
	default:
		http.Error(w, "the stub does not serve "+r.URL.Path, http.StatusNotImplemented)
		return
	}
	verb := r.Method
	if verb == http.MethodGet && name == "" {
		verb = "LIST"
	}
	q := r.URL.Query()
	body, _ := io.ReadAll(r.Body)
	// The scan's lists: streamed, protobuf for core kinds.
	if verb == "LIST" && (!strings.Contains(r.Header.Get("Accept"), "json") || q.Get("labelSelector") == "" && q.Get("fieldSelector") == "" && resource != "persistentvolumeclaims") ||
		verb == "LIST" && resource == "persistentvolumeclaims" && !strings.Contains(r.Header.Get("Accept"), "json") {
		s.scans++
		s.scanList(w, resource)
		return
	}
	entry := verb + " " + resource
	if name != "" {
		entry += "/" + name
	}
	var opts metav1.DeleteOptions
	switch {
	case verb == http.MethodDelete:
		_ = json.Unmarshal(body, &opts)
		if p := opts.Preconditions; p != nil && p.UID != nil && p.ResourceVersion != nil {
			entry += " uid=" + string(*p.UID) + " rv=" + *p.ResourceVersion
		} else {
			entry += " without preconditions"
		}
	case verb == "LIST" && q.Get("fieldSelector") != "":
		entry += " " + q.Get("fieldSelector")
	case verb == http.MethodPatch:
		entry += " " + patchSummary(r.Header.Get("Content-Type"), body)
	case verb == http.MethodPost && resource == "events":
		if ev, err := decodeEvent(body); err == nil {
			entry += " " + ev.Reason
		}
	}
	s.log = append(s.log, entry)
	if s.before != nil {
		s.before(s, entry)
	}
	if codes := s.fail[verb+" "+resource]; len(codes) > 0 {
		s.fail[verb+" "+resource] = codes[1:]
		writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(codes[0]),
			Reason: metav1.StatusReasonForbidden, Message: "injected by the stub"}})
		return
	}
	switch {
	case resource == "persistentvolumeclaims" && verb == "LIST":
		l := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaimList", APIVersion: "v1"}}
		for _, p := range sortedValues(s.claims) {
			l.Items = append(l.Items, *p)
		}
		writeJSON(w, 200, l)
	case resource == "volumesnapshots" && verb == "LIST":
		sel, err := labels.Parse(q.Get("labelSelector"))
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		writeJSON(w, 200, s.snapList(sel))
	case resource == "volumesnapshots" && verb == http.MethodGet:
		if vs, ok := s.snaps[name]; ok {
			writeJSON(w, 200, vs)
			return
		}
		writeStatus(w, apierrors.NewNotFound(snapsGR, name))
	case resource == "volumesnapshots" && verb == http.MethodPatch:
		s.patchSnapshot(w, name, r.Header.Get("Content-Type"), body)
	case resource == "volumesnapshots" && verb == http.MethodDelete:
		s.deleteSnapshot(w, name, opts)
	case resource == "volumesnapshotcontents" && verb == "LIST":
		l := &snapshotv1.VolumeSnapshotContentList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotContentList", APIVersion: "snapshot.storage.k8s.io/v1"}}
		if c, ok := s.contents[strings.TrimPrefix(q.Get("fieldSelector"), "metadata.name=")]; ok {
			l.Items = append(l.Items, *c)
		}
		writeJSON(w, 200, l)
	case resource == "volumesnapshotcontents" && verb == http.MethodPatch:
		s.patchContent(w, name, body)
	case resource == "events" && verb == http.MethodPost:
		writeJSON(w, 201, &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}})
	default:
		http.Error(w, "the stub does not serve "+entry, http.StatusNotImplemented)
	}
}

// scanList answers one of the scan's lists (kube.Read): the claims, the
// janitor's snapshots and their contents as stored, every other kind empty.
func (s *apiStub) scanList(w http.ResponseWriter, resource string) {
	switch resource {
	case "volumesnapshots":
		writeJSON(w, 200, s.snapList(labels.Everything()))
	case "volumesnapshotcontents":
		l := &snapshotv1.VolumeSnapshotContentList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotContentList", APIVersion: "snapshot.storage.k8s.io/v1"}}
		for _, c := range sortedValues(s.contents) {
			l.Items = append(l.Items, *c)
		}
		writeJSON(w, 200, l)
	case "persistentvolumeclaims":
		l := &corev1.PersistentVolumeClaimList{}
		for _, p := range sortedValues(s.claims) {
			l.Items = append(l.Items, *p)
		}
		writeProtoList(w, "v1", "PersistentVolumeClaimList", l)
	default:
		k, ok := coreKinds[resource]
		if !ok {
			http.Error(w, "the stub does not list "+resource, http.StatusNotImplemented)
			return
		}
		writeProtoList(w, k[0], k[1], &corev1.PodList{})
	}
}

func (s *apiStub) snapList(sel labels.Selector) *snapshotv1.VolumeSnapshotList {
	l := &snapshotv1.VolumeSnapshotList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotList", APIVersion: "snapshot.storage.k8s.io/v1"}}
	for _, vs := range sortedValues(s.snaps) {
		if sel.Matches(labels.Set(vs.Labels)) {
			l.Items = append(l.Items, *vs)
		}
	}
	return l
}

// patchSnapshot serves the intent's two patches as the API server does: a
// merge patch whose metadata.resourceVersion must match (409) and whose
// metadata.uid must not change (422); a JSON patch whose test operations
// must hold (422).
func (s *apiStub) patchSnapshot(w http.ResponseWriter, name, ctype string, body []byte) {
	vs, ok := s.snaps[name]
	if !ok {
		writeStatus(w, apierrors.NewNotFound(snapsGR, name))
		return
	}
	if strings.HasPrefix(ctype, "application/merge-patch+json") {
		var p struct {
			Metadata struct {
				UID             string            `json:"uid"`
				ResourceVersion string            `json:"resourceVersion"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		switch {
		case p.Metadata.UID != "" && p.Metadata.UID != string(vs.UID):
			writeStatus(w, apierrors.NewInvalid(schema.GroupKind{Group: snapsGR.Group, Kind: "VolumeSnapshot"}, name, nil))
			return
		case p.Metadata.ResourceVersion != "" && p.Metadata.ResourceVersion != vs.ResourceVersion:
			writeStatus(w, apierrors.NewConflict(snapsGR, name, fmt.Errorf("the object has been modified")))
			return
		}
		if vs.Annotations == nil {
			vs.Annotations = map[string]string{}
		}
		for k, v := range p.Metadata.Annotations {
			vs.Annotations[k] = v
		}
		s.bump(&vs.ObjectMeta)
		writeJSON(w, 200, vs)
		return
	}
	out := &snapshotv1.VolumeSnapshot{}
	if !applyJSONPatch(w, vs, body, out) {
		return
	}
	s.snaps[name] = out
	s.bump(&out.ObjectMeta)
	writeJSON(w, 200, out)
}

func (s *apiStub) patchContent(w http.ResponseWriter, name string, body []byte) {
	vc, ok := s.contents[name]
	if !ok {
		writeStatus(w, apierrors.NewNotFound(contentsGR, name))
		return
	}
	out := &snapshotv1.VolumeSnapshotContent{}
	if !applyJSONPatch(w, vc, body, out) {
		return
	}
	s.contents[name] = out
	s.bump(&out.ObjectMeta)
	if vs, ok := s.snaps[out.Spec.VolumeSnapshotRef.Name]; ok && s.controllerBump && vs.UID == out.Spec.VolumeSnapshotRef.UID {
		s.bump(&vs.ObjectMeta)
	}
	writeJSON(w, 200, out)
}

// deleteSnapshot checks the preconditions as the API server does (a
// missing snapshot is a 404, a UID or resourceVersion that differs a 409)
// and deletes the snapshot, with its content when that is Delete, as the
// snapshot controller does (unless leak).
func (s *apiStub) deleteSnapshot(w http.ResponseWriter, name string, opts metav1.DeleteOptions) {
	vs, ok := s.snaps[name]
	if !ok {
		writeStatus(w, apierrors.NewNotFound(snapsGR, name))
		return
	}
	if pre := opts.Preconditions; pre != nil {
		if (pre.UID != nil && *pre.UID != vs.UID) || (pre.ResourceVersion != nil && *pre.ResourceVersion != vs.ResourceVersion) {
			writeStatus(w, apierrors.NewConflict(snapsGR, name, fmt.Errorf("the precondition failed")))
			return
		}
	}
	if s.finalized {
		now := metav1.Now()
		vs.DeletionTimestamp = &now
		s.bump(&vs.ObjectMeta)
	} else {
		delete(s.snaps, name)
	}
	if cn := vs.Status.BoundVolumeSnapshotContentName; cn != nil {
		if vc, ok := s.contents[*cn]; ok && vc.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && !s.leak {
			delete(s.contents, *cn)
		}
	}
	if s.lose > 0 {
		s.lose--
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("the response was lost")))
		return
	}
	writeJSON(w, 200, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

// applyJSONPatch applies the test, replace and remove operations of an RFC
// 6902 patch to obj into out, or answers 422 when a test fails.
func applyJSONPatch(w http.ResponseWriter, obj any, body []byte, out any) bool {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var doc map[string]any
	b, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	if err == nil {
		err = json.Unmarshal(body, &ops)
	}
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return false
	}
	for _, o := range ops {
		keys := strings.Split(strings.TrimPrefix(o.Path, "/"), "/")
		parent := doc
		for _, k := range keys[:len(keys)-1] {
			next, _ := parent[unescape(k)].(map[string]any)
			if next == nil {
				next = map[string]any{}
			}
			parent = next
		}
		last := unescape(keys[len(keys)-1])
		cur, exists := parent[last]
		switch o.Op {
		case "test":
			if !exists || fmt.Sprint(cur) != fmt.Sprint(o.Value) {
				writeStatus(w, apierrors.NewInvalid(schema.GroupKind{Kind: "Patch"}, o.Path, nil))
				return false
			}
		case "replace":
			if !exists {
				writeStatus(w, apierrors.NewInvalid(schema.GroupKind{Kind: "Patch"}, o.Path, nil))
				return false
			}
			parent[last] = o.Value
		case "remove":
			if !exists {
				writeStatus(w, apierrors.NewInvalid(schema.GroupKind{Kind: "Patch"}, o.Path, nil))
				return false
			}
			delete(parent, last)
		default:
			writeStatus(w, apierrors.NewBadRequest("the stub does not apply "+o.Op))
			return false
		}
	}
	b, _ = json.Marshal(doc)
	if err := json.Unmarshal(b, out); err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return false
	}
	return true
}

func unescape(k string) string { return strings.NewReplacer("~1", "/", "~0", "~").Replace(k) }

// patchSummary names what a patch does: "+key rv=N" (a merge patch of an
// annotation, at a resourceVersion), "-key" (a JSON patch removing an
// annotation), "deletionPolicy=X" (a JSON patch of a content's policy).
func patchSummary(ctype string, body []byte) string {
	if strings.HasPrefix(ctype, "application/merge-patch+json") {
		var p struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(body, &p)
		var keys []string
		for k := range p.Metadata.Annotations {
			keys = append(keys, "+"+k)
		}
		slices.Sort(keys)
		return strings.Join(keys, " ") + " rv=" + p.Metadata.ResourceVersion
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	_ = json.Unmarshal(body, &ops)
	var out []string
	for _, o := range ops {
		switch {
		case o.Op == "remove" && strings.HasPrefix(o.Path, "/metadata/annotations/"):
			out = append(out, "-"+strings.NewReplacer("~1", "/", "~0", "~").Replace(strings.TrimPrefix(o.Path, "/metadata/annotations/")))
		case o.Op == "replace" && o.Path == "/spec/deletionPolicy":
			out = append(out, fmt.Sprintf("deletionPolicy=%v", o.Value))
		}
	}
	return strings.Join(out, " ")
}

// decodeEvent reads an Event the janitor posts in protobuf.
func decodeEvent(body []byte) (*corev1.Event, error) {
	ev := &corev1.Event{}
	if !bytes.HasPrefix(body, []byte(protoMagic)) {
		return ev, json.Unmarshal(body, ev)
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(protoMagic):]); err != nil {
		return nil, err
	}
	return ev, ev.Unmarshal(u.Raw)
}

func sortedValues[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]V, 0, len(m))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// clients connects the janitor's clients to the stub as the command does
// (kube.NewClients: protobuf for core kinds, the server's clock from the
// responses' Date), with a retry policy of milliseconds.
func (s *apiStub) clients(t *testing.T) *kube.Clients {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := kube.NewClients(&rest.Config{Host: srv.URL}, kube.ClientOptions{
		Retry: kube.RetryPolicy{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkRequests compares the requests the stub saw with want, in order.
func checkRequests(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
