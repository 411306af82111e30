//go:build integration

package charttest_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// report is the part of the janitor's JSON report the proof reads.
type report struct {
	Command string `json:"command"`
	DryRun  bool   `json:"dryRun"`
	Summary struct {
		Claims           int            `json:"claims"`
		States           map[string]int `json:"states"`
		SnapshotsCreated int            `json:"snapshotsCreated"`
		ClaimsDeleted    int            `json:"claimsDeleted"`
		Failures         int            `json:"failures"`
	} `json:"summary"`
	Claims []struct {
		Namespace, Name, State, Action string
	} `json:"claims"`
}

func parseReport(t *testing.T, stdout string) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("parse the JSON report: %v\n%s", err, stdout)
	}
	return r
}

func (r report) state(name string) string {
	for _, c := range r.Claims {
		if c.Name == name {
			return c.State
		}
	}
	return ""
}

// TestRBACProof installs the chart's RBAC for real, mints a token for its
// ServiceAccount and runs the janitor binary with a kubeconfig holding only
// that token, with the CronJob's own arguments and the ConfigMap's own
// configuration: scan, snapshot and (once the janitor has it) run must
// succeed, in both RBAC modes; and contents.delete grants exactly what
// --delete-contents needs (proveContentsDelete).
func TestRBACProof(t *testing.T) {
	t.Run("ClusterRole", func(t *testing.T) {
		t.Parallel()
		proveRBAC(t, false)
	})
	t.Run("NamespacedRoles", func(t *testing.T) {
		t.Parallel()
		proveRBAC(t, true)
	})
	t.Run("ContentsDelete", func(t *testing.T) {
		t.Parallel()
		proveContentsDelete(t)
	})
}

