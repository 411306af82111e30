package reap

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/apistub"
	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// apiStub is an in-process STUB of the API server, not a fake of
// Kubernetes: it serves only the requests the delete loop sends (the pods
// of the namespace, the claim and its past versions, the rescue and its
// content, Events, mark patches), answers them from a few objects, records
// every request in order and injects failures. The tests pin what the loop
// sends (the pod check and the rescue's re-read right before each delete,
// the preconditions, the settling reads) and what it makes of the answers.
// How the real API server answers is tested against a real one (the
// cluster tests of test/e2e).
type apiStub struct {
	mu       sync.Mutex
	claims   map[string]*corev1.PersistentVolumeClaim // namespace ws, by name
	history  map[string]*corev1.PersistentVolumeClaim // every version served, by resourceVersion
	pods     []corev1.Pod
	snaps    map[string]*snapshotv1.VolumeSnapshot
	contents map[string]*snapshotv1.VolumeSnapshotContent
	rv       int
	// Log is every request, in order, as "VERB what".
	apistub.Log
	// fail answers the next requests of a "VERB resource" with these
	// statuses, in order, instead of serving them.
	fail map[string][]int
	// lose answers the next accepted deletes with a 500: their response is
	// lost, the deletion happened.
	lose int
	// afterDelete runs (locked) after each delete request is logged and
	// before it is served or failed: a second actor at that moment.
	afterDelete func(s *apiStub)
	// pageSize splits pod lists into pages (0: one page).
	pageSize int
}

func newStub() *apiStub {
	s := &apiStub{claims: map[string]*corev1.PersistentVolumeClaim{}, history: map[string]*corev1.PersistentVolumeClaim{},
		snaps: map[string]*snapshotv1.VolumeSnapshot{}, contents: map[string]*snapshotv1.VolumeSnapshotContent{}, fail: map[string][]int{}}
	return s
}

// putClaim stores p as a new version (a fresh resourceVersion).
func (s *apiStub) putClaim(p *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	s.rv++
	p = p.DeepCopy()
	p.ResourceVersion = strconv.Itoa(s.rv)
	s.claims[p.Name] = p
	s.history[p.ResourceVersion] = p.DeepCopy()
	return p
}

// change applies f to the stored claim name as a new version.
func (s *apiStub) change(name string, f func(*corev1.PersistentVolumeClaim)) {
	p := s.claims[name].DeepCopy()
	f(p)
	s.putClaim(p)
}

var (
	claimsGR = apistub.ClaimsGR
	snapsGR  = apistub.SnapsGR
)

func (s *apiStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := apistub.Parse(r)
	if !ok {
		http.Error(w, "the stub does not serve "+r.URL.Path, http.StatusNotImplemented)
		return
	}
	entry := q.Entry()
	opts := q.DeleteOptions()
	event := &corev1.Event{}
	switch {
	case q.Verb == http.MethodDelete:
		entry += apistub.Preconditions(opts)
	case q.Verb == "LIST" && q.Query.Get("resourceVersionMatch") != "":
		entry += " " + q.Query.Get("fieldSelector") + " rv=" + q.Query.Get("resourceVersion") + " " + q.Query.Get("resourceVersionMatch")
	case q.Verb == "LIST" && q.Query.Get("fieldSelector") != "":
		entry += " " + q.Query.Get("fieldSelector")
	case q.Verb == http.MethodPost && q.Resource == "events":
		if ev, err := apistub.DecodeEvent(q.Body); err == nil {
			event = ev
		}
		entry += " " + event.Reason
	}
	s.Add(entry)
	if q.Verb == http.MethodDelete && s.afterDelete != nil {
		s.afterDelete(s)
	}
	if apistub.Inject(w, s.fail, q.Key(), metav1.StatusReasonInternalError, "injected by the stub") {
		return
	}
	name, query := q.Name, q.Query
	switch verb, resource := q.Verb, q.Resource; {
	case resource == "pods" && verb == "LIST":
		s.listPods(w, query)
	case resource == "persistentvolumeclaims" && verb == http.MethodDelete:
		s.deleteClaim(w, name, opts)
	case resource == "persistentvolumeclaims" && (verb == http.MethodGet || verb == http.MethodPatch):
		apistub.WriteGet(w, s.claims, name, claimsGR)
	case resource == "persistentvolumeclaims" && verb == "LIST":
		l := &corev1.PersistentVolumeClaimList{TypeMeta: metav1.TypeMeta{Kind: "PersistentVolumeClaimList", APIVersion: "v1"}}
		if p, ok := s.history[query.Get("resourceVersion")]; ok && "metadata.name="+p.Name == query.Get("fieldSelector") {
			l.Items = append(l.Items, *p)
		} else if !ok {
			apistub.WriteStatus(w, apierrors.NewResourceExpired("too old resource version"))
			return
		}
		apistub.WriteJSON(w, 200, l)
	case resource == "events" && verb == http.MethodPost:
		apistub.WriteJSON(w, 201, event)
	case resource == "volumesnapshots" && verb == http.MethodGet:
		apistub.WriteGet(w, s.snaps, name, snapsGR)
	case resource == "volumesnapshots" && verb == "LIST":
		l := &snapshotv1.VolumeSnapshotList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotList", APIVersion: "snapshot.storage.k8s.io/v1"}}
		for _, vs := range apistub.SortedValues(s.snaps) {
			l.Items = append(l.Items, *vs)
		}
		apistub.WriteJSON(w, 200, l)
	case resource == "volumesnapshotcontents" && verb == http.MethodGet:
		apistub.WriteGet(w, s.contents, name, apistub.ContentsGR)
	case resource == "volumesnapshotcontents" && verb == "LIST":
		apistub.WriteJSON(w, 200, apistub.ContentList(s.contents, query.Get("fieldSelector")))
	default:
		http.Error(w, "the stub does not serve "+entry, http.StatusNotImplemented)
	}
}

