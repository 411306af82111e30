//go:build integration

package cli_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// janitorRequests records, through the fault proxy, the janitor's requests
// that the safety tests judge invariant 2 and "a use the janitor saw" by:
// its pod lists that it heard whole, and the claim deletions the API server
// applied, each with the pid of the process that sent it.
type janitorRequests struct {
	mu       sync.Mutex
	podLists []podList
	// vaLists are the janitor's VolumeAttachment lists heard whole, like
	// podLists: an attachment one showed is a use the janitor saw.
	vaLists []podList
	// deletes is the first DELETE of each claim that the server answered
	// with success (the one that set its deletionTimestamp).
	deletes map[string]claimDelete
}

// podList is one janitor pod list (its first page): when the proxy sent it
// to the server and when the answer ended, and the pid of the run that
// made it (from its User-Agent; 0 when it names none).
type podList struct {
	sent, done time.Time
	pid        int
}

// claimDelete is a DELETE of a claim that the API server applied.
type claimDelete struct {
	sent time.Time
	pid  int
}

// attach records p's answered requests; call before any janitor runs.
func (q *janitorRequests) attach(p *testenv.FaultProxy) {
	p.OnAnswer = func(r *http.Request, a testenv.Answer) {
		info := testenv.ParseRequest(r)
		q.mu.Lock()
		defer q.mu.Unlock()
		switch {
		case info.Verb == "list" && info.Resource == "pods" && !info.Continue && a.Heard && a.Code == http.StatusOK:
			// A paginated list is a consistent snapshot as of its first
			// page.
			q.podLists = append(q.podLists, podList{sent: a.Sent, done: a.Done, pid: uaPID(r.UserAgent())})
		case info.Verb == "list" && info.Resource == "volumeattachments" && !info.Continue && a.Heard && a.Code == http.StatusOK:
			q.vaLists = append(q.vaLists, podList{sent: a.Sent, done: a.Done, pid: uaPID(r.UserAgent())})
		case info.Verb == "delete" && info.Resource == "persistentvolumeclaims" && a.Code/100 == 2:
			name := info.Name
			if d, ok := q.deletes[name]; !ok || a.Sent.Before(d.sent) {
				if q.deletes == nil {
					q.deletes = map[string]claimDelete{}
				}
				q.deletes[name] = claimDelete{sent: a.Sent, pid: uaPID(r.UserAgent())}
			}
		}
	}
}

// listed reports whether a pod list (of a run blind does not name) surely
// showed a pod that existed from created until deleteStart (zero: still
// there): its creation had returned before the list was sent, and its
// delete began after the answer ended. It returns when that list was sent.
func (q *janitorRequests) listed(created, deleteStart time.Time, blind func(pid int) bool) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return surelyShown(q.podLists, created, deleteStart, blind)
}

// listedVA is listed for a VolumeAttachment: whether a janitor
// VolumeAttachment list (of a run blind does not name) surely showed one
// that existed from created until deleteStart.
func (q *janitorRequests) listedVA(created, deleteStart time.Time, blind func(pid int) bool) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return surelyShown(q.vaLists, created, deleteStart, blind)
}

func surelyShown(lists []podList, created, deleteStart time.Time, blind func(pid int) bool) (time.Time, bool) {
	for _, l := range lists {
		if blind != nil && blind(l.pid) {
			continue
		}
		if !created.IsZero() && created.Before(l.sent) && (deleteStart.IsZero() || deleteStart.After(l.done)) {
			return l.sent, true
		}
	}
	return time.Time{}, false
}

// lastListBefore is the last pod list the process that deleted claim heard
// before it sent that DELETE: the janitor lists the pods of the namespace
// right before each delete (and deletes one claim at a time), so a pod that
// list showed must have stopped the delete. ok is false when the proxy saw
// no applied DELETE of the claim, or no pod list of its process before it.
func (q *janitorRequests) lastListBefore(claim string) (podList, claimDelete, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.deletes[claim]
	if !ok {
		return podList{}, claimDelete{}, false
	}
	var last podList
	found := false
	for _, l := range q.podLists {
		if l.pid == d.pid && l.done.Before(d.sent) && (!found || l.sent.After(last.sent)) {
			last, found = l, true
		}
	}
	return last, d, found
}

// heldAt judges invariant 2 for one pod of a deleted claim: it reports
// whether the pod stood in the way of the delete. With the deleting run's
// last pod list known, the pod was in it (created before the list was sent,
// its delete not begun before the answer ended). Without it (no applied
// DELETE seen: counted as unattributed by the callers), the fallback is
// the old judgement against when the deletion was seen: the pod was created
// over a second before the window [from, at] and was still there at at.
func (q *janitorRequests) heldAt(claim string, createdDone, created, deleteStart, deleted, from, at time.Time) (held, attributed bool) {
	if l, _, ok := q.lastListBefore(claim); ok {
		return !createdDone.IsZero() && createdDone.Before(l.sent) && (deleteStart.IsZero() || deleteStart.After(l.done)), true
	}
	return created.Before(from.Add(-time.Second)) && (deleted.IsZero() || deleted.After(at)), false
}

// uaPID is the pid in the janitor's User-Agent, "pvc-janitor/V (host/pid)".
func uaPID(ua string) int {
	i := strings.LastIndex(ua, "/")
	if i < 0 || !strings.HasSuffix(ua, ")") {
		return 0
	}
	pid, _ := strconv.Atoi(ua[i+1 : len(ua)-1])
	return pid
}
