//go:build integration

package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The oracle's G10 (issue 40): the owner's notice and snooze, a
// VolumeAttachment without a pod, and `janitor guard` in the mix, each
// judged against ground truth: what the test wrote and created, and what
// the proxy forwarded (the PATCH bodies of the runs' notices, their
// DELETEs and snapshot creates, the guard's requests), never against a
// run's report.

// noticeSlack is the margin of the notice's rule: a run's start is the API
// server's clock of its first read (a Date moved by up to half a second by
// the proxy, whole seconds), which the oracle takes as the proxy's first
// sight of its first list (the Lease and discovery come before it).
const noticeSlack = time.Second

// noticeEvent is a janitor's PATCH of a claim's pvc-janitor.io/reap-after
// that the API server answered with success (heard or not): set to end,
// or removed.
type noticeEvent struct {
	pid  int
	at   time.Time // answered
	set  bool
	end  time.Time
	name string
}

// snoozeEvent is the owner's pvc-janitor.io/snooze-until, as the test
// wrote it (between runs, directly to the API server).
type snoozeEvent struct {
	at    time.Time // the test's write returned
	until time.Time
}

// chaosVA is a VolumeAttachment of a claim's volume the test created
// without a pod (a node that still holds the volume), attached: true, and
// when its create returned and its delete began (both between runs).
type chaosVA struct {
	name, claim, pv      string
	created, deleteStart time.Time
	iteration            int
}

// g10World is the state of the G10 disturbances. Under chaosWorld.mu.
type g10World struct {
	notices map[string][]noticeEvent // by claim UID
	snoozes map[string][]snoozeEvent // by claim name
	vas     []*chaosVA
	nextVA  int
	// judgedVA holds each deletion (claim/attachment) judged against an
	// attachment without a pod that a janitor list saw and that ended
	// before the deletion (invariant 1, chaosWorld.check).
	judgedVA map[string]bool
}

// chaosGuard is one `janitor guard` process beside or after an
// iteration's runs.
type chaosGuard struct {
	proc       chaosProc
	start, end time.Time
	delay      time.Duration
}

// g10Figures are the G10 figures of chaosStats.
type g10Figures struct {
	NoticeIterations  int            `json:"noticeIterations"`
	NoticesWritten    int            `json:"noticesWritten"`
	NoticeDeletions   int            `json:"deletionsJudgedAgainstANotice"`
	Snoozes           int            `json:"snoozesWrittenByOwners"`
	SnoozedDeletions  int            `json:"deletionsJudgedAgainstASnooze"`
	MaxSnoozeRuns     int            `json:"iterationsWithASmallMaxSnooze"`
	Attachments       int            `json:"volumeAttachmentsWithoutAPod"`
	AttachedRuns      int            `json:"runsJudgedBesideAnAttachment"`
	AttachedDeletions int            `json:"deletionsJudgedAfterASeenAttachment"`
	Guards            int            `json:"guards"`
	GuardExits        map[string]int `json:"guardExits"`
	GuardsAtRisk      int            `json:"guardsWithAClaimAtRiskThroughout"`
	GuardsBesideRuns  int            `json:"guardsBesideRuns"`
	GuardRequestsSeen int            `json:"guardRequestsSeen"`
}

// ended is each attachment of the claim named name, made at or after since
// (the claim's creation: an earlier one was of another claim of that
// name), whose delete has begun. Under chaosWorld.mu.
func (g *g10World) ended(name string, since time.Time) []*chaosVA {
	var out []*chaosVA
	for _, va := range g.vas {
		if va.claim == name && !va.deleteStart.IsZero() && !va.created.Before(since) {
			out = append(out, va)
		}
	}
	return out
}

func (g *g10World) init() {
	g.notices = map[string][]noticeEvent{}
	g.snoozes = map[string][]snoozeEvent{}
	g.judgedVA = map[string]bool{}
}