func (s *apiStub) listPods(w http.ResponseWriter, q map[string][]string) {
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
	from := 0
	if c := q["continue"]; len(c) > 0 && c[0] != "" {
		from, _ = strconv.Atoi(c[0])
	}
	to := len(s.pods)
	if s.pageSize > 0 && from+s.pageSize < to {
		to = from + s.pageSize
		l.Continue = strconv.Itoa(to)
	}
	l.Items = append(l.Items, s.pods[from:to]...)
	apistub.WriteProtoList(w, "v1", "PodList", l)
}

// deleteClaim checks the preconditions as the API server does: a missing
// claim is a 404, a UID or resourceVersion that differs a 409.
func (s *apiStub) deleteClaim(w http.ResponseWriter, name string, opts metav1.DeleteOptions) {
	if _, ok := apistub.Deletable(w, s.claims, name, claimsGR, opts); !ok {
		return
	}
	delete(s.claims, name)
	if !apistub.Lose(w, &s.lose) {
		apistub.WriteSuccess(w)
	}
}

// clients connects the janitor's clients to the stub (apistub.Clients),
// with a retry policy of milliseconds.
func (s *apiStub) clients(t *testing.T) *kube.Clients {
	return apistub.Clients(t, s, apistub.Fast(300*time.Millisecond))
}

// world is one rescued claim ws-a (and ws-b when two), each with its
// janitor rescue and Retain content, in the stub; ds are their decisions as
// the reap's re-read made them: Rescued, past grace.
func world(t *testing.T, names ...string) (*apiStub, []classify.Decision) {
	t.Helper()
	s := newStub()
	var ds []classify.Decision
	for _, name := range names {
		cut := metav1.NewTime(t0.Add(-time.Hour))
		ready, handle := true, "h-"+name
		src := name
		vs := &snapshotv1.VolumeSnapshot{
			TypeMeta:   metav1.TypeMeta{Kind: "VolumeSnapshot", APIVersion: "snapshot.storage.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name + "-rescue", UID: types.UID("uid-s-" + typesUID(name))},
			Spec:       snapshotv1.VolumeSnapshotSpec{Source: snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src}},
		}
		content := "content-" + name
		vs.Status = &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, CreationTime: &cut, ReadyToUse: &ready}
		s.snaps[vs.Name] = vs
		s.contents[content] = &snapshotv1.VolumeSnapshotContent{
			TypeMeta:   metav1.TypeMeta{Kind: "VolumeSnapshotContent", APIVersion: "snapshot.storage.k8s.io/v1"},
			ObjectMeta: metav1.ObjectMeta{Name: content},
			Spec: snapshotv1.VolumeSnapshotContentSpec{DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain,
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ws", Name: vs.Name, UID: vs.UID}},
			Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle},
		}
		p := baseClaim()
		p.Name, p.UID = name, types.UID("uid-"+typesUID(name))
		p = s.putClaim(p)
		snap := kube.Snapshot(vs, "workspace")
		since := t0.Add(-2 * time.Hour)
		ds = append(ds, classify.Decision{State: classify.Rescued, OrphanedSince: &since, Reason: "rescued",
			Claim: &inventory.Claim{Namespace: "ws", Name: name, UID: p.UID, ResourceVersion: p.ResourceVersion,
				Annotations: map[string]string{inventory.AnnotationOrphanedSince: since.Format(time.RFC3339)}},
			Snapshot: &snap})
	}
	return s, ds
}

