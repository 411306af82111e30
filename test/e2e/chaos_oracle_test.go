//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// The oracle's judges of issue 40 (G1 to G5, G8): what every janitor
// process sent through the fault proxy, judged per run against the flags
// that run had and against ground truth (the pods the test created and
// deleted, the claims it made, the API server's objects), never against
// the janitor's own marks or report.

// oracleSlack is the margin of the time rules (grace period, min-age): the
// janitor reads time on the API server's clock, which the proxy moves by up
// to half a second, its Dates and the Unused condition's time are whole
// seconds, and the mark is rounded up to the next one. A deletion sooner
// than the rule minus this after the moment the test knows is a violation.
const oracleSlack = 3 * time.Second

// oracleRequest is one request of a janitor process (named by the pid in
// its User-Agent) as the fault proxy saw it: attempted (every write that
// reached the proxy, whether a fault answered it or not) or answered by the
// API server (code, and when it was sent to the server and answered).
type oracleRequest struct {
	pid                             int
	verb, group, resource, ns, name string
	at                              time.Time // reached the proxy
	sent, done                      time.Time // sent to and answered by the server (answered only)
	code                            int       // answered only
	body                            []byte    // the patch or update of a claim
	uid                             string    // a snapshot DELETE's UID precondition
	// checked is the write's Pvc-Janitor-Lease-Checked header: when its
	// run's Lease vouched for it (zero: no header).
	checked time.Time
	paged   int // a paginated pod list: its pages (sent: the first's, done: the last's)
}

// lease reports whether the request is of the janitor's Lease.
func (r oracleRequest) lease() bool { return r.resource == "leases" }

// oracleLog records every write of a janitor process, attempted and
// answered, for the judges of one iteration (take empties it).
type oracleLog struct {
	mu       sync.Mutex
	attempts []oracleRequest
	answered []oracleRequest
	// podLists are the janitor's pod lists answered whole in one
	// response (streamed, not paginated) and heard.
	podLists []oracleRequest
	// uids carries a snapshot DELETE's UID precondition from the request
	// to its answer (by *http.Request).
	uids sync.Map
	// bodies carries a claim PATCH's body from the request to its answer
	// (by *http.Request): the notices the server applied (G10).
	bodies sync.Map
	// chains are the janitor's paginated pod lists by pid, page by page
	// (G11 paged); chainOf carries a page from its request to its answer
	// (by *http.Request).
	chains  map[int][]*pageChain
	chainOf sync.Map
	// firstAt is when the proxy first saw each janitor process (by pid):
	// no later than the run's start, its first read (G10's notice).
	firstAt map[int]time.Time
	// firstList is when the proxy saw each janitor process's first list
	// (its scan's first read; the Lease and discovery come before it).
	firstList map[int]time.Time
	// pagedLists, pagedWhole and pagedMulti count the paginated pod lists:
	// all, read whole, read whole in more than one page (G11 figures).
	pagedLists, pagedWhole, pagedMulti int
	// onPodList, when set, runs when a janitor's pod list reaches the
	// proxy, before it is forwarded (the ambush).
	onPodList func()
}

