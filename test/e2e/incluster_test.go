//go:build integration

package cli_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestInClusterConfig (docs/spec.md#config-kubeconfig): a janitor process with
// no --kubeconfig, no KUBECONFIG and a HOME without ~/.kube/config, run
// where a pod runs (KUBERNETES_SERVICE_HOST and _PORT set, a ServiceAccount
// token, CA and namespace under /var/run/secrets/kubernetes.io/serviceaccount),
// reads the cluster as that ServiceAccount, in the namespace of the
// namespace file. client-go reads those files at a fixed path; the test
// puts them there in a private mount namespace of the janitor process
// (unshare, as root), so nothing on the host changes. Without the files,
// the same process has no cluster (exit 2).
func TestInClusterConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the in-cluster files sit at a fixed path; mounting them needs root (unshare -m)")
	}
	if out, err := exec.Command("unshare", "-m", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: no private mount namespace here (unshare -m: %v: %s)", err, out)
	}
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-b", Labels: wsLabels("b")}); err != nil {
		t.Fatal(err)
	}
	reader := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}}
	token := saToken(t, ns, "incluster", reader, authzv1.ResourceAttributes{Verb: "list", Resource: "persistentvolumeclaims"})

	// What the kubelet mounts into a pod, under a folder that will be
	// mounted over /run (/var/run is /run).
	root := t.TempDir()
	sa := filepath.Join(root, "secrets", "kubernetes.io", "serviceaccount")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(env.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"token": token, "ca.crt": string(ca), "namespace": ns} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	server, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	scan := func(mount bool) (int, string, string) {
		t.Helper()
		// No -n: the namespace comes from the namespace file.
		args := []string{binary(t), "scan", "-l", wsSel, "--workspace-label", "workspace",
			"--min-age", "0s", "--grace-period", "0s", "--dry-run", "-o", "json"}
		if mount {
			args = append([]string{"unshare", "-m", "--propagation", "private", "sh", "-c",
				`mount --bind "$0" /run && exec "$@"`, root}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir(),
			"KUBERNETES_SERVICE_HOST=" + server.Hostname(), "KUBERNETES_SERVICE_PORT=" + server.Port()}
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		return exitCode(cmd.Run()), out.String(), errOut.String()
	}

	code, out, stderr := scan(true)
	if code != 0 {
		t.Fatalf("scan in cluster: exit %d: %s\n%s", code, out, stderr)
	}
	r := parse(t, out)
	if r.Summary.Claims != 2 || r.Cluster != "https://"+server.Host {
		t.Errorf("scan in cluster: %d claims of cluster %q; want the 2 of namespace %s (from the namespace file) of https://%s",
			r.Summary.Claims, r.Cluster, ns, server.Host)
	}
	for _, c := range r.Claims {
		if c.Namespace != ns {
			t.Errorf("claim %s/%s: not of the namespace file's namespace %s", c.Namespace, c.Name, ns)
		}
	}
	if code, out, stderr := scan(false); code != 2 || strings.Contains(out, `"kind"`) {
		t.Errorf("scan with the service environment but no token files: exit %d, want 2 and no report: %s\n%s", code, out, stderr)
	}
}