func typesUID(name string) string { return strings.TrimPrefix(name, "ws-") }

func podUsing(name, claim string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
}

// reapOne runs the delete loop over the decisions ds as candidates.
func reapOne(t *testing.T, c *kube.Clients, ds []classify.Decision, o Options) *Result {
	t.Helper()
	cands := map[inventory.Key]bool{}
	for i := range ds {
		cands[ds[i].Claim.Key()] = true
	}
	if o.MaxDeletions == 0 {
		o.MaxDeletions, o.MaxDeletionPercent = 100, 100
	}
	res, err := planOf(ds, cands, o, t0).execute(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func outcome(t *testing.T, res *Result, name string) Outcome {
	t.Helper()
	for _, o := range res.Outcomes {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no outcome for %s in %+v", name, res.Outcomes)
	return Outcome{}
}

// checkRequests compares the requests the stub saw with want, in order.
func checkRequests(t *testing.T, s *apiStub, want ...string) {
	t.Helper()
	apistub.CheckRequests(t, "requests", s.Requests(), want...)
}

// TestDeleteSendsChecksThenPreconditions (docs/spec.md#reap-reread,
// docs/spec.md#reap-rescue-reread, docs/spec.md#reap-batch): the plain
// path. Right before the delete the loop lists the namespace's snapshots,
// gets the rescue's content by name, then lists the namespace's pods; the
// delete carries the UID and resourceVersion of the read; an Event says so.
func TestDeleteSendsChecksThenPreconditions(t *testing.T) {
	s, ds := world(t, "ws-a")
	res := reapOne(t, s.clients(t), ds, Options{})
	if out := outcome(t, res, "ws-a"); out.Action != ActionDeleted || out.Evidence == nil || out.Evidence.UID != "uid-s-a" ||
		!strings.Contains(out.Message, "rescued by VolumeSnapshot ws-a-rescue") {
		t.Errorf("ws-a: %+v, want deleted on its rescue", out)
	}
	checkRequests(t, s,
		"LIST volumesnapshots",
		"GET volumesnapshotcontents/content-ws-a",
		"LIST pods",
		"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1",
		"POST events Reaped")
}

// TestSeenInUseEarlierInTheRun is docs/spec.md#rule-use-restarts-clock in the
// delete loop (mutant M10 of issue 40): a claim this run saw in use after
// its scan (the re-check before a snapshot, say) is not deleted in the same
// run, even when every check right before the delete would pass; nothing
// is sent for it but the Event saying so.
func TestSeenInUseEarlierInTheRun(t *testing.T) {
	s, ds := world(t, "ws-a", "ws-b")
	c := s.clients(t)
	c.Uses.Record("uid-a", "pod ide-a")
	res := reapOne(t, c, ds, Options{})
	if out := outcome(t, res, "ws-a"); out.Action != ActionSkipped || out.State != classify.InUse ||
		!strings.Contains(out.Message, "seen in use earlier in this run (pod ide-a)") {
		t.Errorf("ws-a: %+v, want skipped, in use", out)
	}
	if out := outcome(t, res, "ws-b"); out.Action != ActionDeleted {
		t.Errorf("ws-b: %+v, want deleted", out)
	}
	if n := s.Count("DELETE persistentvolumeclaims/ws-a"); n != 0 {
		t.Errorf("%d DELETEs of ws-a, want none", n)
	}
	if got := s.Requests(); got[0] != "POST events ReapSkipped" {
		t.Errorf("first request %q, want only the Event for ws-a before ws-b's checks", got[0])
	}
}

// TestPodListedBeforeTheDelete: a pod that uses the claim in the list taken
// right before its delete stops it, restarts its clock (the marks are
// removed), and a pod seen by one batch's list that uses a claim of a
// later batch stops that one too, although it is gone by that batch's
// list (batches of one claim here).
func TestPodListedBeforeTheDelete(t *testing.T) {
	s, ds := world(t, "ws-a", "ws-b")
	s.pods = []corev1.Pod{podUsing("ide-a", "ws-a"), podUsing("ide-b", "ws-b"), podUsing("other", "ws-z")}
	c := s.clients(t)
	// ide-b is gone once the first list has seen it.
	listed := 0
	o := Options{BatchSize: 1, BeforeDelete: func(context.Context, inventory.Key) {
		listed++
		if listed == 2 {
			s.mu.Lock()
			s.pods = nil
			s.mu.Unlock()
		}
	}}
	res := reapOne(t, c, ds, o)
	for _, name := range []string{"ws-a", "ws-b"} {
		if out := outcome(t, res, name); out.Action != ActionSkipped || out.State != classify.InUse || !strings.Contains(out.Message, "in use again") {
			t.Errorf("%s: %+v, want skipped, in use again", name, out)
		}
	}
	if n := s.Count("DELETE"); n != 0 {
		t.Errorf("%d DELETEs, want none: %v", n, s.Requests())
	}
	if n := s.Count("PATCH persistentvolumeclaims/"); n < 2 {
		t.Errorf("%d mark patches, want the marks of both claims removed: %v", n, s.Requests())
	}
}

// TestNoDeleteWithoutTheChecks: a check that cannot be made is no check. A
// pod list or a read of the rescue that keeps failing ends in a failed
// delete that was never sent; a rescue gone since the read, or re-bound,
// skips the claim.
func TestNoDeleteWithoutTheChecks(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  func(s *apiStub)
		action string
		msg    string
	}{
		{"the pod list fails", func(s *apiStub) { s.fail["LIST pods"] = slices.Repeat([]int{500}, 1000) },
			ActionFailed, "injected by the stub"},
		{"the pod list is refused", func(s *apiStub) { s.fail["LIST pods"] = []int{403} }, ActionFailed, "injected by the stub"},
		{"the rescue cannot be read", func(s *apiStub) { s.fail["LIST volumesnapshots"] = []int{403} }, ActionFailed, "injected by the stub"},
		{"the rescue's content cannot be read", func(s *apiStub) { s.fail["GET volumesnapshotcontents"] = []int{403} }, ActionFailed, "injected by the stub"},
		{"the rescue is gone", func(s *apiStub) { delete(s.snaps, "ws-a-rescue") }, ActionSkipped, "is gone since it was read"},
		{"the rescue's content is gone", func(s *apiStub) { delete(s.contents, "content-ws-a") }, ActionSkipped, "no longer intact"},
		{"the rescue is bound to another content", func(s *apiStub) {
			other := "content-other"
			s.snaps["ws-a-rescue"].Status.BoundVolumeSnapshotContentName = &other
			s.contents[other] = s.contents["content-ws-a"].DeepCopy()
			s.contents[other].Name = other
		}, ActionSkipped, "bound to another VolumeSnapshotContent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ds := world(t, "ws-a")
			c.setup(s)
			res := reapOne(t, s.clients(t), ds, Options{})
			if out := outcome(t, res, "ws-a"); out.Action != c.action || !strings.Contains(out.Message, c.msg) {
				t.Errorf("ws-a: %s (%s), want %s (%s)", out.Action, out.Message, c.action, c.msg)
			}
			if n := s.Count("DELETE"); n != 0 {
				t.Errorf("%d DELETEs sent, want none: %v", n, s.Requests())
			}
		})
	}
}

// TestDeleteSettles: a delete that did not plainly succeed is settled by a
// read of the claim (docs/spec.md#reap): a lost response is our deletion;
// a claim deleted, replaced or changed by someone else is left alone; a
// change of bookkeeping only is retried once at the new resourceVersion,
// after checking for use again.
func TestDeleteSettles(t *testing.T) {
	dts := metav1.NewTime(t0)
	for _, c := range []struct {
		name   string
		setup  func(s *apiStub)
		action string
		msg    string
		want   []string // the requests from the first DELETE on
	}{
		{name: "the response is lost: a retry meets the deletion", setup: func(s *apiStub) { s.lose = 1 },
			action: ActionDeleted, msg: "the response to the delete was lost",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1",
				"LIST pods", "GET volumesnapshots/ws-a-rescue", "GET volumesnapshotcontents/content-ws-a",
				"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a", "POST events Reaped"}},
		{name: "deleted by someone else since the read", setup: func(s *apiStub) { delete(s.claims, "ws-a") },
			action: ActionSkipped, msg: "deleted by someone else",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a", "POST events ReapSkipped"}},
		{name: "being deleted by someone else", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.DeletionTimestamp = &dts })
		}, action: ActionSkipped, msg: "being deleted by someone else",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a", "POST events ReapSkipped"}},
		{name: "another claim took the name", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.UID = "uid-new" })
		}, action: ActionSkipped, msg: "another claim now has this name (UID uid-new)",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a", "POST events ReapSkipped"}},
		{name: "a label changed: left for the next run", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.Labels[inventory.KeyHold] = "true" })
		}, action: ActionSkipped, msg: "labels changed",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a",
				"LIST persistentvolumeclaims metadata.name=ws-a rv=1 Exact", "POST events ReapSkipped"}},
		{name: "the version read is compacted: what changed cannot be told", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.Finalizers = nil })
			delete(s.history, "1")
		}, action: ActionSkipped, msg: "what changed cannot be told",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a",
				"LIST persistentvolumeclaims metadata.name=ws-a rv=1 Exact", "POST events ReapSkipped"}},
		{name: "a finalizer dropped: checked again, retried once at the new version", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.Finalizers = p.Finalizers[:1] })
		}, action: ActionDeleted, msg: "rescued by VolumeSnapshot ws-a-rescue",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a",
				"LIST persistentvolumeclaims metadata.name=ws-a rv=1 Exact", "LIST pods",
				"LIST pods", "GET volumesnapshots/ws-a-rescue", "GET volumesnapshotcontents/content-ws-a",
				"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=2", "POST events Reaped"}},
		{name: "a finalizer dropped, and a pod uses it now", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.Finalizers = p.Finalizers[:1] })
			s.afterDelete = func(s *apiStub) { s.pods = []corev1.Pod{podUsing("ide", "ws-a")} }
		}, action: ActionSkipped, msg: "in use again since it was read (pod ide)",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a",
				"LIST persistentvolumeclaims metadata.name=ws-a rv=1 Exact", "LIST pods",
				"PATCH persistentvolumeclaims/ws-a", "POST events ReapSkipped", "PATCH persistentvolumeclaims/ws-a"}},
		{name: "changed again after the retry", setup: func(s *apiStub) {
			s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.Finalizers = p.Finalizers[:1] })
			s.afterDelete = func(s *apiStub) {
				s.change("ws-a", func(p *corev1.PersistentVolumeClaim) { p.ManagedFields = nil })
			}
		}, action: ActionSkipped, msg: "again after a retry",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "GET persistentvolumeclaims/ws-a",
				"LIST persistentvolumeclaims metadata.name=ws-a rv=1 Exact", "LIST pods",
				"LIST pods", "GET volumesnapshots/ws-a-rescue", "GET volumesnapshotcontents/content-ws-a",
				"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=3", "GET persistentvolumeclaims/ws-a", "POST events ReapSkipped"}},
		{name: "refused (403): failed, never settled as ours", setup: func(s *apiStub) { s.fail["DELETE persistentvolumeclaims"] = []int{403} },
			action: ActionFailed, msg: "injected by the stub",
			want: []string{"DELETE persistentvolumeclaims/ws-a uid=uid-a rv=1", "POST events ReapSkipped"}},
		{name: "failing (5xx) and unchanged: the error stands", setup: func(s *apiStub) {
			s.fail["DELETE persistentvolumeclaims"] = slices.Repeat([]int{503}, 1000)
		}, action: ActionFailed, msg: "injected by the stub"},
		{name: "failing (5xx), and the claim cannot be read to settle it", setup: func(s *apiStub) {
			s.fail["DELETE persistentvolumeclaims"] = slices.Repeat([]int{503}, 1000)
			s.fail["GET persistentvolumeclaims"] = []int{403}
		}, action: ActionFailed, msg: "response lost and the claim cannot be read to settle it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ds := world(t, "ws-a")
			c.setup(s)
			res := reapOne(t, s.clients(t), ds, Options{})
			if out := outcome(t, res, "ws-a"); out.Action != c.action || !strings.Contains(out.Message, c.msg) {
				t.Errorf("ws-a: %s (%s), want %s (%s)", out.Action, out.Message, c.action, c.msg)
			}
			got := s.Requests()
			if i := slices.IndexFunc(got, func(l string) bool { return strings.HasPrefix(l, "DELETE") }); i >= 0 && c.want != nil {
				if !slices.Equal(got[i:], c.want) {
					t.Errorf("requests from the first DELETE:\n  %s\nwant:\n  %s", strings.Join(got[i:], "\n  "), strings.Join(c.want, "\n  "))
				}
			}
		})
	}
}

