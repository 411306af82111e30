package rescue

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func tp(t time.Time) *time.Time { return &t }

func TestDue(t *testing.T) {
	cases := []struct {
		name     string
		attempts int
		next     *time.Time
		now      time.Time
		want     bool
	}{
		{"no record", 0, nil, t0, true},
		{"attempts without a time never block", 3, nil, t0, true},
		{"a time without attempts never blocks", 0, tp(t0.Add(time.Hour)), t0, true},
		{"before next", 3, tp(t0.Add(time.Second)), t0, false},
		{"at next", 3, tp(t0), t0, true},
		{"after next", 4, tp(t0.Add(-time.Minute)), t0, true},
	}
	for _, c := range cases {
		if got := due(c.attempts, c.next, c.now); got != c.want {
			t.Errorf("%s: due = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestReadAttempts(t *testing.T) {
	got := readAttempts(map[string]string{inventory.AnnotationRescueAttempts: "4", inventory.AnnotationNextAttempt: "2026-03-04T05:06:07Z"})
	if got.Attempts != 4 || got.Next == nil || !got.Next.Equal(t0) || got.Invalid != "" {
		t.Errorf("readAttempts = %+v", got)
	}
	for _, ann := range []map[string]string{
		{inventory.AnnotationRescueAttempts: "x"},
		{inventory.AnnotationRescueAttempts: "-1"},
		{inventory.AnnotationNextAttempt: "tomorrow"},
	} {
		r := readAttempts(ann)
		if r.Invalid == "" || !due(r.Attempts, r.Next, t0) {
			t.Errorf("%v: %+v: an unreadable record must be reported and never block", ann, r)
		}
	}
}

func TestAttemptsAndBackoff(t *testing.T) {
	base := 10 * time.Minute
	cases := []struct {
		failedSoFar, perRun int
		thisRun             int
		// after this run's attempts all failed:
		runs    int
		backoff time.Duration
	}{
		{0, 3, 3, 1, 10 * time.Minute},
		{1, 3, 2, 1, 10 * time.Minute}, // a first run cut short: its attempts still make one run
		{3, 3, 1, 2, 20 * time.Minute},
		{4, 3, 1, 3, 40 * time.Minute},
		{5, 3, 1, 4, 80 * time.Minute},
		{10, 3, 1, 9, 24 * time.Hour}, // 10m·2^8 = 42h40m: capped
		{1000, 3, 1, 999, 24 * time.Hour},
		{0, 1, 1, 1, 10 * time.Minute},
		{1, 1, 1, 2, 20 * time.Minute},
		{0, 0, 1, 1, 10 * time.Minute}, // attempts below 1 mean 1
	}
	for _, c := range cases {
		n := attemptsThisRun(c.failedSoFar, c.perRun)
		if n != c.thisRun {
			t.Errorf("attemptsThisRun(%d, %d) = %d, want %d", c.failedSoFar, c.perRun, n, c.thisRun)
		}
		total := c.failedSoFar + n
		if r := failedRuns(total, c.perRun); r != c.runs {
			t.Errorf("failedRuns(%d, %d) = %d, want %d", total, c.perRun, r, c.runs)
		}
		if b := retryBackoff(failedRuns(total, c.perRun), base); b != c.backoff {
			t.Errorf("after %d failed attempts (%d per run): backoff %s, want %s", total, c.perRun, b, c.backoff)
		}
		if got, want := nextAttempt(t0, total, c.perRun, base), t0.Add(c.backoff); !got.Equal(want) {
			t.Errorf("nextAttempt = %s, want %s", got, want)
		}
	}
	if got := nextAttempt(t0.Add(300*time.Millisecond), 3, 3, base); !got.Equal(t0.Add(base + time.Second)) {
		t.Errorf("nextAttempt rounds to %s, want the next whole second %s", got, t0.Add(base+time.Second))
	}
	if retryBackoff(0, base) != 0 || retryBackoff(3, 0) != 0 {
		t.Error("no failed run, or no backoff configured, waits nothing")
	}
	if b := retryBackoff(2, 20*time.Hour); b != MaxRetryBackoff {
		t.Errorf("retryBackoff(2, 20h) = %s, want the cap", b)
	}
}

func TestClockWait(t *testing.T) {
	const skew = 2 * time.Second
	cases := []struct {
		name  string
		now   time.Time
		since time.Time
		skew  time.Duration
		wait  time.Duration
		ok    bool
	}{
		{"passed, no skew", t0, t0.Add(-time.Second), 0, 0, true},
		{"equal is not passed, no skew", t0, t0, 0, time.Second, true},
		{"passed by twice the skew", t0, t0.Add(-2*skew - time.Second), skew, 0, true},
		// docs/spec.md#rescue-after-orphaned-since: the server's clock must
		// pass orphaned-since + 2 x skew, so that a storage clock skew
		// behind still cuts at orphaned-since + skew or later.
		{"passed orphaned-since but not twice the skew", t0, t0.Add(-time.Second), skew, 4 * time.Second, true},
		{"equal waits twice the skew and a second", t0, t0, skew, 2*skew + time.Second, true},
		{"mark rounded up, one second ahead", t0, t0.Add(time.Second), skew, 2*skew + 2*time.Second, true},
		{"fractional orphaned-since", t0, t0.Add(500 * time.Millisecond), skew, 2*skew + time.Second, true},
		{"the largest skew is waited for", t0, t0, 5 * time.Minute, 10*time.Minute + time.Second, true},
		{"far ahead", t0, t0.Add(time.Hour), skew, time.Hour + 2*skew + time.Second, false},
	}
	for _, c := range cases {
		w, ok := clockWait(c.now, c.since, c.skew, 5*time.Second)
		if w != c.wait || ok != c.ok {
			t.Errorf("%s: clockWait = %s, %v; want %s, %v", c.name, w, ok, c.wait, c.ok)
		}
		if target := c.since.Add(2 * c.skew); ok && w > 0 && !c.now.Add(w).After(target) {
			t.Errorf("%s: after waiting %s the clock (%s) has not passed %s", c.name, w, c.now.Add(w), target)
		}
	}
}

// TestCutBehind: a rescue that became intact counts only when cut at or
// after orphaned-since + skew (docs/spec.md#rescue-behind-clock).
func TestCutBehind(t *testing.T) {
	const skew = 2 * time.Second
	for _, c := range []struct {
		name   string
		cut    time.Time
		skew   time.Duration
		behind bool
	}{
		{"cut at orphaned-since + skew counts", t0.Add(skew), skew, false},
		{"cut later counts", t0.Add(time.Minute), skew, false},
		{"cut within the skew does not", t0.Add(time.Second), skew, true},
		{"cut at orphaned-since does not", t0, skew, true},
		{"cut before orphaned-since does not", t0.Add(-time.Second), skew, true},
		{"no skew: the same second counts", t0, 0, false},
	} {
		why, behind := cutBehind(c.cut, t0, c.skew)
		if behind != c.behind {
			t.Errorf("%s: cutBehind = %v (%q), want %v", c.name, behind, why, c.behind)
		}
		if behind && !strings.Contains(why, "is within --clock-skew "+c.skew.String()+" of orphaned-since "+t0.Format(time.RFC3339)) {
			t.Errorf("%s: reason %q does not name the cut, the skew and orphaned-since", c.name, why)
		}
	}
}

func TestOwnFor(t *testing.T) {
	cases := []struct {
		name string
		s    inventory.Snapshot
		want bool
	}{
		{"annotated for it", inventory.Snapshot{OrphanedSince: tp(t0), CreationTimestamp: t0.Add(-time.Hour)}, true},
		{"annotated for an earlier orphaned-since", inventory.Snapshot{OrphanedSince: tp(t0.Add(-time.Hour)), CreationTimestamp: t0.Add(time.Hour)}, false},
		{"unannotated, created after", inventory.Snapshot{CreationTimestamp: t0.Add(time.Second)}, true},
		{"unannotated, created at", inventory.Snapshot{CreationTimestamp: t0}, true},
		{"unannotated, created before", inventory.Snapshot{CreationTimestamp: t0.Add(-time.Second)}, false},
	}
	for _, c := range cases {
		if got := ownFor(&c.s, t0); got != c.want {
			t.Errorf("%s: ownFor = %v, want %v", c.name, got, c.want)
		}
	}
}

func class(name, driver string, isDefault string) snapv1.VolumeSnapshotClass {
	c := snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver}
	if isDefault != "" {
		c.Annotations = map[string]string{DefaultClassAnnotation: isDefault}
	}
	return c
}

func TestChooseClass(t *testing.T) {
	csi := &inventory.PV{Name: "pv-1", CSIDriver: "hostpath.csi.k8s.io"}
	classes := []snapv1.VolumeSnapshotClass{
		class("other-default", "ebs.csi.aws.com", "true"),
		class("hostpath-plain", "hostpath.csi.k8s.io", ""),
		class("hostpath-off", "hostpath.csi.k8s.io", "false"),
		class("hostpath-default", "hostpath.csi.k8s.io", "true"),
	}
	cases := []struct {
		name       string
		configured string
		pv         *inventory.PV
		classes    []snapv1.VolumeSnapshotClass
		want       string
		wantErr    string
	}{
		{"the driver's default", "", csi, classes, "hostpath-default", ""},
		{"--snapshot-class wins", "mine", csi, classes, "mine", ""},
		{"--snapshot-class even for a non-CSI volume", "mine", &inventory.PV{Name: "nfs"}, nil, "mine", ""},
		{"no default for the driver", "", csi, classes[:3], "", "no default VolumeSnapshotClass for CSI driver hostpath.csi.k8s.io (set --snapshot-class)"},
		{"no classes at all", "", csi, nil, "", "no default VolumeSnapshotClass"},
		{"several defaults", "", csi, append(classes, class("hostpath-b", "hostpath.csi.k8s.io", "true")), "",
			"several default VolumeSnapshotClasses for CSI driver hostpath.csi.k8s.io ([hostpath-b hostpath-default]): set --snapshot-class"},
		{"non-CSI volume", "", &inventory.PV{Name: "nfs"}, classes, "", `PersistentVolume "nfs" is not a CSI volume: it cannot be snapshotted`},
		{"PV not found", "", nil, classes, "", `PersistentVolume "pv-x" of the claim was not found`},
	}
	for _, c := range cases {
		got, err := chooseClass(c.configured, c.pv, "pv-x", c.classes)
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: err %v, want %q", c.name, err, c.wantErr)
		case c.wantErr == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestClaimPatchCarriesTheUID(t *testing.T) {
	decode := func(b []byte) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m["metadata"].(map[string]any)
	}
	m := decode(claimPatch("uid-1", classify.Snapshotting, nil))
	if m["uid"] != "uid-1" || !reflect.DeepEqual(m["labels"], map[string]any{inventory.LabelPhase: "Snapshotting"}) || m["annotations"] != nil {
		t.Errorf("phase patch: %v", m)
	}
	m = decode(claimPatch("uid-1", classify.SnapshotFailed, &attemptWrite{Attempts: 4, Next: t0.In(time.FixedZone("X", 7200))}))
	if m["uid"] != "uid-1" || !reflect.DeepEqual(m["annotations"], map[string]any{
		inventory.AnnotationRescueAttempts: "4", inventory.AnnotationNextAttempt: "2026-03-04T05:06:07Z"}) {
		t.Errorf("attempt record patch: %v", m)
	}
	m = decode(claimPatch("uid-1", classify.Rescued, &attemptWrite{Clear: true}))
	if !reflect.DeepEqual(m["annotations"], map[string]any{inventory.AnnotationRescueAttempts: nil, inventory.AnnotationNextAttempt: nil}) {
		t.Errorf("a success must remove both keys (null in a merge patch): %v", m)
	}
}

func TestStillTarget(t *testing.T) {
	cl := &inventory.Claim{Name: "ws-a", UID: "u1"}
	other := &inventory.Claim{Name: "ws-a", UID: "u2"}
	dec := func(c *inventory.Claim, s classify.State) classify.Decision {
		return classify.Decision{Claim: c, State: s, Reason: "because"}
	}
	cases := []struct {
		name       string
		ds         []classify.Decision
		superseded string
		ok         bool
		reason     string
	}{
		{"orphaned", []classify.Decision{dec(cl, classify.Orphaned)}, SupersededKeep, true, ""},
		{"snapshotting", []classify.Decision{dec(cl, classify.Snapshotting)}, SupersededKeep, true, ""},
		{"snapshot failed", []classify.Decision{dec(cl, classify.SnapshotFailed)}, SupersededKeep, true, ""},
		{"used again", []classify.Decision{dec(cl, classify.InUse)}, SupersededKeep, false, "InUse: because"},
		{"rescued meanwhile", []classify.Decision{dec(cl, classify.Rescued)}, SupersededArchive, false, "Rescued: because"},
		{"rescued meanwhile by its own snapshot", []classify.Decision{{Claim: cl, State: classify.Rescued,
			Snapshot: &inventory.Snapshot{ManagedByJanitor: true, SourceUID: "u1"}}}, SupersededKeep, true, ""},
		{"rescued meanwhile by another claim's", []classify.Decision{{Claim: cl, State: classify.Rescued,
			Snapshot: &inventory.Snapshot{ManagedByJanitor: true, SourceUID: "u0"}}}, SupersededKeep, false, "Rescued"},
		{"superseded, keep", []classify.Decision{dec(cl, classify.Superseded)}, SupersededKeep, false, "Superseded: because"},
		{"superseded, discard", []classify.Decision{dec(cl, classify.Superseded)}, SupersededDiscard, false, "Superseded"},
		{"superseded, archive", []classify.Decision{dec(cl, classify.Superseded)}, SupersededArchive, true, ""},
		{"held", []classify.Decision{dec(cl, classify.Held)}, SupersededKeep, false, "Held"},
		{"back in grace", []classify.Decision{dec(cl, classify.Grace)}, SupersededKeep, false, "Grace"},
		{"recreated under its name", []classify.Decision{dec(other, classify.Orphaned)}, SupersededKeep, false, "gone or was replaced"},
		{"gone", nil, SupersededKeep, false, "gone or was replaced"},
	}
	for _, c := range cases {
		d, ok, why := stillTarget(c.ds, cl.UID, c.superseded)
		if ok != c.ok || !strings.Contains(why, c.reason) || (ok && d.Claim.UID != cl.UID) {
			t.Errorf("%s: ok %v %q, want %v %q", c.name, ok, why, c.ok, c.reason)
		}
	}
}

// TestRecheckDecision runs the pre-create re-check's decision on inventories
// built as the re-check builds them (kube.RecheckInventory): the claim is
// re-classified with classify.Classify on the re-check's read of its namespace.
func TestRecheckDecision(t *testing.T) {
	const ns, wsLabel = "ws", "workspace"
	now := t0
	claim := func(name, uid string, created time.Time) inventory.Claim {
		return inventory.Claim{Namespace: ns, Name: name, UID: types.UID(uid), CreationTimestamp: created, Phase: "Bound",
			VolumeName: "pv-" + name, Labels: inventory.ClaimLabels{Workspace: "w"},
			Annotations: map[string]string{inventory.AnnotationOrphanedSince: now.Add(-time.Hour).Format(time.RFC3339)}}
	}
	a := claim("ws-a", "ua", now.Add(-2*time.Hour))
	base := &inventory.Inventory{
		Claims:    []inventory.Claim{a},
		Referrers: map[inventory.Key][]inventory.Referrer{},
		PVs:       map[string]inventory.PV{"pv-ws-a": {Name: "pv-ws-a", CSIDriver: "d"}},
		Contents:  map[string]inventory.Content{},
	}
	// A newer claim of the workspace supersedes under --sessions-carry-data
	// (by descent, only a claim created from an older snapshot of it does).
	policy := classify.Policy{WorkspaceLabel: wsLabel, MinAge: time.Minute, GracePeriod: 30 * time.Minute, SessionsCarryData: true}
	cases := []struct {
		name       string
		read       kube.NamespaceRead
		superseded string
		ok         bool
		state      classify.State
	}{
		{"unchanged", kube.NamespaceRead{Namespace: ns, Claims: []inventory.Claim{a}}, SupersededKeep, true, classify.Orphaned},
		{"a pod uses it again", kube.NamespaceRead{Namespace: ns, Claims: []inventory.Claim{a},
			PodRefs: map[string][]inventory.Referrer{"ws-a": {{Kind: "Pod", Namespace: ns, Name: "ide", Detail: "volume data"}}}},
			SupersededKeep, false, classify.InUse},
		{"a pod of another claim", kube.NamespaceRead{Namespace: ns, Claims: []inventory.Claim{a},
			PodRefs: map[string][]inventory.Referrer{"ws-b": {{Kind: "Pod", Namespace: ns, Name: "ide"}}}},
			SupersededKeep, true, classify.Orphaned},
		{"a newer claim of its workspace appeared", kube.NamespaceRead{Namespace: ns,
			Claims: []inventory.Claim{a, claim("ws-a2", "ua2", now.Add(-time.Minute))}},
			SupersededKeep, false, classify.Superseded},
		{"the same under archive", kube.NamespaceRead{Namespace: ns,
			Claims: []inventory.Claim{a, claim("ws-a2", "ua2", now.Add(-time.Minute))}},
			SupersededArchive, true, classify.Superseded},
		{"recreated under its name", kube.NamespaceRead{Namespace: ns,
			Claims: []inventory.Claim{claim("ws-a", "ua-new", now.Add(-2*time.Hour))}},
			SupersededKeep, false, ""},
		{"gone", kube.NamespaceRead{Namespace: ns}, SupersededKeep, false, ""},
	}
	for _, c := range cases {
		inv := kube.RecheckInventory(base, &c.read, "ws-a", nil)
		d, ok, why := stillTarget(classify.Classify(inv, policy, now), a.UID, c.superseded)
		if ok != c.ok {
			t.Errorf("%s: ok %v (%s), want %v", c.name, ok, why, c.ok)
			continue
		}
		if c.state != "" && (d == nil || d.State != c.state) {
			t.Errorf("%s: decision %+v, want state %s", c.name, d, c.state)
		}
	}
}
