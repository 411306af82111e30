//go:build integration

package cli_test

// Issue 38's returning user and workspace with two claims on the local
// control plane (docs/spec.md#rule-descent, docs/spec.md#retention-last-copy):
// a copy holds another's data only when it descends from it. A claim the
// platform creates empty holds nothing older, whatever its name, workspace
// and age, so prune keeps the only rescue of the data it replaced; a claim
// created from a rescue through spec.dataSource holds that rescue's data,
// so the rescue may go. Each test judges by the bytes in the volumes too.

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// hubSel selects the claims JupyterHub's KubeSpawner makes for its users'
// home directories (component=singleuser-storage).
const hubSel = "component=singleuser-storage"

// hubLabels are the labels KubeSpawner puts on user's claim claim-<user>.
func hubLabels(user string) map[string]string {
	return map[string]string{"app": "jupyterhub", "component": "singleuser-storage", "heritage": "jupyterhub",
		"hub.jupyter.org/username": user}
}

// hubArgs is a janitor command line for a hub's namespace as a new user
// would configure it: KubeSpawner's selector, no --workspace-label (each
// claim is its own workspace).
func hubArgs(cmd, ns string, extra ...string) []string {
	return append([]string{cmd, "-n", ns, "-l", hubSel, "--min-age", "0s", "--grace-period", "0s", "-o", "json",
		"--lock-namespace", ns}, extra...)
}