func proveRBAC(t *testing.T, namespaced bool) {
	ctx := context.Background()
	cs := env.Clientset(t)
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	rel := env.Namespace(t) // the release's namespace, and the Lease's
	ws := env.Namespace(t)  // the workspaces' namespace
	sel := "proof=" + ws
	values := []string{filepath.Join(root(t), "test", "charttest", "testdata", "proof-values.yaml")}
	// The Lease in the release's namespace, not the chart's default:
	// the proofs run in parallel and must not exclude each other.
	sets := []string{"config.selector=" + sel, "config.lock-namespace=" + rel}
	if namespaced {
		sets = append(sets, "rbac.namespaced=true", "config.all-namespaces=false", "config.namespace={"+ws+"}")
	}
	release := "proof-" + ws
	acting := render(t, release, rel, values, sets...)
	dry := render(t, release, rel, values, append(sets, "dryRun=true")...)

	// The chart's RBAC, for real.
	rbacYAML := acting.YAMLOf(t, "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
	t.Cleanup(func() {
		_, _ = kubectl(t, env.Kubeconfig, acting.YAMLOf(t, "ClusterRole", "ClusterRoleBinding"), "delete", "--ignore-not-found", "-f", "-")
	})
	if out, err := kubectl(t, env.Kubeconfig, rbacYAML, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the chart's RBAC: %v\n%s", err, out)
	}
	sa := acting.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	tr, err := cs.CoreV1().ServiceAccounts(rel).CreateToken(ctx, sa, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	// The token really is that narrow.
	for _, q := range [][]string{{"list", "secrets", "-n", ws}, {"get", "secrets", "-n", rel}, {"delete", "pods", "-n", ws},
		{"create", "pods", "-n", ws}, {"update", "persistentvolumeclaims", "-n", ws}, {"delete", "persistentvolumes"}} {
		// --quiet: exit 0 for yes, 1 for no.
		if out, err := kubectl(t, kc, "", append([]string{"auth", "can-i", "--quiet"}, q...)...); err == nil {
			t.Errorf("the janitor's token can %s: %s", strings.Join(q, " "), out)
		}
	}
	if out, err := kubectl(t, kc, "", "auth", "can-i", "--quiet", "delete", "persistentvolumeclaims", "-n", ws); err != nil {
		t.Errorf("the token cannot delete claims in %s: %v %s", ws, err, out)
	}

	// Seed: two orphans (their Unused condition set) and a claim in use.
	labels := func(w string) map[string]string { return map[string]string{"proof": ws, "workspace": w} }
	for _, c := range []struct{ name, w string }{{"ws-a", "a"}, {"ws-b", "b"}, {"ws-c", "c"}} {
		if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ws, Name: c.name, Labels: labels(c.w)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ws, Name: "ide-c", Claims: []string{"ws-c"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ws-a", "ws-b"} {
		if _, err := f.WaitUnused(ctx, ws, n); err != nil {
			t.Fatal(err)
		}
	}

	dryCfg := writeConfig(t, dry)
	actCfg := writeConfig(t, acting)

	// 1. What `helm test` runs: a read-only scan.
	testPods := dry.Kind("Pod")
	if len(testPods) != 1 {
		t.Fatalf("want the helm test pod, got %d pods", len(testPods))
	}
	testArgs := convert[corev1.Pod](t, testPods[0]).Spec.Containers[0].Args
	code, out, stderr := runJanitor(t, withKubeconfig(testArgs, dryCfg, kc, "-o", "json")...)
	if code != 0 {
		t.Fatalf("helm test scan: exit %d: %s", code, stderr)
	}
	r := parseReport(t, out)
	if r.state("ws-a") != "Orphaned" || r.state("ws-c") != "InUse" || r.Summary.Claims != 3 {
		t.Fatalf("helm test scan: %+v", r)
	}

	// 2. The default release (dryRun, marksOnly: the preview): the
	// CronJob's command (run --marks-only) snapshots, labels and deletes
	// nothing; the chart's RBAC lets it write its marks and its Lease.
	{
		code, out, stderr = runJanitor(t, withKubeconfig(dry.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, dryCfg, kc)...)
		if code != 0 {
			t.Fatalf("dry CronJob run: exit %d: %s", code, stderr)
		}
		if r := parseReport(t, out); !r.DryRun || r.Summary.ClaimsDeleted != 0 || r.Summary.SnapshotsCreated != 0 {
			t.Errorf("dry run acted: %+v", r.Summary)
		}
		snaps, err := f.Snap.SnapshotV1().VolumeSnapshots(ws).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(snaps.Items) != 0 {
			t.Error("the dry run created snapshots")
		}
		c, err := f.Kube.CoreV1().PersistentVolumeClaims(ws).Get(ctx, "ws-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Labels["pvc-janitor.io/phase"] != "" {
			t.Error("the preview labelled a claim")
		}
		if c.Annotations["pvc-janitor.io/orphaned-since"] == "" {
			t.Error("the preview (run --marks-only) wrote no orphaned-since mark")
		}
	}

	// 3. scan: marks (patch claims). The preview marked the orphans
	// already, so no OrphanDetected Event comes (it comes with the first
	// mark: docs/spec.md#marks-only); step 4's Events prove the create.
	code, _, stderr = runJanitor(t, "scan", "--config", actCfg, "--kubeconfig", kc)
	if code != 0 {
		t.Fatalf("scan: exit %d: %s", code, stderr)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ws).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Labels["pvc-janitor.io/phase"] != "Orphaned" {
		t.Errorf("ws-a not marked: %v", c.Labels)
	}

	// 4. snapshot: VolumeSnapshots created and watched until ready, the
	// class checked, the Lease taken and released.
	code, out, stderr = runJanitor(t, "snapshot", "--config", actCfg, "--kubeconfig", kc)
	if code != 0 {
		t.Fatalf("snapshot: exit %d: %s\n%s", code, stderr, out)
	}
	r = parseReport(t, out)
	if r.Summary.SnapshotsCreated != 2 || r.Summary.Failures != 0 {
		t.Fatalf("snapshot: %+v\n%s", r.Summary, stderr)
	}
	evs, err := cs.CoreV1().Events(ws).List(ctx, metav1.ListOptions{FieldSelector: "reason=SnapshotCreated"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no SnapshotCreated events: %v", err)
	}

	// 5. The acting CronJob's command: the rescued claims are reaped.
	{
		cronArgs := acting.CronJob(t).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(cronArgs, "--yes") {
			t.Fatalf("the acting CronJob lacks --yes: %q", cronArgs)
		}
		// The snapshot controller drops its pvc-as-source-protection
		// finalizer from a claim some time after its snapshot is ready; a
		// delete racing that update fails its precondition and is left to
		// the next run (docs/spec.md#reap). So: up to two scheduled runs, as the
		// CronJob would do, and both claims deleted in all.
		deleted := 0
		for attempt := 0; attempt < 2 && deleted < 2; attempt++ {
			code, out, stderr = runJanitor(t, withKubeconfig(cronArgs, actCfg, kc)...)
			if code != 0 {
				t.Fatalf("CronJob run: exit %d: %s\n%s", code, stderr, out)
			}
			r = parseReport(t, out)
			if r.Summary.Failures != 0 {
				t.Fatalf("run: %+v\n%s", r.Summary, stderr)
			}
			deleted += r.Summary.ClaimsDeleted
		}
		if deleted != 2 {
			t.Fatalf("two runs deleted %d claims, want 2: %+v", deleted, r.Summary)
		}
		for _, n := range []string{"ws-a", "ws-b"} {
			c, err := f.Kube.CoreV1().PersistentVolumeClaims(ws).Get(ctx, n, metav1.GetOptions{})
			if err == nil && c.DeletionTimestamp == nil {
				t.Errorf("%s was not deleted", n)
			} else if err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
		}
		if c, err := f.Kube.CoreV1().PersistentVolumeClaims(ws).Get(ctx, "ws-c", metav1.GetOptions{}); err != nil || c.DeletionTimestamp != nil {
			t.Errorf("the claim in use was touched: %v", err)
		}
	}

	// 6. A claim owned by an object of a kind the janitor does not list
	// (here a ConfigMap) needs a metadata get the chart does not grant: the
	// run fails closed, naming the read, and marks nothing.
	if namespaced {
		return
	}
	owner, err := cs.CoreV1().ConfigMaps(ws).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "operator-state"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ws, Name: "ws-owned", Labels: labels("d"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runJanitor(t, "scan", "--config", actCfg, "--kubeconfig", kc)
	if code != 1 || !strings.Contains(stderr, "forbidden") || !strings.Contains(stderr, "ConfigMap") {
		t.Errorf("a claim with an owner of an unlisted kind: exit %d (want 1, naming the forbidden read): %s", code, stderr)
	}
	c, err = f.Kube.CoreV1().PersistentVolumeClaims(ws).Get(ctx, "ws-owned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Labels["pvc-janitor.io/phase"] != "" {
		t.Error("a run that could not read an owner marked a claim")
	}
}

// writeConfig writes the rendered ConfigMap's config.yaml to a file.
func writeConfig(t *testing.T, r *Rendered) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(r.ConfigFile(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withKubeconfig turns a pod's arguments into a local command line: the
// mounted configuration path replaced by cfg, the token's kubeconfig added.
func withKubeconfig(args []string, cfg, kubeconfig string, extra ...string) []string {
	out := make([]string, 0, len(args)+4)
	for _, a := range args {
		if a == "/etc/pvc-janitor/config.yaml" {
			a = cfg
		}
		out = append(out, a)
	}
	return append(append(out, "--kubeconfig", kubeconfig), extra...)
}