// TestExecuteSendsNothingWhenItMustNot: over the blast radius, in a dry
// run, declined at the prompt, or interrupted, the loop sends no DELETE.
func TestExecuteSendsNothingWhenItMustNot(t *testing.T) {
	for _, c := range []struct {
		name   string
		o      Options
		ctx    func() context.Context
		action string
		block  Block
	}{
		{name: "over --max-deletions", o: Options{MaxDeletions: 1, MaxDeletionPercent: 100}, action: ActionLimited, block: BlockedBlastRadius},
		{name: "over --max-deletion-percent", o: Options{MaxDeletions: 10, MaxDeletionPercent: 50}, action: ActionLimited, block: BlockedBlastRadius},
		{name: "dry run", o: Options{DryRun: true}, action: ActionWould},
		{name: "declined", o: Options{Confirm: func(n int) (bool, error) { return false, nil }}, action: ActionSkipped, block: BlockedDeclined},
		{name: "interrupted", ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, action: ActionSkipped},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ds := world(t, "ws-a", "ws-b")
			cl := s.clients(t)
			o := c.o
			if o.MaxDeletions == 0 {
				o.MaxDeletions, o.MaxDeletionPercent = 100, 100
			}
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx()
			}
			cands := map[inventory.Key]bool{{Namespace: "ws", Name: "ws-a"}: true, {Namespace: "ws", Name: "ws-b"}: true}
			res, err := planOf(ds, cands, o, t0).execute(ctx, cl, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Blocked != c.block {
				t.Errorf("blocked %v (%s), want %v", res.Blocked, res.BlockedWhy, c.block)
			}
			for _, name := range []string{"ws-a", "ws-b"} {
				if out := outcome(t, res, name); out.Action != c.action {
					t.Errorf("%s: %s (%s), want %s", name, out.Action, out.Message, c.action)
				}
			}
			if n := s.Count("DELETE"); n != 0 {
				t.Errorf("%d DELETEs, want none: %v", n, s.Requests())
			}
		})
	}
}

