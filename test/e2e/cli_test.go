//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var env *testenv.Cluster

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m, &env)) }

// run executes one janitor command line against the local cluster, with an
// empty environment so the developer's JANITOR_* variables cannot leak in.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runWith(append(args, "--kubeconfig", env.Kubeconfig, "--log-format", "json"), &out, &errOut)
	return code, out.String(), errOut.String()
}

// runWith runs a command line as given (the last --kubeconfig wins).
func runWith(args []string, out, errOut io.Writer) int {
	return cli.Run(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: out, ErrOut: errOut,
		LookupEnv: func(string) (string, bool) { return "", false }})
}

type report struct {
	Kind, APIVersion, Command, Cluster string
	DryRun                             bool
	Summary                            struct {
		Claims          int
		States          map[string]int
		SnapshotsPruned int
		LeakedContents  int
		Rescues         *struct {
			Count int
			Bytes int64
			ByAge map[string]int
		}
	}
	Claims []struct {
		Namespace, Name, UID, Workspace, State, Reason, VolumeName, OrphanedSince, Action string
		ReapAfter, Notice                                                                 string
		LeakedContents                                                                    []string
		Snapshot                                                                          *struct {
			Name       string
			ReadyToUse bool
			Error      string
		}
	}
	UnusedCondition string
	Snapshots       []struct {
		Namespace, Name, SourceClaim, SourceUID, Action, Reason, DeletionPolicy string
		ReadyToUse                                                              bool
		DataTime                                                                *time.Time
	}
}

func parse(t *testing.T, s string) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, s)
	}
	return r
}

func demoArgs(cmd, ns string) []string {
	return []string{cmd, "-n", ns, "-l", testenv.DemoSelector, "--workspace-label", testenv.DemoWorkspaceLabel,
		"--min-age", testenv.DemoMinAge.String(), "--grace-period", testenv.DemoGracePeriod.String(), "--lock-namespace", ns}
}

