//go:build integration

package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// readKinds are the lists every command reads, by API group: a janitor
// without one of them must fail closed.
var readKinds = []struct{ group, resource string }{
	{"", "persistentvolumeclaims"},
	{"", "persistentvolumes"},
	{"storage.k8s.io", "volumeattachments"},
	{"snapshot.storage.k8s.io", "volumesnapshots"},
	{"snapshot.storage.k8s.io", "volumesnapshotcontents"},
	{"", "pods"},
	{"apps", "deployments"},
	{"apps", "replicasets"},
	{"apps", "daemonsets"},
	{"apps", "statefulsets"},
	{"batch", "jobs"},
	{"batch", "cronjobs"},
}

// readRules grants get/list/watch on every read kind but skip.
func readRules(skip string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, k := range readKinds {
		if k.resource != skip {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: []string{"get", "list", "watch"}})
		}
	}
	return rules
}

// writeRules are what a mutating run needs on top of the reads.
var writeRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"patch", "delete"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: []string{"create", "delete"}},
	{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshotclasses"}, Verbs: []string{"get", "list"}},
}

// saToken creates a ServiceAccount in ns bound cluster-wide to rules (the
// janitor reads cluster-scoped kinds), waits until RBAC grants probe, and
// returns a TokenRequest token for it. The cluster objects go at cleanup.
func saToken(t *testing.T, ns, name string, rules []rbacv1.PolicyRule, probe authzv1.ResourceAttributes) string {
	t.Helper()
	ctx := context.Background()
	cs := env.Clientset(t)
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crName := ns + "-" + name
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: crName}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: crName},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: crName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crName, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), crName, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + ns + ":" + name
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}, ResourceAttributes: &probe}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC for %s never granted %+v: %v", user, probe, err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// expiredToken re-signs a genuine ServiceAccount token with the cluster's
// signing key and an expiry an hour ago: exactly what a CronJob holding a
// stale projected token sends.
func expiredToken(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims["iat"] = now.Add(-2 * time.Hour).Unix()
	claims["nbf"] = now.Add(-2 * time.Hour).Unix()
	claims["exp"] = now.Add(-time.Hour).Unix()
	payload, _ = json.Marshal(claims)
	keyPEM, err := os.ReadFile(filepath.Join(env.Dir, "pki", "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// badCase is one bad invocation.
type badCase struct {
	name string
	// args: the command first; the kubeconfig, log flags and the lock
	// namespace are inserted after it, so the case's own flags win.
	args []string
	env  map[string]string
	// file is written to a temporary file and passed with --config.
	file string
	// kubeconfig replaces the proxy's: "missing", "broken", "empty",
	// "no-cluster", "unreachable", or a token mode: "token:<token>" (through
	// the proxy, which then forwards credentials).
	kubeconfig string
	faults     testenv.Faults
	code       int
	msg        string // a substring of the one line on stderr
	also       string // another one
	// leaseOnly: a mutating run that fails on a read has written its own
	// Lease (and must have released it), nothing else.
	leaseOnly bool
}

// TestBadInput runs every kind of bad input through the fault proxy: each
// gets one line on stderr starting with "error: ", the documented exit code
// (2 usage/configuration, 1 runtime), no report, and no write reaching the
// API server.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	// A claim that any run that got going would mark, snapshot or delete.
	orphan(t, f, ns, "ws-a", "a", "")
	if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "ide-b", Claims: []string{"ws-b"}}); err != nil {
		t.Fatal(err)
	}
	sel := []string{"-n", ns, "-l", wsSel, "--min-age", "0s", "--grace-period", "0s"}
	with := func(cmd string, extra ...string) []string {
		return append(append([]string{cmd}, sel...), extra...)
	}
	noSel := func(cmd string, extra ...string) []string { return append([]string{cmd, "-n", ns}, extra...) }
	// For settings from the environment or the file: no flag may set them.
	bare := func(cmd string, extra ...string) []string {
		return append([]string{cmd, "-n", ns, "-l", wsSel}, extra...)
	}

	listProbe := authzv1.ResourceAttributes{Verb: "list", Resource: "persistentvolumeclaims"}
	garbage := "garbage-token-" + strings.Repeat("x", 20)
	fullRead := saToken(t, ns, "full-read", readRules(""), listProbe)
	revoked := saToken(t, ns, "revoked", readRules(""), listProbe)
	expired := expiredToken(t, fullRead)
	if err := env.Clientset(t).CoreV1().ServiceAccounts(ns).Delete(ctx, "revoked", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	snapshotGroup := testenv.Faults{Rules: []testenv.Rule{{Groups: []string{"snapshot.storage.k8s.io"}, Faults: testenv.Faults{Rate404: 1}}}}

	cases := []badCase{
		// The config file.
		{name: "malformed YAML", args: with("scan"), file: "selector: [unclosed\n", code: 2, msg: "invalid YAML"},
		{name: "YAML list, not a mapping", args: with("scan"), file: "- min-age\n- 1m\n", code: 2, msg: "invalid YAML"},
		{name: "duplicate key", args: bare("scan"), file: "min-age: 1m\nmin-age: 2m\n", code: 2, msg: "already defined"},
		{name: "unknown key", args: bare("scan"), file: "min-agee: 1m\n", code: 2, msg: `unknown key "min-agee" (did you mean "min-age"?)`},
		{name: "misspelt exclusion", args: with("scan"), file: "exclude-namespaces: [kube-system]\n", code: 2, msg: `unknown key "exclude-namespaces"`},
		{name: "config key in config", args: with("scan"), file: "config: other.yaml\n", code: 2, msg: `key "config" cannot be set`},
		{name: "wrong type: string for integer", args: with("scan"), file: "page-size: ten\n", code: 2, msg: `key "page-size": want a whole number`},
		{name: "wrong type: number for boolean", args: with("scan"), file: "all-namespaces: 3\n", code: 2, msg: `key "all-namespaces": want a boolean`},
		{name: "wrong type: bare number for duration", args: bare("scan"), file: "min-age: 10\n", code: 2, msg: `key "min-age": want a duration`},
		{name: "wrong type: mapping for list", args: with("scan"), file: "namespace: {a: b}\n", code: 2, msg: `key "namespace": want a list of strings`},
		{name: "config file missing", args: with("scan", "--config", filepath.Join(t.TempDir(), "nope.yaml")), code: 2, msg: "no such file"},
		// Selectors.
		{name: "bad selector flag", args: append(noSel("scan"), "-l", "a in (b"), code: 2, msg: "--selector: invalid selector"},
		{name: "bad selector in file", args: noSel("scan"), file: "selector: 'app=(x'\n", code: 2, msg: "(from config file"},
		{name: "bad selector in env", args: noSel("scan"), env: map[string]string{"JANITOR_SELECTOR": "=oops"}, code: 2, msg: "(from JANITOR_SELECTOR)"},
		// Durations.
		{name: "bad duration flag", args: with("scan", "--min-age", "10x"), code: 2, msg: `--min-age: invalid duration "10x"`},
		{name: "bad duration env", args: bare("scan"), env: map[string]string{"JANITOR_GRACE_PERIOD": "soon"}, code: 2, msg: "(from JANITOR_GRACE_PERIOD)"},
		{name: "bad duration file", args: bare("scan"), file: "snapshot-timeout: 5 minutes\n", code: 2, msg: "--snapshot-timeout: invalid duration"},
		{name: "negative grace period", args: with("scan", "--grace-period", "-1m"), code: 2, msg: "--grace-period: must not be negative"},
		{name: "zero api timeout", args: with("scan", "--api-timeout", "0s"), code: 2, msg: "--api-timeout: must be greater than 0"},
		{name: "zero lock duration", args: with("run", "--yes", "--lock-duration", "0"), code: 2, msg: "--lock-duration: must be greater than 0"},
		{name: "negative snapshot timeout", args: with("snapshot", "--snapshot-timeout", "-5s"), code: 2, msg: "--snapshot-timeout: must be greater than 0"},
		// Counts.
		{name: "negative page size in a file", args: with("scan"), file: "page-size: -1\n", code: 2, msg: "--page-size: must be 0 (one streamed list) or between 1 and 10000, got -1"},
		{name: "negative page size", args: with("scan", "--page-size", "-5"), code: 2, msg: "--page-size: must be 0 (one streamed list) or between 1 and 10000"},
		{name: "huge page size", args: with("scan", "--page-size", "10001"), code: 2, msg: "--page-size: must be 0 (one streamed list) or between 1 and 10000"},
		{name: "page size not a number", args: with("scan", "--page-size", "abc"), code: 2, msg: "page-size"},
		{name: "zero concurrency", args: with("snapshot", "--concurrency", "0"), code: 2, msg: "--concurrency: must be greater than 0"},
		{name: "negative attempts", args: with("snapshot", "--snapshot-attempts", "-1"), code: 2, msg: "--snapshot-attempts: must be greater than 0"},
		{name: "zero burst", args: with("scan", "--burst", "0"), code: 2, msg: "--burst: must be greater than 0"},
		{name: "zero qps", args: with("scan", "--qps", "0"), code: 2, msg: "--qps: must be greater than 0"},
		{name: "NaN qps in env", args: with("scan"), env: map[string]string{"JANITOR_QPS": "NaN"}, code: 2, msg: "--qps"},
		{name: "negative max deletions", args: with("run", "--yes", "--max-deletions", "-1"), code: 2, msg: "--max-deletions: must not be negative"},
		{name: "zero deletion percent", args: with("run", "--yes", "--max-deletion-percent", "0"), code: 2, msg: "--max-deletion-percent"},
		{name: "deletion percent over 100", args: with("reap", "--yes", "--max-deletion-percent", "150"), code: 2, msg: "--max-deletion-percent"},
		{name: "bad integer in env", args: with("run", "--yes"), env: map[string]string{"JANITOR_MAX_DELETIONS": "lots"}, code: 2, msg: "(from JANITOR_MAX_DELETIONS)"},
		// Conflicting flags and unsafe combinations.
		{name: "dry-run and yes", args: with("run", "--dry-run", "--yes"), code: 2, msg: "--dry-run and --yes are mutually exclusive"},
		// docs/spec.md#marks-only: a plain dry run stays pure.
		{name: "marks-only and dry-run", args: with("run", "--marks-only", "--dry-run"), code: 2, msg: "--marks-only and --dry-run are mutually exclusive"},
		{name: "marks-only and yes", args: with("run", "--marks-only", "--yes"), code: 2, msg: "--marks-only and --yes are mutually exclusive"},
		{name: "-A and -n", args: []string{"scan", "-A", "-n", ns}, code: 2, msg: "mutually exclusive"},
		// -n narrows an all-namespaces from a lower source (kubectl's
		// precedence, issue 39 item 8); both from the environment conflict.
		{name: "namespace and all-namespaces both from env", args: []string{"scan", "-l", wsSel},
			env: map[string]string{"JANITOR_ALL_NAMESPACES": "true", "JANITOR_NAMESPACE": ns}, code: 2, msg: "mutually exclusive"},
		{name: "bad boolean in env", args: with("scan"), env: map[string]string{"JANITOR_DRY_RUN": "maybe"}, code: 2, msg: "(from JANITOR_DRY_RUN)"},
		{name: "snapshot with empty selector", args: noSel("snapshot"), code: 2, msg: "snapshot refuses an empty --selector"},
		{name: "run with empty selector", args: noSel("run", "--yes"), code: 2, msg: "run refuses an empty --selector"},
		{name: "reap with blank selector", args: noSel("reap", "--yes", "-l", "  "), code: 2, msg: "reap refuses an empty --selector"},
		{name: "guard --rescue with empty selector", args: noSel("guard", "--rescue"), code: 2, msg: "guard --rescue refuses an empty --selector"},
		{name: "rescue on scan", args: with("scan", "--rescue"), code: 2, msg: "--rescue is only valid for guard"},
		{name: "clock skew over 5m", args: with("run", "--yes", "--clock-skew", "1h"), code: 2, msg: "--clock-skew: must be between 0s and 5m0s, got 1h0m0s"},
		{name: "discard without yes", args: with("reap", "--superseded", "discard"), code: 2, msg: "--superseded=discard"},
		{name: "reap without yes or terminal", args: with("reap"), code: 2, msg: "pass --yes"},
		{name: "run without yes or terminal", args: with("run"), code: 2, msg: "pass --yes"},
		{name: "bad output", args: with("scan", "-o", "xml"), code: 2, msg: `unable to match a printer suitable for the output format "xml"`},
		{name: "bad jsonpath", args: with("scan", "-o", "jsonpath={.claims[*}"), code: 2, msg: "error parsing jsonpath {.claims[*}"},
		{name: "notice period negative", args: with("scan", "--notice-period", "-1h"), code: 2, msg: "--notice-period"},
		{name: "route without its webhook variable", args: with("scan"), code: 2, file: "notify-routes:\n  - name: x\n    webhook-env: NOPE\n", msg: `environment variable NOPE (the webhook's URL) is not set`},
		{name: "bad log level", args: with("scan", "--log-level", "loud"), code: 2, msg: "--log-level: invalid value"},
		{name: "bad log format", args: with("scan", "--log-format", "xml"), code: 2, msg: "--log-format: invalid value"},
		{name: "bad superseded policy", args: with("run", "--yes", "--superseded", "delete"), code: 2, msg: "--superseded: invalid value"},
		{name: "bad namespace", args: []string{"scan", "-n", "Bad_NS"}, code: 2, msg: "--namespace: invalid namespace"},
		{name: "bad excluded namespace", args: with("scan", "--exclude-namespace", "-x-"), code: 2, msg: "--exclude-namespace: invalid namespace"},
		{name: "bad lock namespace", args: with("run", "--yes", "--lock-namespace", "UPPER"), code: 2, msg: "--lock-namespace: invalid namespace"},
		{name: "bad workspace label", args: with("scan", "--workspace-label", "a b"), code: 2, msg: "--workspace-label: invalid label key"},
		{name: "pushgateway URL without a host", args: with("scan", "--pushgateway", "https://user:secret@"), code: 2, msg: "--pushgateway"},
		{name: "notify webhook not http", args: with("run", "--yes", "--notify-webhook", "ftp://hooks.example/x"), code: 2, msg: "--notify-webhook"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, msg: "unknown command"},
		{name: "positional argument", args: with("scan", "extra"), code: 2, msg: "takes no arguments"},
		{name: "explain without a claim", args: noSel("explain"), code: 2, msg: "explain needs a claim: NAMESPACE/CLAIM, or CLAIM with -n"},
		{name: "explain with two claims", args: noSel("explain", "ws-a", "ws-b"), code: 2, msg: "explain takes one claim (NAMESPACE/CLAIM, or CLAIM with -n), got 2 arguments: ws-a ws-b"},
		{name: "restore with two claims", args: noSel("restore", "ws-a", "ws-b"), code: 2, msg: "restore takes at most one claim"},
		{name: "unknown flag", args: with("scan", "--no-such-flag"), code: 2, msg: "unknown flag"},
		// The kubeconfig.
		{name: "missing kubeconfig", args: with("scan"), kubeconfig: "missing", code: 2, msg: "kubeconfig"},
		{name: "broken kubeconfig", args: with("scan"), kubeconfig: "broken", code: 2, msg: "kubeconfig"},
		{name: "empty kubeconfig", args: with("scan"), kubeconfig: "empty", code: 2, msg: "kubeconfig"},
		{name: "context without cluster", args: with("scan"), kubeconfig: "no-cluster", code: 2, msg: "kubeconfig"},
		{name: "unknown context", args: with("scan", "--context", "nope"), code: 2, msg: `"nope"`},
		{name: "unknown snapshot class", args: with("snapshot", "--snapshot-class", "nope"), code: 2, msg: `VolumeSnapshotClass "nope" not found`},
		{name: "unknown snapshot class on run", args: with("run", "--yes", "--snapshot-class", "nope"), code: 2, msg: `VolumeSnapshotClass "nope" not found`},
		// The server and the credentials: runtime errors (exit 1).
		{name: "unreachable server", args: with("scan", "--api-timeout", "2s"), kubeconfig: "unreachable", code: 1, msg: "connection refused"},
		{name: "connections reset", args: with("guard", "--api-timeout", "2s"), faults: testenv.Faults{RateReset: 1, WatchOpen: true}, code: 1, msg: "connection reset"},
		{name: "server errors until the api timeout", args: with("guard", "--api-timeout", "2s"), faults: testenv.Faults{Rate500: 1}, code: 1, msg: "gave up after"},
		{name: "garbage token", args: with("guard"), kubeconfig: "token:" + garbage, code: 1, msg: "Unauthorized"},
		{name: "expired token", args: with("guard"), kubeconfig: "token:" + expired, code: 1, msg: "Unauthorized"},
		{name: "token of a deleted ServiceAccount", args: with("guard"), kubeconfig: "token:" + revoked, code: 1, msg: "Unauthorized"},
		{name: "garbage token on run", args: with("run", "--yes"), kubeconfig: "token:" + garbage, code: 1, msg: "Unauthorized"},
		{name: "snapshot CRDs absent", args: with("guard"), faults: snapshotGroup, code: 1, msg: "VolumeSnapshot CRDs are missing"},
		{name: "snapshot CRDs absent on run", args: with("run", "--yes"), faults: snapshotGroup, code: 1, msg: "VolumeSnapshot CRDs are missing", leaseOnly: true},
	}
	// Forbidden: one ServiceAccount per read kind, allowed every other read.
	for _, k := range readKinds {
		probe := listProbe
		if k.resource == listProbe.Resource {
			probe = authzv1.ResourceAttributes{Verb: "list", Resource: "pods"}
		}
		tok := saToken(t, ns, "no-"+k.resource, readRules(k.resource), probe)
		cases = append(cases, badCase{name: "forbidden " + k.resource, args: with("guard"), kubeconfig: "token:" + tok, code: 1,
			msg: "read " + k.resource + " in", also: "forbidden"})
	}
	// And a mutating run missing the pods: its Lease is all it writes.
	runner := saToken(t, ns, "runner-no-pods", append(readRules("pods"), writeRules...), listProbe)
	cases = append(cases, badCase{name: "forbidden pods on run", args: with("run", "--yes"), kubeconfig: "token:" + runner, code: 1,
		msg: "read pods in", also: "forbidden", leaseOnly: true})

	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := env.StartFaultProxyWith(t, int64(i), testenv.ProxyOptions{PassCredentials: strings.HasPrefix(c.kubeconfig, "token:")})
			p.Set(c.faults)
			kc := badKubeconfig(t, p, c.kubeconfig)
			args := []string{c.args[0], "--kubeconfig", kc, "--log-format", "json", "--log-level", "error"}
			if c.args[0] != "explain" && c.args[0] != "restore" { // the commands that take no Lease
				args = append(args, "--lock-namespace", ns)
			}
			args = append(args, c.args[1:]...)
			if c.file != "" {
				path := filepath.Join(t.TempDir(), "janitor.yaml")
				if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			var out, errOut strings.Builder
			code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
				LookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }})
			stderr := errOut.String()
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("want exactly one line starting with \"error: \", got %q", stderr)
			}
			for _, m := range []string{c.msg, c.also} {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr %q does not say %q", stderr, m)
				}
			}
			if out.Len() > 0 {
				t.Errorf("printed a report: %q", out.String())
			}
			writes := p.Writes()
			if c.leaseOnly {
				writes = claimWrites(writes)
				leaseReleased(t, ns)
			}
			if len(writes) > 0 {
				t.Errorf("writes reached the API server: %v", writes)
			}
			if tok, ok := strings.CutPrefix(c.kubeconfig, "token:"); ok && strings.Contains(stderr, tok) {
				t.Errorf("the token leaked into the error")
			}
		})
	}
	// Nothing any case did reached the claims.
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "ws-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Annotations["pvc-janitor.io/orphaned-since"]) > 0 || c.Labels["pvc-janitor.io/phase"] != "" || len(snapshots(t, f, ns)) > 0 {
		t.Fatalf("a bad invocation changed the cluster: %v %v", c.Annotations, c.Labels)
	}
	t.Logf("%d bad-input cases", len(cases))
}

