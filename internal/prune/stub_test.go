package prune

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/apistub"
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
// What every stub of the loop tests shares is package apistub's.
type apiStub struct {
	mu       sync.Mutex
	claims   map[string]*corev1.PersistentVolumeClaim // namespace ws, by name
	snaps    map[string]*snapshotv1.VolumeSnapshot    // namespace ws, by name
	contents map[string]*snapshotv1.VolumeSnapshotContent
	rv       int
	// Log is every request of the prune, in order, as "VERB what"; the
	// scan's lists (kube.Read) are left out of it and counted in scans.
	apistub.Log
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
	// pods are the namespace's pods the scan's list shows.
	pods []corev1.Pod
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

// coreKinds are the list kinds of the core lists the scan reads.
var coreKinds = map[string][2]string{
	"persistentvolumeclaims": {"v1", "PersistentVolumeClaimList"}, "persistentvolumes": {"v1", "PersistentVolumeList"},
	"pods": {"v1", "PodList"}, "volumeattachments": {"storage.k8s.io/v1", "VolumeAttachmentList"},
	"deployments": {"apps/v1", "DeploymentList"}, "replicasets": {"apps/v1", "ReplicaSetList"},
	"daemonsets": {"apps/v1", "DaemonSetList"}, "statefulsets": {"apps/v1", "StatefulSetList"},
	"jobs": {"batch/v1", "JobList"}, "cronjobs": {"batch/v1", "CronJobList"},
}

var snapsGR = apistub.SnapsGR

func (s *apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/version" {
		s.scans++
		apistub.WriteJSON(w, 200, map[string]string{"gitVersion": "v1.37.2"})
		return
	}
	q, ok := apistub.Parse(r)
	if !ok {
		http.Error(w, "the stub does not serve "+r.URL.Path, http.StatusNotImplemented)
		return
	}
	// The scan's lists: streamed, protobuf for core kinds.
	acceptsJSON := strings.Contains(r.Header.Get("Accept"), "json")
	if q.Verb == "LIST" && (!acceptsJSON || q.Query.Get("labelSelector") == "" && q.Query.Get("fieldSelector") == "" && q.Resource != "persistentvolumeclaims") {
		s.scans++
		s.scanList(w, q.Resource)
		return
	}
	entry := q.Entry()
	opts := q.DeleteOptions()
	switch {
	case q.Verb == http.MethodDelete:
		entry += apistub.Preconditions(opts)
	case q.Verb == "LIST" && q.Query.Get("fieldSelector") != "":
		entry += " " + q.Query.Get("fieldSelector")
	case q.Verb == http.MethodPatch:
		entry += " " + apistub.PatchSummary(r.Header.Get("Content-Type"), q.Body)
	case q.Verb == http.MethodPost && q.Resource == "events":
		if ev, err := apistub.DecodeEvent(q.Body); err == nil {
			entry += " " + ev.Reason
		}
	}
	s.Add(entry)
	if s.before != nil {
		s.before(s, entry)
	}
	if apistub.Inject(w, s.fail, q.Key(), metav1.StatusReasonForbidden, "injected by the stub") {
		return
	}
	s.serve(w, q)
}

// serve answers a request the stub logged and did not fail.
func (s *apiStub) serve(w http.ResponseWriter, q *apistub.Request) {
	name := q.Name
	switch verb, resource := q.Verb, q.Resource; {
	case resource == "persistentvolumeclaims" && verb == "LIST":
		l := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaimList", APIVersion: "v1"}}
		for _, p := range apistub.SortedValues(s.claims) {
			l.Items = append(l.Items, *p)
		}
		apistub.WriteJSON(w, 200, l)
	case resource == "volumesnapshots" && verb == "LIST":
		sel, err := labels.Parse(q.Query.Get("labelSelector"))
		if err != nil {
			apistub.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		apistub.WriteJSON(w, 200, s.snapList(sel))
	case resource == "volumesnapshots" && verb == http.MethodGet:
		apistub.WriteGet(w, s.snaps, name, snapsGR)
	case resource == "volumesnapshots" && verb == http.MethodPatch:
		s.patchSnapshot(w, name, q.Header.Get("Content-Type"), q.Body)
	case resource == "volumesnapshots" && verb == http.MethodDelete:
		s.deleteSnapshot(w, name, q.DeleteOptions())
	case resource == "volumesnapshotcontents" && verb == "LIST":
		apistub.WriteJSON(w, 200, apistub.ContentList(s.contents, q.Query.Get("fieldSelector")))
	case resource == "volumesnapshotcontents" && verb == http.MethodPatch:
		s.patchContent(w, name, q.Body)
	case resource == "events" && verb == http.MethodPost:
		apistub.WriteJSON(w, 201, &corev1.Event{TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}})
	default:
		http.Error(w, "the stub does not serve "+q.Entry(), http.StatusNotImplemented)
	}
}