// TestPlanOfSortsTheCandidates: planOf deletes only candidates that are
// still reapable, skips the others with their new state, names the ones
// the read no longer has, and gives the marks of claims the read saw in
// use back to clearUses.
func TestPlanOfSortsTheCandidates(t *testing.T) {
	since := t0.Add(-2 * time.Hour)
	claim := func(name string) *inventory.Claim {
		return &inventory.Claim{Namespace: "ws", Name: name, UID: types.UID("uid-" + typesUID(name))}
	}
	ds := []classify.Decision{
		{Claim: claim("ws-a"), State: classify.Rescued, OrphanedSince: &since},
		{Claim: claim("ws-b"), State: classify.InUse, Reason: "used by Pod ws/ide-b", Marks: classify.Marks{OrphanedSince: classify.Remove}},
		{Claim: claim("ws-c"), State: classify.Rescued, OrphanedSince: &since}, // not a candidate
	}
	cands := map[inventory.Key]bool{{Namespace: "ws", Name: "ws-a"}: true, {Namespace: "ws", Name: "ws-b"}: true, {Namespace: "ws", Name: "ws-gone"}: true}
	p := planOf(ds, cands, Options{}, t0)
	if len(p.del) != 1 || p.del[0].Claim.Name != "ws-a" {
		t.Errorf("to delete %v, want ws-a only", p.del)
	}
	msgs := map[string]string{}
	for _, o := range p.skipped {
		msgs[o.Name] = o.Message
	}
	if !strings.Contains(msgs["ws-b"], "changed since the scan: now InUse") || !strings.Contains(msgs["ws-gone"], "gone or out of scope") || len(msgs) != 2 {
		t.Errorf("skipped %v", msgs)
	}
	if len(p.used) != 1 || p.used[0].Claim.Name != "ws-b" {
		t.Errorf("used %v, want ws-b", p.used)
	}
}