// runArgsUntilGone runs args (a `run --yes`) until the claim is gone:
// a run may leave it to the next one while its rescue gets ready, or the
// claim changed since it was read (runUntilGone, for any selector).
func runArgsUntilGone(t *testing.T, f *testenv.Fixtures, ns, name string, args []string) {
	t.Helper()
	for i := 0; i < 4; i++ {
		if code, out, stderr := run(t, args...); code != 0 {
			t.Fatalf("run exit %d: %s\n%s", code, out, stderr)
		}
		if !exists(t, f, ns, name) {
			if err := f.WaitClaimGone(context.Background(), ns, name); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s not reaped by four runs", name)
}

// provisionedClaims creates claims of the provisioned class (empty, as a
// platform's dynamic provisioning makes them) and waits until each is
// Bound. from maps a claim to the VolumeSnapshot its spec.dataSource names
// (the volume is restored from it).
func provisionedClaims(t *testing.T, f *testenv.Fixtures, ns string, labels map[string]string, from map[string]string, names ...string) []*corev1.PersistentVolumeClaim {
	t.Helper()
	ctx := context.Background()
	sc, group := testenv.ProvisionedStorageClassName, "snapshot.storage.k8s.io"
	for _, name := range names {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if snap := from[name]; snap != "" {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: snap}
		}
		if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*corev1.PersistentVolumeClaim, len(names))
	for i, name := range names {
		c, err := f.WaitClaim(ctx, ns, name, func(c *corev1.PersistentVolumeClaim) bool { return c.Status.Phase == corev1.ClaimBound })
		if err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

// deleteClaims deletes claims and waits until they are gone.
func deleteClaims(t *testing.T, f *testenv.Fixtures, ns string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		if err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		if err := f.WaitClaimGone(ctx, ns, name); err != nil {
			t.Fatal(err)
		}
	}
}

// write writes a file into a claim's volume, as the user's pod would.
func write(t *testing.T, f *testenv.Fixtures, ns, claim, path, data string) {
	t.Helper()
	if err := f.WriteVolume(context.Background(), ns, claim, path, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// holds fails unless the claim's volume holds data at path.
func holds(t *testing.T, f *testenv.Fixtures, ns, claim, path, data string) {
	t.Helper()
	got, err := f.ReadVolume(context.Background(), ns, claim, path)
	if err != nil || string(got) != data {
		t.Fatalf("%s's %s: %q (%v), want %q", claim, path, got, err, data)
	}
}

// lacks fails unless the claim's volume has no file at path: it was
// created empty.
func lacks(t *testing.T, f *testenv.Fixtures, ns, claim, path string) {
	t.Helper()
	got, err := f.ReadVolume(context.Background(), ns, claim, path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("setup: %s holds %s (%q, %v): it must be empty", claim, path, got, err)
	}
}

// pruneReport runs a prune, which must exit 0 (or 4: some kept), and
// returns its report.
func pruneReport(t *testing.T, args []string) report {
	t.Helper()
	code, out, stderr := run(t, args...)
	if code != 0 && code != 4 {
		t.Fatalf("%v: exit %d: %s\n%s", args, code, out, stderr)
	}
	return parse(t, out)
}

// snapEntry is the action and reason of snapshot name in a prune's report.
func snapEntry(t *testing.T, r report, name string) (action, reason string) {
	t.Helper()
	for _, s := range r.Snapshots {
		if s.Name == name {
			return s.Action, s.Reason
		}
	}
	t.Fatalf("snapshot %s not in the report", name)
	return "", ""
}

// oneRescue is the janitor's only snapshot of claim name, of the claim
// with uid.
func oneRescue(t *testing.T, f *testenv.Fixtures, ns, name string, uid string) string {
	t.Helper()
	s := snapshotsOf(t, f, ns, name)
	if len(s) != 1 {
		t.Fatalf("rescues of %s: %v, want one", name, s)
	}
	vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(context.Background(), s[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := vs.Annotations["pvc-janitor.io/source-uid"]; got != uid {
		t.Fatalf("rescue %s of %s records source-uid %q, want %s", s[0], name, got, uid)
	}
	return s[0]
}

// snapshotGone reports whether the snapshot is deleted or being deleted.
func snapshotGone(t *testing.T, f *testenv.Fixtures, ns, name string) bool {
	t.Helper()
	for _, s := range snapshots(t, f, ns) {
		if s.Name == name {
			return s.DeletionTimestamp != nil
		}
	}
	return true
}

// TestDescentReturningUserKeepsTheOnlyRescue is issue 38's returning user
// (finding A and "returning users"): JupyterHub's KubeSpawner names a
// user's claim claim-<user>, and the janitor runs without a workspace
// label. alice's claim-alice is orphaned, rescued (R1) and reaped. alice
// comes back: KubeSpawner creates claim-alice again, empty, and her
// server's pod mounts it. A claim of the same name, newer and in use,
// holds nothing of R1 (docs/spec.md#rule-descent): `prune --keep-for 1s`
// keeps R1 as the only copy, with or without --sessions-carry-data (that
// statement is about named workspaces, never a claim's own). Once
// claim-alice is created from R1 instead (spec.dataSource) and in use, it
// holds R1's data, and prune may delete R1, naming the claim.
func TestDescentReturningUserKeepsTheOnlyRescue(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	const nb, nbData = "work/analysis.ipynb", "alice's notebook"

	// Session 1: alice's files; her server stops and the claim is left.
	first := provisionedClaims(t, f, ns, hubLabels("alice"), nil, "claim-alice")[0]
	write(t, f, ns, "claim-alice", nb, nbData)
	idle(t, f, ns, "claim-alice")
	nextSecond(time.Now())
	runArgsUntilGone(t, f, ns, "claim-alice", hubArgs("run", ns, "--yes", "--max-deletion-percent", "100"))
	r1 := oneRescue(t, f, ns, "claim-alice", string(first.UID))

	// alice returns: KubeSpawner creates claim-alice again, empty, and
	// her server's pod mounts it.
	second := provisionedClaims(t, f, ns, hubLabels("alice"), nil, "claim-alice")[0]
	if second.UID == first.UID {
		t.Fatal("setup: the new claim-alice has the old one's UID")
	}
	lacks(t, f, ns, "claim-alice", nb)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "jupyter-alice", Claims: []string{"claim-alice"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now()) // R1 was cut more than --keep-for 1s ago
	prune := hubArgs("prune", ns, "--keep-for", "1s", "--delete-contents", "--max-deletion-percent", "100")
	prune = prune[:len(prune):len(prune)] // each append below gets its own copy

	// The operator's statement changes nothing here: without a workspace
	// label each claim is its own workspace (docs/spec.md#rule-sessions-carry-data).
	if act, why := snapEntry(t, pruneReport(t, append(prune, "--dry-run", "--sessions-carry-data")), r1); act != "kept" || !strings.Contains(why, "the only copy") {
		t.Errorf("prune --dry-run --sessions-carry-data without a workspace label: R1 %s %s (%s), want kept as the only copy", r1, act, why)
	}
	if act, why := snapEntry(t, pruneReport(t, append(prune, "--yes")), r1); act != "kept" || !strings.Contains(why, "the only copy") {
		t.Errorf("prune --keep-for 1s beside the new, empty claim-alice in use: R1 %s %s (%s), want kept as the only copy", r1, act, why)
	}
	if snapshotGone(t, f, ns, r1) {
		t.Fatalf("R1 %s, the only copy of alice's notebook, is gone after prune", r1)
	}

	// The hub's admin brings alice's files back: the empty claim goes and
	// claim-alice is created from R1 (spec.dataSource); her pod mounts it.
	if err := f.ForceDeletePod(ctx, ns, "jupyter-alice"); err != nil {
		t.Fatal(err)
	}
	deleteClaims(t, f, ns, "claim-alice")
	provisionedClaims(t, f, ns, hubLabels("alice"), map[string]string{"claim-alice": r1}, "claim-alice")
	holds(t, f, ns, "claim-alice", nb, nbData)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "jupyter-alice", Claims: []string{"claim-alice"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	act, why := snapEntry(t, pruneReport(t, append(prune, "--yes")), r1)
	if act != "pruned" || !strings.Contains(why, "its data is also in claim claim-alice") {
		t.Errorf("prune beside claim-alice created from R1 and in use: R1 %s %s (%s), want pruned, its data also in claim claim-alice", r1, act, why)
	}
	if !snapshotGone(t, f, ns, r1) {
		t.Errorf("R1 %s is still there after prune said %s", r1, act)
	}
	holds(t, f, ns, "claim-alice", nb, nbData)
}

// sameSecondSession creates the claims of one session of a workspace the
// way a platform does at session start, within one second of the API's
// clock (neither is newer: neither supersedes the other,
// docs/spec.md#rule-superseded), and a pod that mounts them all. It tries
// three times; a try whose claims land in two seconds is deleted.
func sameSecondSession(t *testing.T, f *testenv.Fixtures, ns, pod string, labels map[string]string, names ...string) []*corev1.PersistentVolumeClaim {
	t.Helper()
	for try := 1; ; try++ {
		nextSecond(time.Now())
		cs := provisionedClaims(t, f, ns, labels, nil, names...)
		same := true
		for _, c := range cs[1:] {
			same = same && c.CreationTimestamp.Equal(&cs[0].CreationTimestamp)
		}
		if same {
			if _, err := f.Pod(context.Background(), testenv.PodSpec{Namespace: ns, Name: pod, Claims: names, Scheduled: true}); err != nil {
				t.Fatal(err)
			}
			return cs
		}
		if try == 3 {
			t.Fatalf("setup: the claims %v were created in different seconds three times", names)
		}
		t.Logf("try %d: the claims %v were created in different seconds; again", try, names)
		deleteClaims(t, f, ns, names...)
	}
}

// endSession deletes the session's pod and waits until the claims are
// idle with one orphaned-since: the same last use, so that neither
// claim's rescue is newer data than the other's (docs/spec.md#rule-superseded).
// Where the controller manager dates the end of the use (the Unused
// condition), the two dates can fall in two seconds: then the pod comes
// back and goes again, three tries at most. Without the condition the
// janitor's run marks both at its own time.
func endSession(t *testing.T, f *testenv.Fixtures, ns, pod string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for try := 1; ; try++ {
		if f.UnusedCondition {
			for _, n := range names {
				waitUsed(t, f, ns, n)
			}
		}
		nextSecond(time.Now())
		if err := f.ForceDeletePod(ctx, ns, pod); err != nil {
			t.Fatal(err)
		}
		if !f.UnusedCondition {
			return
		}
		same := true
		for _, n := range names {
			if _, err := f.WaitUnused(ctx, ns, n); err != nil {
				t.Fatal(err)
			}
			same = same && unusedSince(t, f, ns, n).Equal(unusedSince(t, f, ns, names[0]))
		}
		if same {
			return
		}
		if try == 3 {
			t.Fatalf("setup: the controller manager dated the end of %v's use in different seconds three times", names)
		}
		t.Logf("try %d: the ends of use of %v fell in different seconds; again", try, names)
		if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: pod, Claims: names, Scheduled: true}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDescentNextSessionKeepsTheRescueOfAClaimCreatedEmpty is issue 38's
// workspace with two claims, under --workspace-label: alice's session 1
// has a home and a data claim, both rescued (Rh, Rd) and reaped. Session 2
// restores home from Rh through spec.dataSource and starts data empty.
// alice-data-2 is newer, of the same workspace and in use, but it descends
// from nothing: it holds none of Rd's data (docs/spec.md#rule-descent), so
// `prune --keep-for 1s` keeps Rd as the only copy, while Rh, whose data
// alice-home-2 holds, may go. Under --sessions-carry-data (the operator
// states that the platform carries a workspace's data into each new
// session) the newer session would hold Rd too: a dry run says it would
// prune it.
func TestDescentNextSessionKeepsTheRescueOfAClaimCreatedEmpty(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	const homeFile, homeData, dataFile, dataData = "notes.md", "alice's notes", "set.csv", "alice's dataset"
	labels := wsLabels("alice")

	// Session 1: home and data, written, then the session ends.
	s1 := sameSecondSession(t, f, ns, "ide-alice-1", labels, "alice-home-1", "alice-data-1")
	write(t, f, ns, "alice-home-1", homeFile, homeData)
	write(t, f, ns, "alice-data-1", dataFile, dataData)
	endSession(t, f, ns, "ide-alice-1", "alice-home-1", "alice-data-1")
	nextSecond(time.Now())
	runUntilGone(t, f, ns, "alice-home-1")
	runUntilGone(t, f, ns, "alice-data-1")
	rh := oneRescue(t, f, ns, "alice-home-1", string(s1[0].UID))
	rd := oneRescue(t, f, ns, "alice-data-1", string(s1[1].UID))

	// Session 2: home from its rescue, data empty; one pod mounts both.
	provisionedClaims(t, f, ns, labels, map[string]string{"alice-home-2": rh}, "alice-home-2", "alice-data-2")
	holds(t, f, ns, "alice-home-2", homeFile, homeData)
	lacks(t, f, ns, "alice-data-2", dataFile)
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-alice-2", Claims: []string{"alice-home-2", "alice-data-2"}, Scheduled: true}); err != nil {
		t.Fatal(err)
	}
	nextSecond(time.Now()) // both rescues were cut more than --keep-for 1s ago
	prune := append(reapArgs("prune", ns), "--keep-for", "1s", "--delete-contents", "--max-deletion-percent", "100")
	prune = prune[:len(prune):len(prune)] // each append below gets its own copy

	// The workspace line, stated: the newer session in use holds Rd.
	if act, why := snapEntry(t, pruneReport(t, append(prune, "--dry-run", "--sessions-carry-data")), rd); act != "would-prune" {
		t.Errorf("prune --dry-run --sessions-carry-data: Rd %s %s (%s), want would-prune (the statement is what lets it go)", rd, act, why)
	}
	r := pruneReport(t, append(prune, "--yes"))
	if act, why := snapEntry(t, r, rd); act != "kept" || !strings.Contains(why, "the only copy") {
		t.Errorf("prune --keep-for 1s beside alice-data-2, created empty: Rd %s %s (%s), want kept as the only copy", rd, act, why)
	}
	if act, why := snapEntry(t, r, rh); act != "pruned" || !strings.Contains(why, "its data is also in claim alice-home-2") {
		t.Errorf("prune --keep-for 1s beside alice-home-2, created from Rh: Rh %s %s (%s), want pruned, its data also in claim alice-home-2", rh, act, why)
	}
	if snapshotGone(t, f, ns, rd) {
		t.Fatalf("Rd %s, the only copy of alice's dataset, is gone after prune", rd)
	}
	holds(t, f, ns, "alice-home-2", homeFile, homeData)
}