// attach chains the log after the proxy's callbacks already set (the
// janitorRequests'); call once, before any janitor runs.
func (l *oracleLog) attach(p *testenv.FaultProxy) {
	prevReq, prevAns := p.OnRequest, p.OnAnswer
	p.OnRequest = func(r *http.Request) {
		if prevReq != nil {
			prevReq(r)
		}
		info := testenv.ParseRequest(r)
		pid := uaPID(r.UserAgent())
		if pid != 0 {
			l.mu.Lock()
			if l.firstAt == nil {
				l.firstAt = map[int]time.Time{}
			}
			if _, ok := l.firstAt[pid]; !ok {
				l.firstAt[pid] = time.Now()
			}
			if _, ok := l.firstList[pid]; !ok && info.Verb == "list" {
				if l.firstList == nil {
					l.firstList = map[int]time.Time{}
				}
				l.firstList[pid] = time.Now()
			}
			l.mu.Unlock()
		}
		if pid != 0 && info.Verb == "list" && info.Resource == "pods" && r.URL.Query().Get("limit") != "" {
			l.page(r, pid, info.Continue)
		}
		if pid != 0 && info.Verb == "list" && info.Resource == "pods" && !info.Continue && l.onPodList != nil {
			l.onPodList()
		}
		if pid == 0 || isRead(info.Verb) {
			return
		}
		q := oracleRequest{pid: pid, verb: info.Verb, group: info.Group, resource: info.Resource, ns: info.Namespace,
			name: info.Name, at: time.Now()}
		if h := r.Header.Get(kube.CheckedHeader); h != "" {
			q.checked, _ = time.Parse(time.RFC3339Nano, h)
		}
		claimWrite := info.Resource == "persistentvolumeclaims" && (info.Verb == "patch" || info.Verb == "update")
		snapDelete := info.Resource == "volumesnapshots" && info.Verb == "delete"
		snapCreate := info.Resource == "volumesnapshots" && info.Verb == "create"
		if (claimWrite || snapDelete || snapCreate) && r.Body != nil {
			// The body is read here and given back whole to the
			// proxy, which forwards it.
			b, err := io.ReadAll(r.Body)
			_ = r.Body.Close()
			r.Body = io.NopCloser(bytes.NewReader(b))
			if err == nil {
				q.body = b
				if claimWrite {
					l.bodies.Store(r, b)
				}
			}
		}
		if snapDelete {
			// Which snapshot: its name may be taken again at once.
			var opts struct {
				Preconditions *struct{ UID *string } `json:"preconditions"`
			}
			if json.Unmarshal(q.body, &opts) == nil && opts.Preconditions != nil && opts.Preconditions.UID != nil {
				l.uids.Store(r, *opts.Preconditions.UID)
			}
		}
		l.mu.Lock()
		l.attempts = append(l.attempts, q)
		l.mu.Unlock()
	}
	p.OnAnswer = func(r *http.Request, a testenv.Answer) {
		if prevAns != nil {
			prevAns(r, a)
		}
		info := testenv.ParseRequest(r)
		pid := uaPID(r.UserAgent())
		if ch, ok := l.chainOf.LoadAndDelete(r); ok {
			l.pageAnswered(r, ch.(*pageChain), a)
		}
		if pid != 0 && info.Verb == "list" && info.Resource == "pods" && a.Heard && a.Code == http.StatusOK && r.URL.Query().Get("limit") == "" {
			// A whole list in one answer (not paginated: a first page
			// heard may still be dropped when a continuation fails).
			l.mu.Lock()
			l.podLists = append(l.podLists, oracleRequest{pid: pid, verb: info.Verb, resource: info.Resource, sent: a.Sent, done: a.Done, code: a.Code})
			l.mu.Unlock()
		}
		if pid == 0 || isRead(info.Verb) {
			return
		}
		q := oracleRequest{pid: pid, verb: info.Verb, group: info.Group, resource: info.Resource, ns: info.Namespace,
			name: info.Name, sent: a.Sent, done: a.Done, code: a.Code}
		if uid, ok := l.uids.LoadAndDelete(r); ok {
			q.uid = uid.(string)
		}
		if b, ok := l.bodies.LoadAndDelete(r); ok {
			q.body = b.([]byte)
		}
		l.mu.Lock()
		l.answered = append(l.answered, q)
		l.mu.Unlock()
	}
}

func isRead(verb string) bool {
	return verb == "get" || verb == "list" || verb == "watch" || verb == "head"
}

// take returns and forgets what was recorded so far.
func (l *oracleLog) take() (attempts, answered, podLists []oracleRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	attempts, answered, podLists = l.attempts, l.answered, l.podLists
	for _, chains := range l.chains {
		for _, ch := range chains {
			l.pagedLists++
			if ch.bad || len(ch.pending) > 0 || ch.sent.IsZero() {
				continue // a page the janitor did not get: it read the list again
			}
			l.pagedWhole++
			if ch.pages > 1 {
				l.pagedMulti++
			}
			podLists = append(podLists, oracleRequest{pid: ch.pid, verb: "list", resource: "pods", sent: ch.sent, done: ch.done,
				code: http.StatusOK, paged: ch.pages})
		}
	}
	l.attempts, l.answered, l.podLists, l.chains = nil, nil, nil, nil
	l.chainOf.Clear()
	l.uids.Clear() // those a fault answered instead
	l.bodies.Clear()
	return attempts, answered, podLists
}

// peek returns the writes recorded so far of one process, without
// forgetting them.
func (l *oracleLog) peek(pid int) (attempts, answered []oracleRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.attempts {
		if q.pid == pid {
			attempts = append(attempts, q)
		}
	}
	for _, q := range l.answered {
		if q.pid == pid {
			answered = append(answered, q)
		}
	}
	return attempts, answered
}

// pageChain is one paginated pod list of a janitor process: its first
// page's request (no continue token) and the continuations that follow it
// with the same resourceVersion, in the token. The janitor asks for the
// next page only after it heard the last, and gives up a list (reads it
// again, from a new first page) when a page fails; so a chain whose every
// page (each token) was answered 200 and heard is a list the janitor read
// whole: a consistent snapshot at the first page's resourceVersion, taken
// within [sent, done] (the first page sent, the last answered).
type pageChain struct {
	pid        int
	rv         string
	sent, done time.Time
	pending    map[string]bool // tokens asked and not yet answered whole
	pages      int
	bad        bool // a continuation of another resourceVersion: not one list
}

// page records the request of a page of a paginated pod list.
func (l *oracleLog) page(r *http.Request, pid int, cont bool) {
	token := r.URL.Query().Get("continue")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.chains == nil {
		l.chains = map[int][]*pageChain{}
	}
	var ch *pageChain
	if !cont {
		ch = &pageChain{pid: pid, pending: map[string]bool{"": true}}
		l.chains[pid] = append(l.chains[pid], ch)
	} else {
		chains := l.chains[pid]
		if len(chains) == 0 {
			return // its first page was taken with an earlier iteration
		}
		ch = chains[len(chains)-1]
		rv := continueRV(token)
		switch {
		case rv == "":
			ch.bad = true
		case ch.rv == "":
			ch.rv = rv
		case ch.rv != rv:
			ch.bad = true
		}
		ch.pending[token] = true
	}
	l.chainOf.Store(r, ch)
}

