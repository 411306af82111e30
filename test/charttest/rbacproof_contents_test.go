//go:build integration

package charttest_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// pruneReport is the part of a run's or prune's JSON report about the
// janitor's rescues.
type pruneReport struct {
	Summary struct {
		SnapshotsPruned int `json:"snapshotsPruned"`
		LeakedContents  int `json:"leakedContents"`
		Failures        int `json:"failures"`
	} `json:"summary"`
	Snapshots []struct {
		Name, Action, Reason string
	} `json:"snapshots"`
}

func parsePruneReport(t *testing.T, stdout string) pruneReport {
	t.Helper()
	var r pruneReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("parse the JSON report: %v\n%s", err, stdout)
	}
	return r
}

func (r pruneReport) entry(name string) (action, reason string) {
	for _, s := range r.Snapshots {
		if s.Name == name {
			return s.Action, s.Reason
		}
	}
	return "", ""
}

// proveContentsDelete is the RBAC proof of contents.delete. A release with
// retention (keepLast 1) and a workspace with two rescues whose
// VolumeSnapshotContents are Retain, its claim gone: the older rescue is
// retention's candidate, and pruning it means setting its content to
// Delete first.
//
//   - contents.delete=false: the ServiceAccount's token may neither get nor
//     patch contents; the CronJob's run keeps the rescue ("its content is
//     Retain"), and even `janitor prune --delete-contents` with that token
//     is refused (403) and deletes nothing.
//   - the release upgraded to contents.delete=true: the token may get and
//     patch contents (and still not update, delete or create them), and the
//     CronJob's run (now with --delete-contents) sets the content to Delete
//     and prunes the rescue; the newer rescue and its Retain content are
//     untouched.
func proveContentsDelete(t *testing.T) {
	ctx := context.Background()
	cs := env.Clientset(t)
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	rel, ws := env.Namespace(t), env.Namespace(t)
	values := []string{filepath.Join(root(t), "test", "charttest", "testdata", "proof-values.yaml")}
	// Scope: the workspace namespace only, so that retention looks at no
	// other test's rescues.
	// The Lease in the release's namespace (the proofs run in parallel).
	sets := []string{"config.selector=proof=" + ws, "config.all-namespaces=false", "config.namespace={" + ws + "}", "retention.keepLast=1",
		"config.lock-namespace=" + rel}
	release := "contents-" + ws
	off := render(t, release, rel, values, append(sets, "contents.delete=false")...)
	on := render(t, release, rel, values, append(sets, "contents.delete=true")...)
	rbac := func(r *Rendered) string {
		return r.YAMLOf(t, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	}
	t.Cleanup(func() {
		_, _ = kubectl(t, env.Kubeconfig, on.YAMLOf(t, "ClusterRole", "ClusterRoleBinding"), "delete", "--ignore-not-found", "-f", "-")
	})
	if out, err := kubectl(t, env.Kubeconfig, rbac(off), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the chart's RBAC (contents.delete=false): %v\n%s", err, out)
	}
	sa := off.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	tr, err := cs.CoreV1().ServiceAccounts(rel).CreateToken(ctx, sa, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	// canI waits (RBAC reaches the authorizer through an informer) until
	// the token's answer to verb on contents is want.
	canI := func(verb string, want bool) {
		t.Helper()
		var out string
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
			var err error
			out, err = kubectl(t, kc, "", "auth", "can-i", "--quiet", verb, "volumesnapshotcontents.snapshot.storage.k8s.io")
			return (err == nil) == want, nil
		})
		if err != nil {
			t.Fatalf("the janitor's token: can-i %s volumesnapshotcontents is not %t: %s", verb, want, out)
		}
	}
	canI("patch", false)
	canI("get", true) // a rescue's content is read by name (issue 43)

	// Seed: a claim of workspace a rescued twice by the janitor (as it
	// writes a rescue: its labels and annotations, a Retain class), the
	// older rescue's data an hour older; then the claim is deleted.
	labels := map[string]string{"proof": ws, "workspace": "a"}
	claim, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ws, Name: "ws-a", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	contentOf := map[string]string{}
	for i, name := range []string{"ws-a-rescue-old", "ws-a-rescue-new"} {
		ann := map[string]string{inventory.AnnotationSourceUID: string(claim.UID), inventory.AnnotationSourceName: claim.Name,
			inventory.AnnotationOrphanedSince: now.Add(time.Duration(i-2) * time.Hour).Format(time.RFC3339)}
		lbl := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": "a", "proof": ws}
		if _, err := f.Snapshot(ctx, ws, name, claim.Name, testenv.SnapshotClassRetain, lbl, ann); err != nil {
			t.Fatal(err)
		}
		vs, err := f.WaitSnapshot(ctx, ws, name, time.Minute, testenv.Ready)
		if err != nil {
			t.Fatal(err)
		}
		contentOf[name] = *vs.Status.BoundVolumeSnapshotContentName
	}
	if err := f.Kube.CoreV1().PersistentVolumeClaims(ws).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitClaimGone(ctx, ws, claim.Name); err != nil {
		t.Fatal(err)
	}
	policy := func(name string) string {
		t.Helper()
		vc, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, contentOf[name], metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "gone"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(vc.Spec.DeletionPolicy)
	}
	exists := func(name string) bool {
		t.Helper()
		vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ws).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil && vs.DeletionTimestamp == nil
	}
	for name := range contentOf {
		if p := policy(name); p != string(snapv1.VolumeSnapshotContentRetain) {
			t.Fatalf("%s: content %s is %s, want Retain", name, contentOf[name], p)
		}
	}
	args := func(r *Rendered) []string { return r.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args }
	offCfg, onCfg := writeConfig(t, off), writeConfig(t, on)

	// contents.delete=false: the CronJob's run keeps the older rescue, for
	// its Retain content.
	if slices.Contains(args(off), "--delete-contents") {
		t.Fatalf("contents.delete=false passes --delete-contents: %q", args(off))
	}
	code, out, stderr := runJanitor(t, withKubeconfig(args(off), offCfg, kc)...)
	if code != 0 {
		t.Fatalf("CronJob run (contents.delete=false): exit %d: %s\n%s", code, stderr, out)
	}
	r := parsePruneReport(t, out)
	if a, why := r.entry("ws-a-rescue-old"); a != "kept" || !strings.Contains(why, "Retain") {
		t.Errorf("contents.delete=false: the older rescue is %q (%s), want kept for its Retain content\n%s", a, why, out)
	}
	if !exists("ws-a-rescue-old") || r.Summary.SnapshotsPruned != 0 {
		t.Errorf("contents.delete=false: a rescue with a Retain content was pruned: %+v", r.Summary)
	}
	// --delete-contents without the grant: the patch is forbidden, and the
	// rescue is not deleted.
	code, out, stderr = runJanitor(t, "prune", "--config", offCfg, "--kubeconfig", kc, "--keep-last", "1", "--delete-contents", "--yes", "-o", "json")
	if code == 0 || !strings.Contains(out+stderr, "forbidden") {
		t.Errorf("prune --delete-contents without the grant: exit %d, want a failure naming the forbidden patch:\n%s\n%s", code, stderr, out)
	}
	if a, _ := parsePruneReport(t, out).entry("ws-a-rescue-old"); a != "prune-failed" {
		t.Errorf("prune --delete-contents without the grant: the older rescue is %q, want prune-failed\n%s", a, out)
	}
	if !exists("ws-a-rescue-old") || policy("ws-a-rescue-old") != string(snapv1.VolumeSnapshotContentRetain) {
		t.Fatalf("without the grant the rescue or its content changed: exists %t, content %s", exists("ws-a-rescue-old"), policy("ws-a-rescue-old"))
	}

	// The release upgraded to contents.delete=true: get and patch, nothing
	// more.
	if !slices.Contains(args(on), "--delete-contents") {
		t.Fatalf("contents.delete=true does not pass --delete-contents: %q", args(on))
	}
	if out, err := kubectl(t, env.Kubeconfig, rbac(on), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the chart's RBAC (contents.delete=true): %v\n%s", err, out)
	}
	canI("patch", true)
	canI("get", true)
	for _, verb := range []string{"update", "delete", "create", "deletecollection"} {
		canI(verb, false)
	}
	// The snapshot controller may update the rescue between the janitor's
	// read and its delete (it resyncs a snapshot whose content changed): the
	// delete's resourceVersion precondition then fails and the rescue is
	// left to the next run (docs/spec.md#retention). So: up to three scheduled runs, as
	// the CronJob would do, the rescue pruned in one of them.
	pruned := 0
	for attempt := 1; attempt <= 3 && pruned == 0; attempt++ {
		code, out, stderr = runJanitor(t, withKubeconfig(args(on), onCfg, kc)...)
		if code != 0 {
			t.Fatalf("CronJob run %d (contents.delete=true): exit %d: %s\n%s", attempt, code, stderr, out)
		}
		r = parsePruneReport(t, out)
		a, why := r.entry("ws-a-rescue-old")
		switch {
		case a == "pruned" && r.Summary.SnapshotsPruned == 1 && r.Summary.LeakedContents == 0:
			pruned = attempt
		case a == "kept" && strings.Contains(why, "precondition"):
			t.Logf("run %d: %s", attempt, why)
			if p := policy("ws-a-rescue-old"); p != string(snapv1.VolumeSnapshotContentDelete) {
				t.Fatalf("run %d left the rescue for the next run, but its content is %s, not Delete", attempt, p)
			}
		default:
			t.Fatalf("contents.delete=true, run %d: the older rescue is %q (%s), summary %+v; want pruned, nothing leaked\n%s", attempt, a, why, r.Summary, out)
		}
		if a, _ := r.entry("ws-a-rescue-new"); a != "kept" {
			t.Errorf("run %d: the newest rescue (the workspace's only copy) is %q, want kept", attempt, a)
		}
	}
	if pruned == 0 {
		t.Fatal("three runs with contents.delete=true did not prune the older rescue")
	}
	t.Logf("the older rescue was pruned by run %d", pruned)
	// The content was set to Delete, so the snapshot controller deletes it
	// (and the storage-side snapshot) with the rescue.
	var p string
	_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		p = policy("ws-a-rescue-old")
		return p == "gone", nil
	})
	if p != "gone" && p != string(snapv1.VolumeSnapshotContentDelete) {
		t.Errorf("the pruned rescue's content %s is %s, want Delete or gone", contentOf["ws-a-rescue-old"], p)
	}
	if exists("ws-a-rescue-old") {
		t.Error("the pruned rescue still exists")
	}
	if !exists("ws-a-rescue-new") || policy("ws-a-rescue-new") != string(snapv1.VolumeSnapshotContentRetain) {
		t.Errorf("the newest rescue or its Retain content changed: exists %t, content %s", exists("ws-a-rescue-new"), policy("ws-a-rescue-new"))
	}
}
