//go:build integration

package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// tokenKubeconfig creates a ServiceAccount bound to rules in ns, mints a
// token with TokenRequest and writes a kubeconfig holding only that token.
func tokenKubeconfig(t *testing.T, ns string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	cs := env.Clientset(t)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "janitor"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "janitor"}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "janitor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "janitor"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "janitor", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "janitor", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(path, tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestForbiddenReadFailsClosed: a janitor allowed to read and patch claims
// but not to list pods must not mark anything: without the pods, every
// claim would look orphaned.
func TestForbiddenReadFailsClosed(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide", Claims: []string{"ws-a"}}); err != nil {
		t.Fatal(err)
	}
	kc := tokenKubeconfig(t, ns, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get", "list", "watch", "patch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
	})
	code, out, stderr := runWith2(t, []string{"scan", "-n", ns, "-l", wsSel, "--min-age", "0s", "--kubeconfig", kc, "--lock-namespace", ns})
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr)
	}
	if !strings.Contains(stderr, "forbidden") || !strings.HasPrefix(stderr, "error: read ") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("want one line naming the failed read, got %q", stderr)
	}
	if out != "" {
		t.Errorf("a failed run printed a report: %q", out)
	}
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Annotations["pvc-janitor.io/orphaned-since"]; ok || c.Labels["pvc-janitor.io/phase"] != "" {
		t.Fatal("a run that could not read pods marked a claim")
	}
}

// runWith2 runs a command line with only the given flags (JSON logs added).
func runWith2(t *testing.T, args []string) (int, string, string) {
	t.Helper()
	var out, errOut strings.Builder
	code := runWith(append(args, "--log-format", "json", "--log-level", "error"), &out, &errOut)
	return code, out.String(), errOut.String()
}