// pageAnswered records the answer of a page: a page answered 200 and
// heard is one the janitor read.
func (l *oracleLog) pageAnswered(r *http.Request, ch *pageChain, a testenv.Answer) {
	if !a.Heard || a.Code != http.StatusOK {
		return
	}
	token := r.URL.Query().Get("continue")
	l.mu.Lock()
	defer l.mu.Unlock()
	if !ch.pending[token] {
		return // a retry of a page already read
	}
	delete(ch.pending, token)
	ch.pages++
	if token == "" {
		ch.sent = a.Sent
	}
	if a.Done.After(ch.done) {
		ch.done = a.Done
	}
}

// continueRV is the resourceVersion a list's continue token carries (the
// API server's token: base64 of {"v":...,"rv":N,"start":...}), "" when it
// cannot be read.
func continueRV(token string) string {
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		b, err := enc.DecodeString(token)
		if err != nil {
			continue
		}
		var t struct {
			RV json.Number `json:"rv"`
		}
		if json.Unmarshal(b, &t) == nil && t.RV != "" {
			return t.RV.String()
		}
	}
	return ""
}

// first is when the proxy first saw process pid, and whether it did.
func (l *oracleLog) first(pid int) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.firstAt[pid]
	return t, ok
}

// firstRead is when the proxy saw process pid's first list (the run's
// first read, docs/spec.md#notice), and whether it did.
func (l *oracleLog) firstRead(pid int) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.firstList[pid]
	return t, ok
}

// seen reports whether the proxy saw any request of process pid.
func (l *oracleLog) seen(pid int) bool {
	_, ok := l.first(pid)
	return ok
}

// runLimits are the flags of a run that the oracle judges it by: the last
// value of each flag in its arguments wins, as for the CLI.
type runLimits struct {
	grace, minAge  time.Duration
	maxDeletions   int
	maxPercent     float64
	deleteContents bool
}

func limitsOf(args []string) runLimits {
	l := runLimits{grace: 30 * time.Minute, minAge: time.Hour, maxDeletions: 50, maxPercent: 25}
	for i := 0; i+1 < len(args); i++ {
		v := args[i+1]
		switch args[i] {
		case "--grace-period":
			l.grace, _ = time.ParseDuration(v)
		case "--min-age":
			l.minAge, _ = time.ParseDuration(v)
		case "--max-deletions":
			l.maxDeletions, _ = strconv.Atoi(v)
		case "--max-deletion-percent":
			l.maxPercent, _ = strconv.ParseFloat(v, 64)
		}
	}
	l.deleteContents = slices.Contains(args, "--delete-contents")
	return l
}

// drawLimits gives some iterations a grace period and a min-age of several
// seconds (G1: every deletion then comes a grace period after the claim's
// last use the test knows was seen, and never on a claim younger than
// min-age; the claims arrange just added are Young), and some a blast
// radius small enough to be reached (G2).
func (c *chaosTest) drawLimits(args []string) []string {
	args = slices.Clone(args)
	if c.rng.Intn(3) == 0 {
		grace := time.Duration(8+c.rng.Intn(10)) * time.Second
		minAge := time.Duration(6+c.rng.Intn(8)) * time.Second
		args = append(args, "--grace-period", grace.String(), "--min-age", minAge.String())
		c.stats.GraceIterations++
	}
	switch c.rng.Intn(6) {
	case 0:
		args = append(args, "--max-deletions", strconv.Itoa(1+c.rng.Intn(2)))
		c.stats.SmallBlastRadius++
	case 1:
		args = append(args, "--max-deletion-percent", strconv.Itoa(5+c.rng.Intn(10)))
		c.stats.SmallBlastRadius++
	}
	return args
}

// inScope counts the claims of the runs' selector in the namespace now: no
// claim is created while the runs go (arrange made them before), so the
// count before the runs bounds what any run of the iteration finds in
// scope, and its percentage limit (G2).
func (w *chaosWorld) inScope() int {
	l, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: wsSel})
	if err != nil {
		w.t.Fatalf("count the claims in scope: %v", err)
	}
	return len(l.Items)
}