// TestListPodsPages: the pod list before a delete reads every page the
// server sends.
func TestListPodsPages(t *testing.T) {
	s := newStub()
	s.pageSize = 2
	for i := range 5 {
		s.pods = append(s.pods, podUsing(fmt.Sprintf("p%d", i), fmt.Sprintf("ws-%d", i)))
	}
	refs, err := kube.PodClaims(context.Background(), s.clients(t), "ws", 0)
	if err != nil || len(refs) != 5 {
		t.Fatalf("PodClaims = %d claims, %v; want 5", len(refs), err)
	}
	if n := s.Count("LIST pods"); n != 3 {
		t.Errorf("%d pod lists, want 3 pages", n)
	}
}

// TestPodClaimsNamesEachVolumesClaim (docs/spec.md#rule-in-use): the
// check before a delete finds a pod by each claim its volumes name, a
// persistentVolumeClaim source or a generic ephemeral volume's claim
// <pod>-<volume>, and by nothing else.
func TestPodClaimsNamesEachVolumesClaim(t *testing.T) {
	s := newStub()
	eph := podUsing("job", "")
	eph.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	empty := podUsing("empty", "")
	empty.Spec.Volumes = nil
	s.pods = append(s.pods, podUsing("ide", "ws-a"), podUsing("other", "ws-b"), eph, empty)
	refs, err := kube.PodClaims(context.Background(), s.clients(t), "ws", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ claim, want string }{
		{"ws-a", "ide"},
		{"ws-b", "other"},
		{"job-scratch", "job"},
		{"scratch", ""},
		{"ws-c", ""},
	} {
		var got []string
		for _, r := range refs[c.claim] {
			got = append(got, r.Name)
		}
		if strings.Join(got, ",") != c.want {
			t.Errorf("pods of %s = %q, want %q", c.claim, got, c.want)
		}
	}
	if len(refs) != 3 {
		t.Errorf("claims %v, want ws-a, ws-b and job-scratch", refs)
	}
}