// TestScanClassifiesAndMarksTheDemoFleet is docs/spec.md#states end to end: every state
// on real objects, then the marks on the claims.
func TestScanClassifiesAndMarksTheDemoFleet(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	want, err := testenv.SeedDemo(ctx, f, ns, env.DriverStateDir)
	if err != nil {
		t.Fatal(err)
	}

	// A dry run first: the report, and nothing written.
	code, out, stderr := run(t, append(demoArgs("scan", ns), "--dry-run", "-o", "json")...)
	if code != 0 {
		t.Fatalf("scan --dry-run exit %d: %s", code, stderr)
	}
	r := parse(t, out)
	if !r.DryRun || r.Kind != "Report" || r.APIVersion != "pvc-janitor.io/v1" || r.Command != "scan" {
		t.Fatalf("report header: %+v", r)
	}
	got := map[string]string{}
	for _, c := range r.Claims {
		got[c.Name] = c.State
		if c.Namespace != ns || c.UID == "" {
			t.Errorf("claim %s: namespace %q uid %q", c.Name, c.Namespace, c.UID)
		}
	}
	for name, state := range want {
		if got[name] != state {
			t.Errorf("claim %s: state %q, want %q", name, got[name], state)
		}
	}
	if len(got) != len(want) {
		t.Errorf("report has %d claims, want %d", len(got), len(want))
	}
	states := map[string]bool{}
	for _, s := range want {
		states[s] = true
	}
	if len(states) != 12 {
		t.Errorf("the demo fleet covers %d states, want all 12", len(states))
	}
	claims, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		for k := range c.Annotations {
			if strings.HasPrefix(k, "pvc-janitor.io/orphaned") {
				t.Errorf("dry run marked %s", c.Name)
			}
		}
	}

	// Field by field, for a few representative claims.
	for _, c := range r.Claims {
		switch c.Name {
		case "ws-judy":
			if c.Workspace != "judy" || c.VolumeName != "pv-"+ns+"-ws-judy" || c.OrphanedSince == "" ||
				c.Snapshot == nil || c.Snapshot.Name != "ws-judy-backup" || !c.Snapshot.ReadyToUse || c.Snapshot.Error != "" ||
				!strings.Contains(c.Reason, "ws-judy-backup") || c.Action != "would-mark" {
				t.Errorf("ws-judy entry: %+v snapshot %+v", c, c.Snapshot)
			}
		case "ws-mallory":
			if c.Snapshot == nil || c.Snapshot.ReadyToUse || !strings.Contains(c.Snapshot.Error, "volume is corrupted") {
				t.Errorf("ws-mallory entry: %+v snapshot %+v", c, c.Snapshot)
			}
		case "ws-bob":
			if c.OrphanedSince != "" || c.Snapshot != nil || c.Action != "" || !strings.Contains(c.Reason, "Pod "+ns+"/ide-bob") {
				t.Errorf("ws-bob entry: %+v", c)
			}
		case "ws-alice-monday":
			if !strings.Contains(c.Reason, "ws-alice-tuesday") {
				t.Errorf("ws-alice-monday reason %q does not name the newer claim", c.Reason)
			}
		}
	}
	if r.Summary.Claims != len(want) || r.Summary.States["InUse"] != 5 || r.Summary.States["Orphaned"] != 3 {
		t.Errorf("summary %+v", r.Summary)
	}

	// The real scan marks.
	code, out, stderr = run(t, append(demoArgs("scan", ns), "-o", "json")...)
	if code != 0 {
		t.Fatalf("scan exit %d: %s", code, stderr)
	}
	r = parse(t, out)
	byName := map[string]corev1.PersistentVolumeClaim{}
	claims, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		byName[c.Name] = c
	}
	orphanStates := map[string]bool{"Rescued": true, "Superseded": true, "SnapshotFailed": true, "Snapshotting": true, "Grace": true, "Orphaned": true}
	for name, state := range want {
		c := byName[name]
		mark, marked := c.Annotations["pvc-janitor.io/orphaned-since"]
		phase := c.Labels["pvc-janitor.io/phase"]
		switch {
		case orphanStates[state]:
			if !marked {
				t.Errorf("%s (%s) has no orphaned-since mark", name, state)
			} else if ts, err := time.Parse(time.RFC3339, mark); err != nil || time.Since(ts) > time.Minute || time.Until(ts) > 5*time.Second {
				t.Errorf("%s: orphaned-since %q is not a recent server time", name, mark)
			}
			if phase != state {
				t.Errorf("%s: phase label %q, want %q", name, phase, state)
			}
		case state == "Attached":
			if phase != "Attached" || marked {
				t.Errorf("%s: phase %q marked %v, want Attached and no orphaned-since", name, phase, marked)
			}
		case state == "Terminating":
			// never patched
		default:
			if marked || phase != "" {
				t.Errorf("%s (%s) is marked: orphaned-since %v phase %q", name, state, marked, phase)
			}
		}
	}
	events, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OrphanDetected"})
	if err != nil {
		t.Fatal(err)
	}
	wantEvents := 0
	for _, state := range want {
		if orphanStates[state] {
			wantEvents++
		}
	}
	if len(events.Items) != wantEvents {
		var names []string
		for _, e := range events.Items {
			names = append(names, e.InvolvedObject.Name)
		}
		t.Errorf("OrphanDetected events for %v, want one per orphaned claim (%d)", names, wantEvents)
	}

	// A second scan changes nothing and writes no new events.
	if code, _, stderr = run(t, append(demoArgs("scan", ns), "-o", "json")...); code != 0 {
		t.Fatalf("second scan exit %d: %s", code, stderr)
	}
	again, err := f.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=OrphanDetected"})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Items) != len(events.Items) {
		t.Errorf("second scan wrote %d new OrphanDetected events", len(again.Items)-len(events.Items))
	}

	// In use again: the marks go.
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "olivia-back", Claims: []string{"ws-olivia"}}); err != nil {
		t.Fatal(err)
	}
	// Let the controller manager's Unused=False update land first: a patch
	// racing it is skipped for the next run (resourceVersion precondition).
	waitUsed(t, f, ns, "ws-olivia")
	if code, _, stderr = run(t, append(demoArgs("scan", ns), "-o", "json")...); code != 0 {
		t.Fatalf("third scan exit %d: %s", code, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-olivia", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok || c.Labels["pvc-janitor.io/phase"] != "" {
		t.Errorf("marks of a claim in use again were not cleared: %v %v", c.Annotations, c.Labels)
	}

	// guard: the fleet has data at risk, listed first.
	code, out, _ = run(t, append(demoArgs("guard", ns), "-o", "json")...)
	if code != 3 {
		t.Fatalf("guard exit %d, want 3", code)
	}
	g := parse(t, out)
	seenSafe := false
	for _, c := range g.Claims {
		risky := c.Action == "at-risk"
		if risky && seenSafe {
			t.Errorf("at-risk claim %s listed after a safe one", c.Name)
		}
		seenSafe = seenSafe || !risky
		wantRisk := map[string]bool{"InUse": true, "Young": true, "Held": true, "Grace": true, "Orphaned": true, "Snapshotting": true,
			"SnapshotFailed": true, "Attached": true, "Superseded": true}[c.State]
		if risky != wantRisk {
			t.Errorf("guard: %s (%s) at-risk=%v", c.Name, c.State, risky)
		}
	}
}