// badKubeconfig returns the kubeconfig a case runs with.
func badKubeconfig(t *testing.T, p *testenv.FaultProxy, mode string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(s string) string {
		path := filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	switch {
	case mode == "":
		return p.Kubeconfig
	case mode == "missing":
		return filepath.Join(dir, "nope")
	case mode == "broken":
		return write("{not yaml: [")
	case mode == "empty":
		return write("apiVersion: v1\nkind: Config\n")
	case mode == "no-cluster":
		return write("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: gone, user: u}\nusers:\n- name: u\n  user: {token: t}\n")
	case mode == "unreachable":
		return write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: x\n  cluster: {server: 'http://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: x, user: u}\nusers:\n- name: u\n  user: {token: t}\n")
	case strings.HasPrefix(mode, "token:"):
		return p.TokenKubeconfig(t, strings.TrimPrefix(mode, "token:"))
	}
	t.Fatalf("unknown kubeconfig mode %q", mode)
	return ""
}

// TestSecretsNeverLogged runs the commands as processes with --log-level
// debug, with a known ServiceAccount token, the admin's client key, a
// Pushgateway URL with credentials and a webhook URL with a secret path
// (as flags, in the environment and in a config file; reachable, down and
// malformed), and failing variants (rejected token, server errors through
// the fault proxy, broken kubeconfig, bad config): no token, key, password
// or webhook path may appear anywhere in stdout or stderr.
func TestSecretsNeverLogged(t *testing.T) {
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-a", "a", "")
	orphan(t, f, ns, "ws-b", "b", "")
	admin := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	token := saToken(t, ns, "secret-admin", admin, authzv1.ResourceAttributes{Verb: "delete", Resource: "persistentvolumeclaims"})
	tokenKC := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(tokenKC, token); err != nil {
		t.Fatal(err)
	}
	p := env.StartFaultProxyWith(t, 7, testenv.ProxyOptions{PassCredentials: true})
	p.Set(testenv.Faults{Rate500: 0.2, Rate429: 0.1, RateReset: 0.05, RateWatchCut: 0.5, WatchOpen: true})
	proxyKC := p.TokenKubeconfig(t, token)
	const rejected = "rejected-token-0123456789abcdefghijklmnop"
	rejectedKC := p.TokenKubeconfig(t, rejected)
	// A Pushgateway and a Slack-style webhook that record what reaches
	// them (so the test knows the secrets were used), and unreachable ones
	// (so the error paths run too).
	var pushes, posts atomic.Int32
	pushSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); ok && u == "janitor" && p == "pushpass-5ecret" {
			pushes.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer pushSrv.Close()
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/hooksecret-0123456789") {
			posts.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer hookSrv.Close()
	pushURL := strings.Replace(pushSrv.URL, "http://", "http://janitor:pushpass-5ecret@", 1)
	hookURL := hookSrv.URL + "/services/T0001/B0001/hooksecret-0123456789"
	const pushDown = "http://janitor:pushpass-5ecret@127.0.0.1:1/"
	const hookDown = "http://127.0.0.1:1/services/T0001/B0001/hooksecret-0123456789"
	brokenKC := filepath.Join(t.TempDir(), "broken")
	_ = os.WriteFile(brokenKC, []byte("users:\n- name: u\n  user:\n    token: "+rejected+"\n  bad: [\n"), 0o600)
	goodConfig := filepath.Join(t.TempDir(), "janitor.yaml")
	_ = os.WriteFile(goodConfig, []byte("pushgateway: "+pushDown+"\nnotify-webhook: "+hookDown+"\n"), 0o600)
	badConfig := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(badConfig, []byte("pushgateway: "+pushDown+"\nnotify-webhook: "+hookDown+"\nnotify-webhok: "+hookDown+"\n"), 0o600)

	secrets := map[string]string{"token": token, "token payload": strings.Split(token, ".")[1], "token signature": strings.Split(token, ".")[2],
		"rejected token": rejected, "pushgateway password": "pushpass-5ecret", "webhook path": "hooksecret-0123456789"}
	// The admin kubeconfig's client key and certificate.
	raw, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name, ai := range raw.AuthInfos {
		if len(ai.ClientKeyData) > 0 {
			secrets["client key of "+name] = base64.StdEncoding.EncodeToString(ai.ClientKeyData)[:40]
			secrets["client key PEM of "+name] = strings.Split(string(ai.ClientKeyData), "\n")[1]
		}
		if ai.ClientKey != "" {
			key, _ := os.ReadFile(ai.ClientKey)
			secrets["client key file of "+name] = strings.Split(string(key), "\n")[1]
		}
		if ai.Token != "" {
			secrets["admin token"] = ai.Token
		}
	}

	base := []string{"-n", ns, "-l", wsSel, "--workspace-label", "workspace", "--min-age", "0s", "--grace-period", "0s",
		"--lock-namespace", ns, "--log-level", "debug", "--api-timeout", "5s"}
	// Only the commands that snapshot take --snapshot-timeout.
	const snapTimeout = "--snapshot-timeout=20s"
	type proc struct {
		args []string
		env  []string
		code int // the exit code it must have; -1: any
	}
	envSecrets := []string{"JANITOR_PUSHGATEWAY=" + pushURL, "JANITOR_NOTIFY_WEBHOOK=" + hookURL}
	runs := []proc{
		{append([]string{"scan", "--kubeconfig", tokenKC, "--log-format", "json", "-o", "json", "--pushgateway", pushURL, "--notify-webhook", hookURL}, base...), nil, 0},
		{append([]string{"guard", snapTimeout, "--kubeconfig", proxyKC, "--log-format", "console", "-o", "yaml"}, base...), envSecrets, -1},
		// Under faults, the release of its Lease can be lost, which would
		// hold the next run off for --lock-duration: its own Lease.
		{append(append([]string{"snapshot", snapTimeout, "--kubeconfig", proxyKC, "--log-format", "json", "-o", "wide"}, base...), "--lock-namespace", env.Namespace(t)), envSecrets, -1},
		{append([]string{"run", snapTimeout, "--yes", "--kubeconfig", tokenKC, "--log-format", "console", "-o", "json", "--max-deletion-percent", "100",
			"--pushgateway", pushDown, "--notify-webhook", hookDown}, base...), nil, 0},
		{append([]string{"scan", "--kubeconfig", env.Kubeconfig, "--log-format", "json", "-o", "table", "--config", goodConfig}, base...), nil, 0},
		{append([]string{"run", snapTimeout, "--yes", "--kubeconfig", rejectedKC, "--log-format", "json"}, base...), envSecrets, 1},
		{append([]string{"run", snapTimeout, "--yes", "--kubeconfig", rejectedKC, "--log-format", "console", "--config", goodConfig}, base...), nil, 1},
		{append([]string{"scan", "--kubeconfig", brokenKC, "--log-format", "json"}, base...), envSecrets, 2},
		{append([]string{"scan", "--kubeconfig", tokenKC, "--config", badConfig}, base...), nil, 2},
		{append([]string{"scan", "--kubeconfig", tokenKC, "--pushgateway", "https://janitor:pushpass-5ecret@"}, base...), nil, 2},
		{append([]string{"scan", "--kubeconfig", tokenKC, "--pushgateway", "https://janitor:pushpass-5ecret@push.example/x?hooksecret-0123456789"}, base...), nil, 2},
		{append([]string{"run", snapTimeout, "--yes", "--kubeconfig", tokenKC, "--notify-webhook", "ftp://hooks.example/hooksecret-0123456789"}, base...), nil, 2},
		{append([]string{"guard", snapTimeout, "--kubeconfig", tokenKC, "--context", "nope"}, base...), envSecrets, 2},
	}
	var all strings.Builder
	for i, r := range runs {
		cmd := exec.Command(binary(t), r.args...)
		cmd.Env = append([]string{"HOME=" + t.TempDir()}, r.env...)
		out, err := cmd.CombinedOutput()
		code := exitCode(err)
		if r.code >= 0 && code != r.code {
			t.Errorf("process %d (janitor %s): exit %d, want %d:\n%s", i, r.args[0], code, r.code, out)
		}
		fmt.Fprintf(&all, "--- process %d (janitor %s)\n%s\n", i, r.args[0], out) // the command line holds the secrets
	}
	text := all.String()
	for what, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			i := strings.Index(text, s)
			t.Errorf("the %s appears in the output: …%s…", what, text[max(0, i-200):i])
		}
	}
	// The runs did run: reports, pushes, notifications, a deletion, the
	// rejection.
	if pushes.Load() == 0 || posts.Load() == 0 {
		t.Errorf("%d pushes with the credentials and %d webhook posts: the secrets were not used", pushes.Load(), posts.Load())
	}
	if !strings.Contains(text, `"level":"debug"`) || !strings.Contains(text, "Unauthorized") || !strings.Contains(text, `"kind": "Report"`) {
		t.Errorf("the runs did not log at debug level, hit the rejection, or print reports:\n%s", text)
	}
	if exists(t, f, ns, "ws-a") {
		t.Errorf("the run did not reap: the test did not exercise the whole pipeline")
	}
	t.Logf("%d processes, %d bytes of output checked for %d secrets (%d pushes, %d webhook posts); proxy injected %s",
		len(runs), len(text), len(secrets), pushes.Load(), posts.Load(), testenv.FormatCounts(p.InjectedByKind()))
}