// judgeRequests judges what the processes of one iteration (or one final
// run) sent, from the proxy's log; args are their flags and scope the
// claims in scope before they started. Every write of any janitor process
// (restores too) is judged for G4 and G5.
func (c *chaosTest) judgeRequests(when string, args []string, results []chaosProc, scope int) {
	w := c.w
	lim := limitsOf(args)
	attempts, answered, podLists := w.oracle.take()
	ours := map[int]chaosProc{}
	for _, r := range results {
		ours[r.pid] = r
	}
	var violations []string
	bad := func(format string, a ...any) { violations = append(violations, fmt.Sprintf(when+": "+format, a...)) }

	w.mu.Lock()
	for _, q := range attempts {
		// G5: on a claim, only pvc-janitor.io/ keys.
		if q.resource == "persistentvolumeclaims" && (q.verb == "patch" || q.verb == "update") {
			if why := foreignKeys(q.verb, q.body); why != "" {
				bad("run %d sent %s of claim %s that %s: %s", q.pid, strings.ToUpper(q.verb), q.name, why, q.body)
			}
		}
		// G4: Held, Terminating and Unbound claims are never written.
		if q.resource == "persistentvolumeclaims" && q.name != "" {
			if kind, special := w.specials[q.name]; special {
				w.specialWrites[kind]++
				bad("run %d sent %s of claim %s, which is %s: the janitor may do nothing to it", q.pid, strings.ToUpper(q.verb), q.name, kind)
			}
		}
		r, mine := ours[q.pid]
		if !mine {
			continue
		}
		// G3: a run refused by the Lease writes nothing but the Lease.
		if r.code == 5 && !q.lease() {
			bad("run %d exited 5 (the Lease held) and sent %s %s/%s", q.pid, strings.ToUpper(q.verb), q.resource, q.name)
		}
		// G4: a claim younger than --min-age is never written (unless a
		// pod used it: InUse comes first and writes a use down).
		if cl := w.claims[q.name]; cl != nil && q.resource == "persistentvolumeclaims" && q.at.Sub(cl.created) < lim.minAge-oracleSlack &&
			!w.usedBeforeLocked(cl.name, q.at) && !removesPhaseOnly(q.verb, q.body) {
			bad("run %d sent %s of claim %s %s after its create began, under --min-age %s: it was Young", q.pid,
				strings.ToUpper(q.verb), q.name, q.at.Sub(cl.created).Round(time.Millisecond), lim.minAge)
		}
	}

	// G3: a run writes only once it holds the Lease, and no two runs'
	// writes interleave.
	type span struct {
		first, last time.Time
		leaseAt     time.Time // its first Lease write the server accepted
		n           int
	}
	spans := map[int]*span{}
	deletes := map[int]map[string]oracleRequest{} // the claims each run deleted, first applied DELETE
	for _, q := range answered {
		if _, mine := ours[q.pid]; !mine {
			continue
		}
		s := spans[q.pid]
		if s == nil {
			s = &span{}
			spans[q.pid] = s
		}
		if q.lease() {
			if q.code/100 == 2 && (q.verb == "create" || q.verb == "update") && (s.leaseAt.IsZero() || q.done.Before(s.leaseAt)) {
				s.leaseAt = q.done
			}
			continue
		}
		if s.n == 0 || q.sent.Before(s.first) {
			s.first = q.sent
		}
		if s.n == 0 || q.done.After(s.last) {
			s.last = q.done
		}
		s.n++
		if q.resource == "persistentvolumeclaims" && q.verb == "delete" && q.code/100 == 2 {
			if deletes[q.pid] == nil {
				deletes[q.pid] = map[string]oracleRequest{}
			}
			if d, ok := deletes[q.pid][q.name]; !ok || q.sent.Before(d.sent) {
				deletes[q.pid][q.name] = q
			}
		}
	}
	// G3 takeover: a pair whose first run lost its Lease is judged by
	// its own rule (chaos_takeover_test.go), not by the spans below.
	takeA, takeB := c.judgeTakeoverLocked(attempts, answered, bad)
	pids := make([]int, 0, len(spans))
	for pid, s := range spans {
		if s.n > 0 {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	for i, a := range pids {
		sa := spans[a]
		if sa.leaseAt.IsZero() || sa.first.Before(sa.leaseAt) {
			bad("run %d wrote (first at %s) before the server had accepted its Lease (%s)", a,
				sa.first.Format("15:04:05.000"), sa.leaseAt.Format("15:04:05.000"))
		}
		for _, b := range pids[i+1:] {
			sb := spans[b]
			if (a == takeA && b == takeB) || (a == takeB && b == takeA) {
				continue
			}
			if sa.first.Before(sb.last) && sb.first.Before(sa.last) {
				bad("the writes of runs %d [%s, %s] and %d [%s, %s] interleave: two runs wrote at once", a,
					sa.first.Format("15:04:05.000"), sa.last.Format("15:04:05.000"), b, sb.first.Format("15:04:05.000"), sb.last.Format("15:04:05.000"))
			}
		}
	}
	if len(pids) > 1 {
		c.stats.WritingPairs++
	}
	// G8: the snapshots each run deleted, and whether it had
	// --delete-contents (collectContents fails a content such a delete left).
	for _, q := range answered {
		if _, mine := ours[q.pid]; mine && q.resource == "volumesnapshots" && q.verb == "delete" && q.code/100 == 2 {
			w.deletedContents[q.name] = lim.deleteContents
			w.prunedCarry[q.name] = slices.Contains(args, "--sessions-carry-data")
		}
	}

	// G10: notices and attachments (chaos_g10_test.go).
	c.judgeG10Locked(args, ours, attempts, answered, deletes, bad)

	// G2: each run's deletions within its blast radius.
	for pid, ds := range deletes {
		n := len(ds)
		if n > lim.maxDeletions {
			bad("run %d deleted %d claims, over --max-deletions %d", pid, n, lim.maxDeletions)
		}
		if float64(100*n) > lim.maxPercent*float64(scope)+1e-9 {
			bad("run %d deleted %d claims of at most %d in scope, over --max-deletion-percent %g", pid, n, scope, lim.maxPercent)
		}
	}
	for _, r := range results {
		if strings.Contains(r.stderr, "blast radius: ") {
			c.stats.BlastRadiusReached++
		}
	}

	// G11: no run deletes a claim that one of its own pod lists showed in
	// use: judged by the pods the API server held (the test's own
	// creates and deletes, by when they returned and began) when a list
	// the proxy forwarded whole was sent and answered, not by what the
	// janitor made of it. A claim in use at the scan is no candidate, and
	// one that a later list shows in use is not deleted
	// (docs/spec.md#reap-reread).
	for pid, ds := range deletes {
		for name, d := range ds {
			judged, byPages := false, false
			for _, l := range podLists {
				if l.pid != pid || !l.done.Before(d.sent) {
					continue
				}
				judged = true
				byPages = byPages || l.paged > 1
				for pod, p := range w.pods {
					if p.claim == name && p.createdDone.Before(l.sent) && (p.deleteStart.IsZero() || p.deleteStart.After(l.done)) {
						bad("run %d deleted %s (DELETE sent %s) after its own pod list [%s, %s] (%d pages; 0: one stream) showed pod %s [%s, %s] using it", pid, name,
							d.sent.Format("15:04:05.000"), l.sent.Format("15:04:05.000"), l.done.Format("15:04:05.000"), l.paged, pod,
							p.createdDone.Format("15:04:05.000"), p.deleteStart.Format("15:04:05.000"))
					}
				}
			}
			if judged {
				c.stats.DeletionsJudgedByOwnLists++
			}
			if byPages {
				c.stats.DeletionsJudgedByPagedLists++
			}
		}
	}

	// G7: the janitor never deletes an intact rescue of a claim that is
	// still there, unless a newer snapshot of it was ready
	// (docs/spec.md#retention-never), nor anyone else's snapshot.
	for _, q := range answered {
		if _, mine := ours[q.pid]; !mine || q.resource != "volumesnapshots" || q.verb != "delete" || q.code/100 != 2 {
			continue
		}
		if w.foreign[q.name] {
			bad("run %d deleted %s, the backup tool's snapshot", q.pid, q.name)
			continue
		}
		if why := w.liveRescueLocked(q.name, types.UID(q.uid), q.sent); why != "" {
			bad("run %d deleted snapshot %s at %s: %s", q.pid, q.name, q.sent.Format("15:04:05.000"), why)
		}
	}

	// G1, rescues: no rescue (a snapshot of the janitor's but an archive)
	// is taken before the claim was orphaned for the grace period
	// (docs/spec.md#rule-orphaned), from the last use a janitor pod list
	// saw end.
	for _, q := range attempts {
		if _, mine := ours[q.pid]; !mine || q.resource != "volumesnapshots" || q.verb != "create" || lim.grace <= 0 {
			continue
		}
		var vs struct {
			Metadata struct{ Labels map[string]string } `json:"metadata"`
			Spec     struct {
				Source struct{ PersistentVolumeClaimName string }
			} `json:"spec"`
		}
		if err := json.Unmarshal(q.body, &vs); err != nil || vs.Metadata.Labels["pvc-janitor.io/superseded"] != "" {
			continue
		}
		cl := w.claims[vs.Spec.Source.PersistentVolumeClaimName]
		if cl == nil {
			continue // check fails a snapshot of anything but a workspace claim
		}
		c.stats.GraceRescues++
		end, by := w.lastSeenUseLocked(cl, q.at, false)
		if !end.IsZero() && q.at.Before(end.Add(lim.grace-oracleSlack)) {
			bad("run %d created a snapshot of %s at %s, %s after its last use ended (%s, %s), under --grace-period %s", q.pid, cl.name,
				q.at.Format("15:04:05.000"), q.at.Sub(end).Round(time.Millisecond), end.Format("15:04:05.000"), by, lim.grace)
		}
	}

	// G1: every deletion a grace period after the last use the test knows
	// a janitor pod list (of a run that lived to write it down) or the
	// controller manager saw end, and never of a claim younger than
	// --min-age.
	for pid, ds := range deletes {
		for name, d := range ds {
			cl := w.claims[name]
			if cl == nil {
				continue // a special claim: judged above and by check
			}
			if age := d.done.Sub(cl.created); age < lim.minAge-oracleSlack {
				bad("run %d deleted %s %s after its create began, under --min-age %s", pid, name, age.Round(time.Millisecond), lim.minAge)
			}
			if lim.grace <= 0 {
				continue
			}
			c.stats.GraceDeletions++
			end, by := w.lastSeenUseLocked(cl, d.sent, true)
			if !end.IsZero() && d.done.Before(end.Add(lim.grace-oracleSlack)) {
				bad("run %d deleted %s at %s, %s after its last use ended (%s, %s), under --grace-period %s", pid, name,
					d.done.Format("15:04:05.000"), d.done.Sub(end).Round(time.Millisecond), end.Format("15:04:05.000"), by, lim.grace)
			}
		}
	}
	w.mu.Unlock()
	if len(violations) > 0 {
		sort.Strings(violations)
		c.fail("%d violations:\n%s", len(violations), strings.Join(violations, "\n"))
	}
}

// liveRescueLocked says why deleting snapshot name at t deleted a live
// claim's rescue ("" when it did not): the watch saw it ready and never
// with an error (a failed attempt is deleted to be taken again), its claim
// had been neither reaped (no applied DELETE of it, none seen) nor retired
// by then, and no newer snapshot of the claim was seen ready. Called with
// mu held.
func (w *chaosWorld) liveRescueLocked(name string, uid types.UID, t time.Time) string {
	var snap seenSnap
	found := false
	if uid != "" {
		snap, found = w.seenReady[uid]
		found = found && !w.snapErred[uid]
	} else {
		// No UID precondition: the last snapshot of that name surely
		// created (whole seconds) before the delete.
		for u, s := range w.seenReady {
			if s.name == name && s.created.Before(t.Add(-time.Second)) && (!found || s.created.After(snap.created)) {
				snap, found = s, !w.snapErred[u]
			}
		}
	}
	if !found {
		return "" // never ready, or with an error: a failed attempt
	}
	c := w.claims[snap.source]
	if c == nil || c.outsider || w.retired[c.name] || snap.created.Before(c.truth.Created) {
		return ""
	}
	if at, gone := w.deleted[c.name]; gone && at.Before(t) {
		return ""
	}
	w.req.mu.Lock()
	d, reaped := w.req.deletes[c.name]
	w.req.mu.Unlock()
	if reaped && d.sent.Before(t) {
		return ""
	}
	for _, s := range w.seenReady {
		if s.source == c.name && s.name != name && s.created.After(snap.created) {
			return "" // a newer copy of the claim was ready
		}
	}
	return fmt.Sprintf("it was a ready rescue (created %s) of %s, which was still there, and no newer snapshot of it was ready",
		snap.created.Format("15:04:05"), c.name)
}

// prunedOnLocked judges the pruning of c's copy (copyName) by what held
// its data then (G6). By descent, whatever the pruning run's mode: a claim
// restored, at any remove, from a copy of c at least as new as copyName,
// that still exists or was reaped on an intact rescue of its own
// (docs/spec.md#rule-descent: a newer claim created empty holds nothing of
// c's). Under --sessions-carry-data also the workspace's line (newer data
// of the workspace, newerDataLocked). A copy whose delete the proxy did
// not attribute is judged by the line as well, the lenient side.
// Called with mu held.
func (w *chaosWorld) prunedOnLocked(c *chaosClaim, snaps []truthSnap, copyName string) (string, bool) {
	var pruned time.Time // when copyName was created (the newest of that name)
	for _, s := range w.seenReady {
		if s.name == copyName && s.source == c.name && s.created.After(pruned) {
			pruned = s.created
		}
	}
	for _, b := range w.claims {
		x := b
		for x.restoredFrom != nil && x.restoredFrom != c {
			x = x.restoredFrom
		}
		if b == c || x.restoredFrom != c || w.retired[b.name] || x.restoredCopy.Before(pruned) {
			continue
		}
		if _, gone := w.deleted[b.name]; !gone {
			return b.name + " (restored from its data, exists)", true
		}
		if s, ok := b.truth.rescueAfter(snaps, b.truth.Created); ok {
			return b.name + " (restored from its data, rescued by " + s.Name + ")", true
		}
	}
	if carry, known := w.prunedCarry[copyName]; !known || carry {
		return w.newerDataLocked(c, snaps)
	}
	return "", false
}

// usedBeforeLocked reports whether a pod of the churn used the claim
// before t. Called with mu held.
func (w *chaosWorld) usedBeforeLocked(claim string, t time.Time) bool {
	for _, p := range w.pods {
		if p.claim == claim && p.created.Before(t) {
			return true
		}
	}
	return false
}

// lastSeenUseLocked is when the claim's last use before t that someone
// saw surely ended: a pod that a janitor pod list (of a run not blind)
// surely showed, gone by the start of its delete; or, for a claim deleted
// (deleted), on a stack with the Unused condition, the condition's time on
// the claim as it was deleted.
// Called with mu held.
func (w *chaosWorld) lastSeenUseLocked(c *chaosClaim, before time.Time, deleted bool) (time.Time, string) {
	var end time.Time
	by := ""
	for name, p := range w.pods {
		if p.claim != c.name || p.deleteStart.IsZero() || !p.deleteStart.Before(before) {
			continue
		}
		if seen, ok := w.janitorSaw(p); ok && p.deleteStart.After(end) {
			end, by = p.deleteStart, fmt.Sprintf("pod %s, seen by a janitor pod list at %s", name, seen.Format("15:04:05.000"))
		}
	}
	if obj := w.deletedObj[c.name]; obj != nil && deleted {
		for _, cond := range obj.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.Time.After(end) {
				end, by = cond.LastTransitionTime.Time, "the Unused condition"
			}
		}
	}
	return end, by
}

// removesPhaseOnly reports whether a claim's patch only removes the phase
// label: what a run does to a Young claim that an earlier run, under a
// smaller --min-age, labelled (docs/spec.md#rule-last-used's neighbour,
// "for Held, Unbound and Young claims without a use the phase label is
// removed and the orphaned-since kept").
func removesPhaseOnly(verb string, body []byte) bool {
	var p struct {
		Metadata struct {
			Labels      map[string]*string `json:"labels"`
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if verb != "patch" || json.Unmarshal(body, &p) != nil || len(p.Metadata.Annotations) != 0 || len(p.Metadata.Labels) != 1 {
		return false
	}
	v, ok := p.Metadata.Labels["pvc-janitor.io/phase"]
	return ok && v == nil
}

// foreignKeys says what a janitor's write of a claim touches beyond its own
// keys (docs/spec.md#marks: labels and annotations under pvc-janitor.io/,
// with the uid and resourceVersion preconditions), "" when nothing.
func foreignKeys(verb string, body []byte) string {
	if verb != "patch" {
		return "replaces the whole claim"
	}
	var jp []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	if json.Unmarshal(body, &jp) == nil {
		for _, op := range jp {
			ok := false
			for _, pre := range []string{"/metadata/labels/pvc-janitor.io~1", "/metadata/annotations/pvc-janitor.io~1"} {
				ok = ok || strings.HasPrefix(op.Path, pre)
			}
			if !ok && op.Op != "test" {
				return "changes " + op.Path
			}
		}
		return ""
	}
	var mp map[string]json.RawMessage
	if err := json.Unmarshal(body, &mp); err != nil {
		return "cannot be read: " + err.Error()
	}
	for k := range mp {
		if k != "metadata" {
			return "changes " + k
		}
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(mp["metadata"], &meta); err != nil {
		return "has a metadata that cannot be read"
	}
	for k, v := range meta {
		switch k {
		case "uid", "resourceVersion":
		case "labels", "annotations":
			var keys map[string]any
			if err := json.Unmarshal(v, &keys); err != nil {
				return "has " + k + " that cannot be read"
			}
			for key := range keys {
				if !strings.HasPrefix(key, "pvc-janitor.io/") {
					return "writes the " + strings.TrimSuffix(k, "s") + " " + key
				}
			}
		default:
			return "changes metadata." + k
		}
	}
	return ""
}

// Special claims of the mix (G4), in scope (the selector's labels) and each
// its own workspace: two Held (by label, by annotation), one Terminating (a
// foreign finalizer holds it), one Unbound (Pending). The janitor must never
// write, snapshot or delete them; they are not in w.claims, so check fails
// any snapshot of them and any deletion but the test's own of the
// Terminating one.
const (
	specialHeld        = "Held"
	specialTerminating = "Terminating"
	specialUnbound     = "Unbound"
	chaosFinalizer     = "chaos.example.com/keep"
)

func (w *chaosWorld) addSpecials(fail func(string, ...any)) {
	ctx := context.Background()
	claims := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns)
	labels := func(ws string, extra map[string]string) map[string]string {
		l := map[string]string{"workspace": ws, "app.kubernetes.io/part-of": "demo-workspaces"}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	specs := []struct {
		spec testenv.ClaimSpec
		kind string
	}{
		{testenv.ClaimSpec{Name: "held-000", Labels: labels("w-held-0", map[string]string{"pvc-janitor.io/hold": "true"})}, specialHeld},
		{testenv.ClaimSpec{Name: "held-001", Labels: labels("w-held-1", nil), Annotations: map[string]string{"pvc-janitor.io/hold": "True"}}, specialHeld},
		{testenv.ClaimSpec{Name: "term-000", Labels: labels("w-term-0", nil)}, specialTerminating},
		{testenv.ClaimSpec{Name: "unbound-000", Labels: labels("w-unbound-0", nil), Unbound: true}, specialUnbound},
	}
	for _, s := range specs {
		s.spec.Namespace = w.ns
		w.mu.Lock()
		w.specials[s.spec.Name] = s.kind
		w.mu.Unlock()
		if _, err := w.f.BoundClaim(ctx, s.spec); err != nil {
			fail("create the %s claim %s: %v", s.kind, s.spec.Name, err)
		}
		if s.kind != specialTerminating {
			continue
		}
		patch := []byte(`{"metadata":{"finalizers":["` + chaosFinalizer + `"]}}`)
		if _, err := claims.Patch(ctx, s.spec.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			fail("hold %s with a finalizer: %v", s.spec.Name, err)
		}
		name := s.spec.Name
		w.t.Cleanup(func() {
			_, _ = claims.Patch(context.Background(), name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			fail("delete %s: %v", name, err)
		}
	}
}

// checkSpecials: the special claims are all still there as made (G4).
func (w *chaosWorld) checkSpecials(fail func(string, ...any), when string) {
	w.mu.Lock()
	specials := make(map[string]string, len(w.specials))
	for k, v := range w.specials {
		specials[k] = v
	}
	w.mu.Unlock()
	for name, kind := range specials {
		c, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			fail("%s: the %s claim %s: %v", when, kind, name, err)
			return
		}
		for k := range c.Annotations {
			if strings.HasPrefix(k, "pvc-janitor.io/") && k != "pvc-janitor.io/hold" {
				fail("%s: the %s claim %s was marked: %s", when, kind, name, k)
			}
		}
		for k := range c.Labels {
			if strings.HasPrefix(k, "pvc-janitor.io/") && k != "pvc-janitor.io/hold" {
				fail("%s: the %s claim %s was labelled: %s", when, kind, name, k)
			}
		}
		if (kind == specialTerminating) != (c.DeletionTimestamp != nil) {
			fail("%s: the %s claim %s has deletionTimestamp %v", when, kind, name, c.DeletionTimestamp)
		}
	}
}

// checkContents (G8) between runs: every ready snapshot without an error
// that the janitor made, not being deleted, has a Retain content, or
// carries prune's intent (a run stopped between the intent, the content's
// Delete and the delete: the next writing run settles it,
// docs/spec.md#retention-intent).
// After a final run that succeeded (final), nothing is left unsettled: a
// content that prune set to Delete and whose rescue it kept after all is
// Retain again (docs/spec.md#retention-contents).
func (w *chaosWorld) checkContents(fail func(string, ...any), when string, final bool) {
	ctx := context.Background()
	l, err := w.f.Snap.SnapshotV1().VolumeSnapshots(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		fail("%s: list snapshots: %v", when, err)
	}
	w.mu.Lock()
	foreign := maps.Clone(w.foreign)
	w.mu.Unlock()
	for i := range l.Items {
		s := &l.Items[i]
		if foreign[s.Name] || s.DeletionTimestamp != nil {
			continue
		}
		intent, pending := s.Annotations["pvc-janitor.io/prune-intent"]
		if pending && final {
			fail("%s: snapshot %s still carries prune-intent %s after a final run that succeeded", when, s.Name, intent)
		}
		if s.Status == nil || s.Status.BoundVolumeSnapshotContentName == nil || s.Status.ReadyToUse == nil || !*s.Status.ReadyToUse || s.Status.Error != nil {
			// Not a rescue (yet): a failed attempt whose removal a run
			// began (its content set to Delete first) and did not end
			// is removed again by the next run.
			continue
		}
		cn := *s.Status.BoundVolumeSnapshotContentName
		content, err := w.f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, cn, metav1.GetOptions{})
		if err != nil {
			continue // judged by check (a rescue without its content is not intact)
		}
		if final {
			w.mu.Lock()
			w.keptContents++
			w.mu.Unlock()
		}
		if content.Spec.DeletionPolicy != "Retain" && !pending {
			fail("%s: snapshot %s is kept, without prune's intent, and its content %s is %s, not Retain", when, s.Name, cn, content.Spec.DeletionPolicy)
		}
	}
}

// ambush is a user who starts a session on a rescued claim just as a
// janitor's pod list reaches the API server (the proxy holds the list until
// the pod exists): when that list is a reap batch's, the claim is in use
// by its answer and must not be deleted (docs/spec.md#reap-batch), which
// invariant 2 and G11 judge. In a third of the iterations, at most two per
// iteration, each on a live claim that is the newest of its workspace,
// has no pod and has a ready rescue, with even odds per pod list.
func (w *chaosWorld) ambush() {
	w.mu.Lock()
	if !w.ambushOn || w.ambushes >= 2 || w.rng.Intn(2) == 0 {
		w.mu.Unlock()
		return
	}
	used := map[string]bool{}
	for _, p := range w.pods {
		if p.deleteStart.IsZero() {
			used[p.claim] = true
		}
	}
	var cands []string
	for _, c := range w.sessionsLocked() {
		if c.outsider || used[c.name] {
			continue
		}
		for uid, s := range w.seenReady {
			if s.source == c.name && !w.snapErred[uid] && !s.created.Before(c.truth.Created) {
				cands = append(cands, c.name)
				break
			}
		}
	}
	if len(cands) == 0 {
		w.mu.Unlock()
		return
	}
	sort.Strings(cands)
	claim := cands[w.rng.Intn(len(cands))]
	name := fmt.Sprintf("p-%d", w.nextPod)
	w.nextPod++
	w.ambushes++
	w.mu.Unlock()
	start := time.Now()
	if _, err := w.f.Pod(context.Background(), testenv.PodSpec{Namespace: w.ns, Name: name, Claims: []string{claim}}); err == nil {
		w.mu.Lock()
		w.pods[name] = &chaosPod{claim: claim, created: start, createdDone: time.Now()}
		w.ambushed++
		w.mu.Unlock()
	}
}
