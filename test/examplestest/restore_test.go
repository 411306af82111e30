//go:build integration

package examplestest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestRestoreRoleProof applies restore-role.yaml for real, bound to a fresh
// ServiceAccount in a test namespace instead of the example's Group and
// namespace, and runs `janitor restore NS/CLAIM --as NAME` with only that
// account's token: forbidden (exit 1, nothing created) before the roles are
// bound, and with them the claim is restored from the janitor's rescue and
// Bound. Each call the restore makes is also checked with kubectl auth
// can-i, and a few it must not be able to make.
func TestRestoreRoleProof(t *testing.T) {
	ctx := context.Background()
	cs := env.Clientset(t)
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	const account = "restorer"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: account}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, account, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kc, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	environ := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	clusterScoped := []string{"persistentvolumes", "volumeattachments", "volumesnapshotcontents", "storageclasses"}
	canI := func(a access) bool {
		resource := a.resource
		if a.group != "" {
			resource += "." + a.group
		}
		args := []string{"--kubeconfig", kc, "auth", "can-i", "--quiet", a.verb, resource}
		switch {
		case a.namespaced:
			args = append(args, "-n", ns)
		case !slices.Contains(clusterScoped, a.resource):
			args = append(args, "--all-namespaces")
		}
		return run(t, environ, env.Bin.Kubectl, args...).code == 0
	}

	// Seed: a bound claim of workspace a with a file on it, and a rescue of
	// it as the janitor writes one (its labels and annotations, the claim
	// template pvc-janitor.io/claim), ready.
	if _, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-a", Labels: map[string]string{"workspace": "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteVolume(ctx, ns, "ws-a", "notes.txt", []byte("rescued")); err != nil {
		t.Fatal(err)
	}
	src, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, _, err := restore.NewTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{inventory.AnnotationSourceUID: string(src.UID), inventory.AnnotationSourceName: src.Name,
		inventory.AnnotationOrphanedSince: time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), restore.AnnotationTemplate: tmpl}
	labels := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue, "workspace": "a"}
	if _, err := f.Snapshot(ctx, ns, "ws-a-rescue-1", "ws-a", testenv.SnapshotClassDelete, labels, ann); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitSnapshot(ctx, ns, "ws-a-rescue-1", time.Minute, testenv.Ready); err != nil {
		t.Fatal(err)
	}
	restoreArgs := []string{"restore", ns + "/ws-a", "--as", "ws-a-back", "--kubeconfig", kc,
		"-o", "json", "--restore-timeout", "90s", "--log-level", "error"}

	// 1. Without the roles: forbidden, nothing created.
	for _, a := range restoreNeeds {
		if canI(a) {
			t.Errorf("before the roles are bound the account can %s", a)
		}
	}
	res := run(t, environ, janitorBin(t), restoreArgs...)
	if res.code != 1 || !strings.Contains(res.stderr, "forbidden") {
		t.Errorf("restore without the roles: exit %d, want 1 naming the forbidden read:\n%s%s", res.code, res.stderr, res.stdout)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-back", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused restore created the claim (or it cannot be read): %v", err)
	}

	// 2. The example's roles, bound to the account in the test namespace.
	role, rb, cr, crb := restoreRBAC(t)
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}
	role.Namespace, rb.Namespace, rb.Subjects = ns, ns, subjects
	cr.Name = cr.Name + "-" + ns
	crb.Name, crb.RoleRef.Name, crb.Subjects = cr.Name, cr.Name, subjects
	var manifest strings.Builder
	for _, o := range []any{role, rb, cr, crb} {
		data, err := sigsyaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		manifest.WriteString("---\n")
		manifest.Write(data)
	}
	t.Cleanup(func() {
		_, _ = kubectl(t, "", "delete", "--ignore-not-found", "clusterrolebinding/"+crb.Name, "clusterrole/"+cr.Name)
	})
	if out, err := kubectl(t, manifest.String(), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply restore-role.yaml for the account: %v\n%s", err, out)
	}
	// RBAC reaches the authorizer through an informer: wait for the last
	// binding to count.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return canI(restoreNeeds[len(restoreNeeds)-1]) && canI(restoreNeeds[0]), nil
	}); err != nil {
		t.Fatal("the roles never took effect")
	}
	for _, a := range restoreNeeds {
		if !canI(a) {
			t.Errorf("with restore-role.yaml the account cannot %s", a)
		}
	}
	for _, a := range []access{
		{"delete", "", "persistentvolumeclaims", true}, {"patch", "", "persistentvolumeclaims", true},
		{"create", "snapshot.storage.k8s.io", "volumesnapshots", true}, {"delete", "snapshot.storage.k8s.io", "volumesnapshots", true},
		{"list", "", "secrets", true}, {"create", "", "pods", true}, {"list", "", "persistentvolumeclaims", false},
		{"patch", "snapshot.storage.k8s.io", "volumesnapshotcontents", false}, {"create", "coordination.k8s.io", "leases", true},
	} {
		if canI(a) {
			t.Errorf("with restore-role.yaml the account can %s", a)
		}
	}

	// 3. The restore, with only the account's token. ws-a is Bound and
	// nothing dates its last use, so it may hold newer data than the rescue:
	// the role reads enough to refuse (exit 2, nothing created), and the
	// restore beside it needs --allow-older (docs/spec.md#restore-refusals).
	res = run(t, environ, janitorBin(t), restoreArgs...)
	if res.code != 2 || !strings.Contains(res.stderr, "--allow-older") {
		t.Errorf("restore beside a claim that may hold newer data: exit %d, want 2 naming --allow-older:\n%s%s", res.code, res.stderr, res.stdout)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-back", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused restore created the claim (or it cannot be read): %v", err)
	}
	res = run(t, environ, janitorBin(t), append(restoreArgs, "--allow-older")...)
	if res.code != 0 {
		t.Fatalf("restore with restore-role.yaml: exit %d:\n%s%s", res.code, res.stderr, res.stdout)
	}
	var rep struct {
		Claims []struct{ Name, Action, Reason string } `json:"claims"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("parse the report: %v\n%s", err, res.stdout)
	}
	if len(rep.Claims) != 1 || rep.Claims[0].Name != "ws-a-back" || rep.Claims[0].Action != "restored" {
		t.Errorf("report claims %+v, want ws-a-back restored", rep.Claims)
	}
	back, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a-back", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Status.Phase != corev1.ClaimBound || back.Annotations[restore.AnnotationRestoredFrom] != "ws-a-rescue-1" {
		t.Errorf("restored claim: phase %s, annotations %v", back.Status.Phase, back.Annotations)
	}
	if got, err := f.ReadVolume(ctx, ns, "ws-a-back", "notes.txt"); err != nil || string(got) != "rescued" {
		t.Errorf("the restored claim holds %q (%v), want the rescue's bytes", got, err)
	}
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Restored,involvedObject.name=ws-a-back"})
	if err != nil || len(evs.Items) == 0 {
		t.Errorf("no Restored event on the new claim: %v", err)
	}
}