// TestGuardPassesOnlyWhenNothingIsLost is the gate of docs/spec.md#guard: live data, a
// rescue a teardown can delete, and a scope that is suspiciously small each
// fail it; it passes once nothing in scope would be lost.
func TestGuardPassesOnlyWhenNothingIsLost(t *testing.T) {
	ctx := context.Background()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	lbl := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces"}
	for _, n := range []string{"used", "kept", "risky"} {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: n, Labels: lbl}); err != nil {
			t.Fatal(err)
		}
	}
	// A claim out of scope (no workspace label) with a rescue of the
	// janitor's: while the claim exists, the rescue is not its only copy.
	reaped, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "reaped"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "reaped-rescue", "reaped", testenv.SnapshotClassDelete,
		map[string]string{"app.kubernetes.io/managed-by": "pvc-janitor"},
		map[string]string{"pvc-janitor.io/source-uid": string(reaped.UID), "pvc-janitor.io/source-name": "reaped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "p", Claims: []string{"used"}}); err != nil {
		t.Fatal(err)
	}
	sel := []string{"-n", ns, "-l", "app.kubernetes.io/part-of=demo-workspaces", "--min-age", "0s", "--grace-period", "0s"}
	// Mark the orphans (on any cluster, with or without the Unused
	// condition), then rescue them once the server's clock (this host's)
	// has passed the marks, so that the snapshots are cut after them.
	// A mark patch that races the controller manager's own update of the
	// claim is left for the next scan (resourceVersion precondition).
	if _, err := f.WaitOrphanedSince(ctx, ns, "kept", "risky"); err != nil {
		t.Fatal(err)
	}
	marked := func(c *corev1.PersistentVolumeClaim) bool {
		return c.Annotations["pvc-janitor.io/orphaned-since"] != ""
	}
	for i := 0; i < 5; i++ {
		if code, _, stderr := run(t, append([]string{"scan", "--lock-namespace", ns}, sel...)...); code != 0 {
			t.Fatalf("scan: exit %d: %s", code, stderr)
		}
		k, err1 := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "kept", metav1.GetOptions{})
		r, err2 := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "risky", metav1.GetOptions{})
		if err1 == nil && err2 == nil && marked(k) && marked(r) {
			break
		}
	}
	var marks []time.Time
	for _, n := range []string{"kept", "risky"} {
		c, err := f.WaitClaim(ctx, ns, n, marked)
		if err != nil {
			t.Fatal(err)
		}
		m, err := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"])
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, m)
	}
	for _, m := range marks {
		// Past the mark by --clock-skew: only a snapshot cut that long
		// after it counts as the rescue (docs/spec.md#rule-clock-skew).
		for deadline := time.Now().Add(10 * time.Second); !time.Now().After(m.Add(defaultClockSkew)); {
			if time.Now().After(deadline) {
				t.Fatalf("the clock did not pass the mark %s", m)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, err := f.Snapshot(ctx, ns, "kept-snap", "kept", testenv.SnapshotClassRetain, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Snapshot(ctx, ns, "risky-snap", "risky", testenv.SnapshotClassDelete, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"kept-snap", "risky-snap"} {
		if _, err := f.WaitSnapshot(ctx, ns, n, 30*time.Second, testenv.Ready); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append([]string{"guard"}, sel...), "-o", "json")
	risky := func(out string) map[string]string {
		t.Helper()
		got := map[string]string{}
		for _, c := range parse(t, out).Claims {
			if c.Action == "at-risk" {
				got[c.Name] = c.Reason
			}
		}
		return got
	}
	code, out, stderr := run(t, args...)
	if code != 3 {
		t.Fatalf("guard with a claim in use and a Delete-policy rescue: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	got := risky(out)
	if len(got) != 2 || !strings.Contains(got["used"], "in use") || !strings.Contains(got["risky"], "deletionPolicy Delete") {
		t.Errorf("at-risk claims = %v, want used (in use) and risky (deletionPolicy Delete)", got)
	}
	// --allow-delete-policy accepts the Delete rescue, never live data.
	code, out, stderr = run(t, append(args, "--allow-delete-policy")...)
	if code != 3 {
		t.Fatalf("guard --allow-delete-policy with a claim in use: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	if got := risky(out); len(got) != 1 || got["used"] == "" {
		t.Errorf("at-risk claims = %v, want only used", got)
	}
	// The workspace stops for good: its pod and its claim are deleted.
	if err := f.ForceDeletePod(ctx, ns, "p"); err != nil {
		t.Fatal(err)
	}
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "used", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitClaimGone(ctx, ns, "used"); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = run(t, append(args, "--allow-delete-policy")...)
	if code != 0 {
		t.Fatalf("guard --allow-delete-policy: exit %d, want 0\n%s\n%s", code, out, stderr)
	}
	// Once its claim is gone, the janitor's rescue is the only copy: a
	// Delete policy fails the gate (path 4), listed under snapshots.
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "reaped", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted, not necessarily gone: the snapshot controller may hold its
	// pvc-as-source-protection finalizer for a while. A claim being
	// deleted no longer protects its data either.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "reaped", metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && c.DeletionTimestamp != nil) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim reaped is not being deleted: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	code, out, stderr = run(t, args...)
	if code != 3 {
		t.Fatalf("guard with the only copy of a reaped claim under deletionPolicy Delete: exit %d, want 3\n%s\n%s", code, out, stderr)
	}
	if r := parse(t, out); len(r.Snapshots) != 1 || r.Snapshots[0].Name != "reaped-rescue" || r.Snapshots[0].Action != "at-risk" ||
		!strings.Contains(r.Snapshots[0].Reason, "the only copy of claim reaped") {
		t.Errorf("snapshots = %+v, want reaped-rescue at risk as the only copy", r.Snapshots)
	}
	code, out, stderr = run(t, append(args, "--allow-delete-policy")...)
	if code != 0 {
		t.Fatalf("guard --allow-delete-policy after the reap: exit %d, want 0\n%s\n%s", code, out, stderr)
	}
	// A scope smaller than --min-claims fails the gate, as does an empty one.
	code, out, stderr = run(t, append(args, "--allow-delete-policy", "--min-claims", "3")...)
	if code != 3 || !strings.Contains(stderr, "fewer than --min-claims 3") {
		t.Errorf("guard --min-claims 3 with 2 claims: exit %d, want 3 naming --min-claims\n%s\n%s", code, out, stderr)
	}
	// An empty scope fails the gate by default (--min-claims 1, issue 23),
	// and passes only when asked to with --min-claims 0.
	code, _, stderr = run(t, "guard", "-n", ns, "-l", "app.kubernetes.io/part-of=typo", "-o", "json")
	if code != 3 || !strings.Contains(stderr, "0 claims in scope, fewer than --min-claims 1") {
		t.Errorf("guard on an empty scope by default: exit %d, want 3\n%s", code, stderr)
	}
	// (--allow-delete-policy: the namespace still holds reaped's only copy,
	// under deletionPolicy Delete, whatever the selector.)
	code, _, stderr = run(t, "guard", "-n", ns, "-l", "app.kubernetes.io/part-of=typo", "--min-claims", "0", "--allow-delete-policy", "-o", "json")
	if code != 0 {
		t.Errorf("guard on an empty scope with --min-claims 0: exit %d, want 0\n%s", code, stderr)
	}
}

func TestBadInputExitsTwoAndWritesNothing(t *testing.T) {
	for _, args := range [][]string{
		{"scan", "--min-age", "10x"},
		{"scan", "-A", "-n", "x"},
		{"scan", "-l", "a in (b"},
		{"scan", "-o", "xml"},
		{"frobnicate"},
		{"scan", "--no-such-flag"},
		{"scan", "extra-arg"},
	} {
		code, out, stderr := run(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
		if out != "" {
			t.Errorf("%v: printed a report on a usage error: %q", args, out)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 0 || !strings.HasPrefix(stderr, "error: ") {
			t.Errorf("%v: want one error line, got %q", args, stderr)
		}
	}
	code, _, stderr := run(t, "scan", "--context", "nope")
	if code != 2 || !strings.Contains(stderr, "nope") {
		t.Errorf("unknown context: exit %d, %q", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "janitor ") || !strings.Contains(out, "commit") {
		t.Fatalf("version: %d %q", code, out)
	}
}

// TestExampleConfigLoads keeps examples/config.yaml valid.
func TestExampleConfigLoads(t *testing.T) {
	code, out, stderr := run(t, "scan", "--config", "../../examples/config.yaml", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if r := parse(t, out); !r.DryRun || r.Command != "scan" {
		t.Fatalf("report %+v", r)
	}
}

func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := run(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "janitor") {
			t.Errorf("completion %s: exit %d, %d bytes, %s", sh, code, len(out), stderr)
		}
	}
}

// fixtures returns the local cluster's fixtures; an error fails the test
// here rather than as a nil pointer later.
func fixtures(t testing.TB) *testenv.Fixtures {
	t.Helper()
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	return f
}