// TestMayHaveApplied: only a clean refusal (4xx, 429 included) proves a
// delete did not land.
func TestMayHaveApplied(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{apierrors.NewConflict(claimsGR, "a", fmt.Errorf("x")), false},
		{apierrors.NewNotFound(claimsGR, "a"), false},
		{apierrors.NewTooManyRequests("slow down", 1), false},
		{apierrors.NewInternalError(fmt.Errorf("x")), true},
		{apierrors.NewServiceUnavailable("x"), true},
		{context.DeadlineExceeded, true},
		{io.ErrUnexpectedEOF, true},
	} {
		if got := mayHaveApplied(c.err); got != c.want {
			t.Errorf("mayHaveApplied(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestBatchPodListBeforeEveryDelete (docs/spec.md#reap-batch): claims are
// deleted in batches, and every delete is preceded by a pod list begun
// after its own rescue's re-read. A pod that starts using a claim of a
// later batch while an earlier batch deletes is seen by that later
// batch's list: the claim is not deleted, its marks are removed.
func TestBatchPodListBeforeEveryDelete(t *testing.T) {
	names := []string{"ws-0", "ws-1", "ws-2", "ws-3", "ws-4", "ws-5", "ws-6"}
	s, ds := world(t, names...)
	deletes := 0
	s.afterDelete = func(s *apiStub) {
		deletes++
		if deletes == 2 { // during the first batch's deletes
			s.pods = append(s.pods, podUsing("ide-late", "ws-4"))
		}
	}
	res := reapOne(t, s.clients(t), ds, Options{BatchSize: 3})
	for _, name := range names {
		want := ActionDeleted
		if name == "ws-4" {
			want = ActionSkipped
		}
		if out := outcome(t, res, name); out.Action != want {
			t.Errorf("%s: %s (%s), want %s", name, out.Action, out.Message, want)
		}
	}
	if out := outcome(t, res, "ws-4"); !strings.Contains(out.Message, "in use again since it was read (pod ide-late)") {
		t.Errorf("ws-4: %s, want in use again (pod ide-late)", out.Message)
	}
	got := s.Requests()
	if n := s.Count("LIST pods"); n != 3 {
		t.Errorf("%d pod lists, want 3 (batches of 3, 3 and 1): %v", n, got)
	}
	// Every DELETE comes after a LIST pods that came after the GET of its
	// rescue's content, and nothing but DELETEs stand between a batch's
	// pod list and its deletes.
	for i, l := range got {
		claim, ok := strings.CutPrefix(l, "DELETE persistentvolumeclaims/")
		if !ok {
			continue
		}
		claim, _, _ = strings.Cut(claim, " ")
		list := -1
		for j := i - 1; j >= 0; j-- {
			if got[j] == "LIST pods" {
				list = j
				break
			}
			if !strings.HasPrefix(got[j], "DELETE ") {
				t.Errorf("request %d (%s) stands between the pod list and the delete of %s", j, got[j], claim)
				break
			}
		}
		reread := slices.Index(got, "GET volumesnapshotcontents/content-"+claim)
		if list < 0 || reread < 0 || reread > list {
			t.Errorf("delete of %s (request %d): its pod list at %d does not follow its re-read at %d", claim, i, list, reread)
		}
	}
	if n := s.Count("PATCH persistentvolumeclaims/ws-4"); n == 0 {
		t.Errorf("ws-4's marks not removed: %v", got)
	}
}

// TestBatchPodListAges (docs/spec.md#reap-batch): a delete goes only
// while its batch's pod list answered at most BatchMaxAge ago; the claims
// whose turn comes later are read again in a new batch, rescue and pods.
// With an age of a nanosecond every claim gets its own re-read and list.
func TestBatchPodListAges(t *testing.T) {
	names := []string{"ws-0", "ws-1", "ws-2", "ws-3"}
	s, ds := world(t, names...)
	asked := 0
	res := reapOne(t, s.clients(t), ds, Options{BatchSize: 10, BatchMaxAge: time.Nanosecond,
		BeforeDelete: func(context.Context, inventory.Key) { asked++ }})
	for _, name := range names {
		if out := outcome(t, res, name); out.Action != ActionDeleted {
			t.Errorf("%s: %s (%s), want deleted", name, out.Action, out.Message)
		}
	}
	if n, m := s.Count("LIST pods"), s.Count("LIST volumesnapshots"); n != 4 || m != 4 {
		t.Errorf("%d pod lists and %d snapshot lists for 4 claims, want 4 of each: %v", n, m, s.Requests())
	}
	if asked != 4 {
		t.Errorf("BeforeDelete called %d times for 4 claims, want once each", asked)
	}
}

// TestBatchesKeepToOneNamespace: a batch is of one namespace; the claims
// of another namespace wait for a batch of their own, with their own
// lists.
func TestBatchesKeepToOneNamespace(t *testing.T) {
	d := func(ns, name string) *classify.Decision {
		return &classify.Decision{Claim: &inventory.Claim{Namespace: ns, Name: name}}
	}
	ds := []*classify.Decision{d("a", "1"), d("a", "2"), d("b", "3"), d("a", "4")}
	for _, c := range []struct{ size, want int }{{10, 2}, {1, 1}, {2, 2}} {
		if got := batchLen(ds, c.size); got != c.want {
			t.Errorf("batchLen(size %d) = %d, want %d", c.size, got, c.want)
		}
	}
	if got := batchLen(ds[2:], 10); got != 1 {
		t.Errorf("batchLen of b's claim = %d, want 1", got)
	}
}

// TestRetryChecksForItself: the batch's checks vouch for a claim's first
// delete attempt only. A retry after a refusal that proves nothing was
// deleted (429) first lists the pods and reads the rescue again, each for
// itself: a pod that appeared, or a rescue deleted, since the first
// attempt stops the delete.
func TestRetryChecksForItself(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		then      func(s *apiStub)
	}{
		{"a pod uses it since", "in use again since it was read (pod ide)", func(s *apiStub) { s.pods = []corev1.Pod{podUsing("ide", "ws-a")} }},
		{"its rescue is gone since", "is gone since it was read", func(s *apiStub) { delete(s.snaps, "ws-a-rescue") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, ds := world(t, "ws-a")
			s.fail["DELETE persistentvolumeclaims"] = []int{429}
			s.afterDelete = func(s *apiStub) { c.then(s); s.afterDelete = nil }
			res := reapOne(t, s.clients(t), ds, Options{})
			if out := outcome(t, res, "ws-a"); out.Action != ActionSkipped || !strings.Contains(out.Message, c.msg) {
				t.Errorf("ws-a: %s (%s), want skipped (%s)", out.Action, out.Message, c.msg)
			}
			if n := s.Count("DELETE"); n != 1 {
				t.Errorf("%d DELETEs, want only the refused one: %v", n, s.Requests())
			}
		})
	}
}

// TestBatchInterruptedWhileChecking: a run interrupted during a batch's
// checks deletes nothing and reports its claims skipped, not failed.
func TestBatchInterruptedWhileChecking(t *testing.T) {
	s, ds := world(t, "ws-a", "ws-b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := s.clients(t)
	o := Options{MaxDeletions: 100, MaxDeletionPercent: 100,
		// The second claim's turn comes after the cancel: the batch's
		// lists then fail on the cancelled context.
		BeforeDelete: func(context.Context, inventory.Key) { cancel() }}
	cands := map[inventory.Key]bool{{Namespace: "ws", Name: "ws-a"}: true, {Namespace: "ws", Name: "ws-b"}: true}
	res, err := planOf(ds, cands, o, t0).execute(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ws-a", "ws-b"} {
		if out := outcome(t, res, name); out.Action != ActionSkipped || !strings.Contains(out.Message, "interrupted") {
			t.Errorf("%s: %s (%s), want skipped, interrupted", name, out.Action, out.Message)
		}
	}
	if n := s.Count("DELETE"); n != 0 {
		t.Errorf("%d DELETEs, want none", n)
	}
}