// drawNotice gives streaks of three or four iterations (one streak
// begins in eight iterations without one) an owner's notice of 4 to 12 s
// (--notice-period): a notice one run writes ends before a later run of
// the streak begins, which may then reap. Half the streaks have a
// --max-snooze of 2 to 8 s (the owners' snoozes are then capped).
func (c *chaosTest) drawNotice(args []string) []string {
	n := &c.notice
	if n.left == 0 && c.rng.Intn(8) == 0 {
		n.left = 3 + c.rng.Intn(2)
		n.args = []string{"--notice-period", strconv.Itoa(4+c.rng.Intn(9)) + "s"}
		if c.rng.Intn(2) == 0 {
			n.args = append(n.args, "--max-snooze", strconv.Itoa(2+c.rng.Intn(7))+"s")
		}
	}
	if n.left == 0 {
		return args
	}
	n.left--
	c.stats.G10.NoticeIterations++
	if len(n.args) > 2 {
		c.stats.G10.MaxSnoozeRuns++
	}
	return append(slices.Clone(args), n.args...)
}

// noticeStreak is the notice of the current streak of iterations.
type noticeStreak struct {
	left int
	args []string
}

// arrangeG10 moves the G10 part of the world between runs: an owner
// snoozes a live claim's reap (a fifth of the iterations), the test
// attaches a claim's volume to a node without a pod (a quarter, at most
// two at once) and detaches those attached for two iterations.
func (c *chaosTest) arrangeG10(i int) {
	w := c.w
	ctx := context.Background()
	if c.rng.Intn(5) == 0 {
		w.mu.Lock()
		var cands []string
		for _, cl := range w.sessionsLocked() {
			if !cl.outsider {
				cands = append(cands, cl.name)
			}
		}
		var name string
		if len(cands) > 0 {
			name = cands[w.rng.Intn(len(cands))]
		}
		until := time.Now().Add(time.Duration(3+w.rng.Intn(40)) * time.Second).Truncate(time.Second)
		w.mu.Unlock()
		if name != "" {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"pvc-janitor.io/snooze-until":%q}}}`, until.UTC().Format(time.RFC3339))
			if _, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				w.mu.Lock()
				w.g10.snoozes[name] = append(w.g10.snoozes[name], snoozeEvent{at: time.Now(), until: until})
				c.stats.G10.Snoozes++
				w.mu.Unlock()
			}
		}
	}
	// Detach what was attached two iterations ago.
	w.mu.Lock()
	var detach []*chaosVA
	live := 0
	for _, va := range w.g10.vas {
		if va.deleteStart.IsZero() {
			if i-va.iteration >= 2 {
				detach = append(detach, va)
			} else {
				live++
			}
		}
	}
	w.mu.Unlock()
	for _, va := range detach {
		c.detach(va)
	}
	if live >= 2 || c.rng.Intn(4) != 0 {
		return
	}
	// Attach a live claim without a pod, a rescued one when there is
	// one (the reap's candidates).
	w.mu.Lock()
	used := map[string]bool{}
	for _, p := range w.pods {
		if p.deleteStart.IsZero() {
			used[p.claim] = true
		}
	}
	for _, va := range w.g10.vas {
		if va.deleteStart.IsZero() {
			used[va.claim] = true
		}
	}
	var rescued, others []string
	for _, cl := range w.sessionsLocked() {
		if cl.outsider || used[cl.name] {
			continue
		}
		others = append(others, cl.name)
		for uid, s := range w.seenReady {
			if s.source == cl.name && !w.snapErred[uid] && !s.created.Before(cl.truth.Created) {
				rescued = append(rescued, cl.name)
				break
			}
		}
	}
	if len(rescued) > 0 {
		others = rescued
	}
	var claim string
	if len(others) > 0 {
		claim = others[w.rng.Intn(len(others))]
	}
	name := fmt.Sprintf("va-%s-%d", w.ns, w.g10.nextVA)
	w.g10.nextVA++
	w.mu.Unlock()
	if claim == "" {
		return
	}
	pvc, err := w.f.Kube.CoreV1().PersistentVolumeClaims(w.ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil || pvc.Spec.VolumeName == "" || pvc.DeletionTimestamp != nil {
		return
	}
	if _, err := w.f.VolumeAttachment(ctx, name, pvc.Spec.VolumeName, "node-chaos", true); err != nil {
		c.t.Fatalf("attach %s: %v", claim, err) // a disturbance drawn and not made is no disturbance
	}
	w.mu.Lock()
	w.g10.vas = append(w.g10.vas, &chaosVA{name: name, claim: claim, pv: pvc.Spec.VolumeName, created: time.Now(), iteration: i})
	c.stats.G10.Attachments++
	w.mu.Unlock()
	c.t.Logf("iteration %d: %s attaches %s (volume %s) without a pod", i, name, claim, pvc.Spec.VolumeName)
}

// detach deletes a VolumeAttachment of the test's, recording when its
// delete began.
func (c *chaosTest) detach(va *chaosVA) {
	w := c.w
	w.mu.Lock()
	va.deleteStart = time.Now()
	w.mu.Unlock()
	if err := w.f.Kube.StorageV1().VolumeAttachments().Delete(context.Background(), va.name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatalf("detach %s: %v", va.claim, err)
	}
}

// detachAll ends every attachment (before the final runs).
func (c *chaosTest) detachAll() {
	c.w.mu.Lock()
	var live []*chaosVA
	for _, va := range c.w.g10.vas {
		if va.deleteStart.IsZero() {
			live = append(live, va)
		}
	}
	c.w.mu.Unlock()
	for _, va := range live {
		c.detach(va)
	}
}

// guardArgs are the guard's flags: the runs' scope without the special
// claims (Held claims are always at risk, which would decide every exit).
func (c *chaosTest) guardArgs() []string {
	sel := wsSel + ",workspace notin (w-held-0,w-held-1,w-term-0,w-unbound-0)"
	args := []string{"guard", "-n", c.w.ns, "-l", sel, "--workspace-label", "workspace", "--min-age", "0s", "--grace-period", "0s",
		"-o", "json", "--kubeconfig", c.p.Kubeconfig, "--log-format", "json", "--log-level", "warn", "--api-timeout", "30s"}
	if c.rng.Intn(2) == 0 {
		args = append(args, "--page-size", "10")
	}
	return args
}

// startGuard runs `janitor guard` beside the iteration's runs (a sixth of
// the iterations), after a delay of up to 4 s (so sometimes after them).
// The returned wait gives its result; nil when none was drawn.
func (c *chaosTest) startGuard() func() *chaosGuard {
	if c.rng.Intn(6) != 0 {
		return nil
	}
	g := &chaosGuard{delay: time.Duration(c.rng.Intn(4000)) * time.Millisecond}
	args := c.guardArgs()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(g.delay)
		g.start = time.Now()
		g.proc = startChaosProc(c.bin, args, 0)
		g.end = time.Now()
	}()
	return func() *chaosGuard {
		wg.Wait()
		// Guard writes no marks (docs/spec.md#rule-last-used): a use only
		// its pod lists showed is no use the janitor saw and wrote down.
		c.w.mu.Lock()
		c.w.blind[g.proc.pid] = true
		c.w.mu.Unlock()
		return g
	}
}

// judgeGuard judges one guard (G10): it sent no write at all (not even a
// Lease: it only reads, docs/spec.md#guard), it ended with 0, 3 or 1 (a
// read the faults broke), and it did not pass (exit 0) while ground truth
// had a claim in scope at risk throughout its run
// (docs/spec.md#guard-at-risk): a claim there all along with a pod that
// ran all along (InUse), or with no snapshot of its own the watch ever saw
// ready (it cannot be Rescued: Orphaned, Grace, Snapshotting,
// SnapshotFailed, Superseded or InUse, all at risk), or attached by a
// VolumeAttachment all along.
func (c *chaosTest) judgeGuard(when string, g *chaosGuard, beside bool) {
	w := c.w
	c.stats.G10.Guards++
	if beside {
		c.stats.G10.GuardsBesideRuns++
	}
	c.stats.G10.GuardExits[strconv.Itoa(g.proc.code)]++
	attempts, _ := w.oracle.peek(g.proc.pid)
	if len(attempts) > 0 {
		q := attempts[0]
		c.fail("%s: guard (pid %d) sent %d writes, the first %s %s/%s: guard writes nothing", when, g.proc.pid, len(attempts),
			strings.ToUpper(q.verb), q.resource, q.name)
	}
	if w.oracle.seen(g.proc.pid) {
		c.stats.G10.GuardRequestsSeen++
	}
	switch g.proc.code {
	case 0, 3, 1:
	default:
		c.fail("%s: guard exited %d\nstdout:\n%s\nstderr:\n%s", when, g.proc.code, g.proc.stdout, g.proc.stderr)
	}
	w.mu.Lock()
	why := ""
	names := make([]string, 0, len(w.claims))
	for name := range w.claims {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cl := w.claims[name]
		if cl.outsider || w.retired[name] || !cl.created.Before(g.start) {
			continue
		}
		if at, gone := w.deleted[name]; gone && at.Before(g.end.Add(time.Second)) {
			continue
		}
		w.req.mu.Lock()
		d, reaped := w.req.deletes[name]
		w.req.mu.Unlock()
		if reaped && d.sent.Before(g.end) {
			continue
		}
		for pod, p := range w.pods {
			if p.claim == name && p.createdDone.Before(g.start) && (p.deleteStart.IsZero() || p.deleteStart.After(g.end)) {
				why = fmt.Sprintf("%s was InUse throughout (pod %s)", name, pod)
			}
		}
		for _, va := range w.g10.vas {
			if va.claim == name && va.created.Before(g.start) && (va.deleteStart.IsZero() || va.deleteStart.After(g.end)) {
				why = fmt.Sprintf("%s was Attached throughout (%s)", name, va.name)
			}
		}
		ready := false
		for uid, s := range w.seenReady {
			if s.source == name && !w.snapErred[uid] && !s.created.Before(cl.truth.Created) {
				ready = true
			}
		}
		if !ready && why == "" {
			why = fmt.Sprintf("%s had no snapshot of its own ever ready: it cannot have been Rescued", name)
		}
		if why != "" {
			break
		}
	}
	w.mu.Unlock()
	if why != "" {
		c.stats.G10.GuardsAtRisk++
		if g.proc.code == 0 {
			c.fail("%s: guard (pid %d, %s to %s) exited 0 (nothing at risk), but %s", when, g.proc.pid,
				g.start.Format("15:04:05.000"), g.end.Format("15:04:05.000"), why)
		}
	}
}

// claimPatch is what the oracle reads of a claim's merge patch: its UID
// precondition and the notice mark it sets (a string) or removes (null).
func noticeOf(body []byte) (uid string, end time.Time, set, touched bool) {
	var p struct {
		Metadata struct {
			UID         string             `json:"uid"`
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &p) != nil {
		return "", time.Time{}, false, false
	}
	v, ok := p.Metadata.Annotations["pvc-janitor.io/reap-after"]
	if !ok {
		return p.Metadata.UID, time.Time{}, false, false
	}
	if v == nil {
		return p.Metadata.UID, time.Time{}, false, true
	}
	end, _ = time.Parse(time.RFC3339, *v)
	return p.Metadata.UID, end, true, true
}

// noticeLimits are a run's notice flags: --notice-period and --max-snooze
// (default 720h), the last of each winning.
func noticeLimits(args []string) (notice, maxSnooze time.Duration) {
	maxSnooze = 720 * time.Hour
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--notice-period":
			notice, _ = time.ParseDuration(args[i+1])
		case "--max-snooze":
			maxSnooze, _ = time.ParseDuration(args[i+1])
		}
	}
	return notice, maxSnooze
}

// judgeG10Locked judges the notice and the attachments for the runs of
// one iteration (their pids in ours, their flags args), from the proxy's
// answered writes and the claim DELETEs each run had applied (deletes).
// Called with mu held from judgeRequests.
//
//   - Notice (docs/spec.md#notice): a claim deleted by a run with
//     --notice-period has, by the DELETE, a notice in force (the last
//     reap-after the runs wrote on this claim, by its UID, was set, not
//     removed), written by another, earlier run, and the deleting run began
//     (its first request at the proxy) at or after that notice's end, or
//     the owner's snooze in force then, capped at the end plus --max-snooze.
//   - Attached (docs/spec.md#rule-attached): no run deletes or snapshots a
//     claim whose volume a VolumeAttachment held (attached: true) from
//     before the run's first request to after the write.
func (c *chaosTest) judgeG10Locked(args []string, ours map[int]chaosProc, attempts, answered []oracleRequest,
	deletes map[int]map[string]oracleRequest, bad func(string, ...any)) {
	w := c.w
	for _, q := range answered {
		if q.resource != "persistentvolumeclaims" || q.verb != "patch" || q.code/100 != 2 {
			continue
		}
		if uid, end, set, touched := noticeOf(q.body); touched && uid != "" {
			w.g10.notices[uid] = append(w.g10.notices[uid], noticeEvent{pid: q.pid, at: q.done, set: set, end: end, name: q.name})
			if set {
				c.stats.G10.NoticesWritten++
			}
		}
	}
	notice, maxSnooze := noticeLimits(args)
	for pid, ds := range deletes {
		start, _ := w.oracle.first(pid)
		read, readOK := w.oracle.firstRead(pid)
		for name, d := range ds {
			cl := w.claims[name]
			if cl == nil {
				continue
			}
			for _, va := range w.g10.vas {
				if va.claim == name && va.created.Before(start) && (va.deleteStart.IsZero() || va.deleteStart.After(d.sent)) {
					bad("run %d deleted %s (DELETE sent %s) while %s attached its volume %s (since %s, before the run began at %s)", pid, name,
						d.sent.Format("15:04:05.000"), va.name, va.pv, va.created.Format("15:04:05.000"), start.Format("15:04:05.000"))
				}
			}
			if notice <= 0 {
				continue
			}
			c.stats.G10.NoticeDeletions++
			if !readOK {
				bad("run %d deleted %s under --notice-period %s, and the proxy never saw the run read", pid, name, notice)
				continue
			}
			var last *noticeEvent
			evs := w.g10.notices[cl.uid]
			sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
			for i := range evs {
				if evs[i].at.Before(d.sent) {
					last = &evs[i]
				}
			}
			switch {
			case last == nil:
				bad("run %d deleted %s (DELETE sent %s) under --notice-period %s, and no run ever wrote it a notice", pid, name,
					d.sent.Format("15:04:05.000"), notice)
				continue
			case !last.set:
				bad("run %d deleted %s (DELETE sent %s) under --notice-period %s, and the last write of its notice (run %d at %s) removed it",
					pid, name, d.sent.Format("15:04:05.000"), notice, last.pid, last.at.Format("15:04:05.000"))
				continue
			case last.pid == pid:
				bad("run %d deleted %s (DELETE sent %s) under --notice-period %s, by the notice it wrote itself (until %s): never in the run that begins the notice",
					pid, name, d.sent.Format("15:04:05.000"), notice, last.end.Format("15:04:05"))
				continue
			}
			notBefore, by := last.end, fmt.Sprintf("the notice run %d wrote at %s", last.pid, last.at.Format("15:04:05.000"))
			var snooze *snoozeEvent
			for i, s := range w.g10.snoozes[name] {
				if s.at.Before(read) {
					snooze = &w.g10.snoozes[name][i]
				}
			}
			if snooze != nil && snooze.until.After(notBefore) {
				c.stats.G10.SnoozedDeletions++
				capped := notBefore.Add(maxSnooze)
				if snooze.until.Before(capped) {
					notBefore, by = snooze.until, "its owner's snooze-until"
				} else {
					notBefore, by = capped, fmt.Sprintf("its owner's snooze-until %s capped by --max-snooze %s", snooze.until.Format("15:04:05"), maxSnooze)
				}
			}
			if read.Before(notBefore.Add(-noticeSlack)) {
				bad("run %d, begun at %s (its first request at the proxy; its first read, a list, at %s), deleted %s (DELETE sent %s) though that read came before %s (%s): only a run begun at or after it may",
					pid, start.Format("15:04:05.000"), read.Format("15:04:05.000"), name, d.sent.Format("15:04:05.000"), notBefore.Format("15:04:05"), by)
			}
		}
	}
	// Attached claims get no rescue either: an attachment is a use.
	for _, q := range attempts {
		if _, mine := ours[q.pid]; !mine || q.resource != "volumesnapshots" || q.verb != "create" {
			continue
		}
		var vs struct {
			Spec struct {
				Source struct{ PersistentVolumeClaimName string }
			} `json:"spec"`
		}
		if json.Unmarshal(q.body, &vs) != nil {
			continue
		}
		start, _ := w.oracle.first(q.pid)
		for _, va := range w.g10.vas {
			if va.claim == vs.Spec.Source.PersistentVolumeClaimName && va.created.Before(start) && (va.deleteStart.IsZero() || va.deleteStart.After(q.at)) {
				bad("run %d created a snapshot of %s at %s while %s attached its volume (since %s): an attachment is a use", q.pid,
					va.claim, q.at.Format("15:04:05.000"), va.name, va.created.Format("15:04:05.000"))
			}
		}
	}
	for pid := range ours {
		start, ok := w.oracle.first(pid)
		for _, va := range w.g10.vas {
			if ok && va.created.Before(start) && va.deleteStart.IsZero() {
				c.stats.G10.AttachedRuns++
				break
			}
		}
	}
}