// scanList answers one of the scan's lists (kube.Read): the claims, the
// janitor's snapshots and their contents as stored, every other kind empty.
func (s *apiStub) scanList(w http.ResponseWriter, resource string) {
	switch resource {
	case "volumesnapshots":
		apistub.WriteJSON(w, 200, s.snapList(labels.Everything()))
	case "volumesnapshotcontents":
		l := &snapshotv1.VolumeSnapshotContentList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotContentList", APIVersion: "snapshot.storage.k8s.io/v1"}}
		for _, c := range apistub.SortedValues(s.contents) {
			l.Items = append(l.Items, *c)
		}
		apistub.WriteJSON(w, 200, l)
	case "persistentvolumeclaims":
		l := &corev1.PersistentVolumeClaimList{}
		for _, p := range apistub.SortedValues(s.claims) {
			l.Items = append(l.Items, *p)
		}
		apistub.WriteProtoList(w, "v1", "PersistentVolumeClaimList", l)
	default:
		k, ok := coreKinds[resource]
		if !ok {
			http.Error(w, "the stub does not list "+resource, http.StatusNotImplemented)
			return
		}
		l := &corev1.PodList{} // empty, it encodes as any kind's list
		if resource == "pods" {
			l.Items = s.pods
		}
		apistub.WriteProtoList(w, k[0], k[1], l)
	}
}

func (s *apiStub) snapList(sel labels.Selector) *snapshotv1.VolumeSnapshotList {
	l := &snapshotv1.VolumeSnapshotList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotList", APIVersion: "snapshot.storage.k8s.io/v1"}}
	for _, vs := range apistub.SortedValues(s.snaps) {
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
		apistub.WriteStatus(w, apierrors.NewNotFound(snapsGR, name))
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
			apistub.WriteStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		switch {
		case p.Metadata.UID != "" && p.Metadata.UID != string(vs.UID):
			apistub.WriteStatus(w, apierrors.NewInvalid(schema.GroupKind{Group: snapsGR.Group, Kind: "VolumeSnapshot"}, name, nil))
			return
		case p.Metadata.ResourceVersion != "" && p.Metadata.ResourceVersion != vs.ResourceVersion:
			apistub.WriteStatus(w, apierrors.NewConflict(snapsGR, name, fmt.Errorf("the object has been modified")))
			return
		}
		if vs.Annotations == nil {
			vs.Annotations = map[string]string{}
		}
		for k, v := range p.Metadata.Annotations {
			vs.Annotations[k] = v
		}
		s.bump(&vs.ObjectMeta)
		apistub.WriteJSON(w, 200, vs)
		return
	}
	out := &snapshotv1.VolumeSnapshot{}
	if !apistub.ApplyJSONPatch(w, vs, body, out) {
		return
	}
	s.snaps[name] = out
	s.bump(&out.ObjectMeta)
	apistub.WriteJSON(w, 200, out)
}

func (s *apiStub) patchContent(w http.ResponseWriter, name string, body []byte) {
	vc, ok := s.contents[name]
	if !ok {
		apistub.WriteStatus(w, apierrors.NewNotFound(apistub.ContentsGR, name))
		return
	}
	out := &snapshotv1.VolumeSnapshotContent{}
	if !apistub.ApplyJSONPatch(w, vc, body, out) {
		return
	}
	s.contents[name] = out
	s.bump(&out.ObjectMeta)
	if vs, ok := s.snaps[out.Spec.VolumeSnapshotRef.Name]; ok && s.controllerBump && vs.UID == out.Spec.VolumeSnapshotRef.UID {
		s.bump(&vs.ObjectMeta)
	}
	apistub.WriteJSON(w, 200, out)
}

// deleteSnapshot checks the preconditions as the API server does (a
// missing snapshot is a 404, a UID or resourceVersion that differs a 409)
// and deletes the snapshot, with its content when that is Delete, as the
// snapshot controller does (unless leak).
func (s *apiStub) deleteSnapshot(w http.ResponseWriter, name string, opts metav1.DeleteOptions) {
	vs, ok := apistub.Deletable(w, s.snaps, name, snapsGR, opts)
	if !ok {
		return
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
	if !apistub.Lose(w, &s.lose) {
		apistub.WriteSuccess(w)
	}
}

func ptr[T any](v T) *T { return &v }

// clients connects the janitor's clients to the stub as the command does
// (apistub.Clients), with a retry policy of milliseconds.
func (s *apiStub) clients(t *testing.T) *kube.Clients {
	return apistub.Clients(t, s, apistub.Fast(300*time.Millisecond))
}
