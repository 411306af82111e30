//go:build integration

package examplestest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestGateScriptLint checks the teardown gate script: executable, bash with
// `set -euo pipefail`, `bash -n` clean and shellcheck clean (a missing
// shellcheck fails the test: make tools installs it).
func TestGateScriptLint(t *testing.T) {
	script := example(t, "teardown-gate.sh")
	st, err := os.Stat(script)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o111 == 0 {
		t.Errorf("%s is not executable", script)
	}
	text, _ := readFileString(script)
	if !strings.HasPrefix(text, "#!/usr/bin/env bash\n") {
		t.Error("the script must start with #!/usr/bin/env bash")
	}
	if !regexp.MustCompile(`(?m)^set -euo pipefail$`).MatchString(text) {
		t.Error("the script must `set -euo pipefail`")
	}
	if !strings.Contains(text, "guard --rescue") || !strings.Contains(text, "--export") {
		t.Error("the script must run janitor guard --rescue --export")
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Errorf("bash -n: %v\n%s", err, out)
	}
	sc, err := testenv.LintTool("shellcheck")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sc, "--shell=bash", "--severity=style", script).CombinedOutput(); err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// platform returns the labels a claim needs to be selected by
// workspace-platform.yaml, and its workspace label key.
func platform(t *testing.T) (map[string]string, string) {
	t.Helper()
	cfg, err := loadConfig(t, example(t, "workspace-platform.yaml"), config.CommandGuard)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := labels.ConvertSelectorToLabelsMap(cfg.SelectorString)
	if err != nil {
		t.Fatalf("workspace-platform.yaml's selector %q is not a list of key=value: %v", cfg.SelectorString, err)
	}
	return sel, cfg.WorkspaceLabel
}

// gateEnv is the environment of one run of the script: the janitor on
// PATH, the local cluster's kubeconfig, the namespace as the scope and the
// lock namespace, the bundle in the test's folder (bundlePath), and the
// extra settings.
func gateEnv(t *testing.T, ns string, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	return append([]string{
		"PATH=" + filepath.Dir(janitorBin(t)) + ":/usr/bin:/bin",
		"HOME=" + home,
		"KUBECONFIG=" + env.Kubeconfig,
		"GATE_NAMESPACES=" + ns,
		"GATE_LOCK_NAMESPACE=" + ns,
		"GATE_EXPORT=" + filepath.Join(home, "bundle.yaml"),
	}, extra...)
}

// bundlePath is where the gate of environ exports (its last GATE_EXPORT).
func bundlePath(environ []string) string {
	var file string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "GATE_EXPORT="); ok {
			file = v
		}
	}
	return file
}

// gateArgs make a claim orphaned at once and keep waits short.
var gateArgs = []string{"--min-age", "0s", "--grace-period", "0s", "--snapshot-timeout", "1m", "--api-timeout", "30s", "--log-format", "console"}

func runGate(t *testing.T, environ []string, args ...string) result {
	t.Helper()
	start := time.Now()
	r := run(t, environ, "bash", append([]string{example(t, "teardown-gate.sh")}, args...)...)
	t.Logf("teardown-gate.sh: exit %d in %s", r.code, time.Since(start).Round(time.Millisecond))
	return r
}

// workspaceClaim creates a bound claim labelled as the workspace platform
// labels them (the script's default selector) and waits until it is unused.
func workspaceClaim(t *testing.T, f *testenv.Fixtures, ns, name, workspace string, extra map[string]string) {
	t.Helper()
	sel, wsLabel := platform(t)
	l := map[string]string{wsLabel: workspace}
	for k, v := range sel {
		l[k] = v
	}
	for k, v := range extra {
		l[k] = v
	}
	ctx := context.Background()
	if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: name, Labels: l}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WaitUnused(ctx, ns, name); err != nil {
		t.Fatal(err)
	}
}

// readySnapshotOf fails unless exactly one VolumeSnapshot of claim exists in
// ns and it is ready.
func readySnapshotOf(t *testing.T, f *testenv.Fixtures, ns, claim string) {
	t.Helper()
	l, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range l.Items {
		if src := s.Spec.Source.PersistentVolumeClaimName; src != nil && *src == claim {
			n++
			if !testenv.Ready(&s) {
				t.Errorf("snapshot %s of %s is not ready", s.Name, claim)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d snapshots of %s, want exactly 1", n, claim)
	}
}

// TestTeardownGate runs examples/teardown-gate.sh, with its default
// selector and workspace label (those of workspace-platform.yaml), against
// seeded claims on the local cluster.
func TestTeardownGate(t *testing.T) {
	f, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}

	// An orphaned claim: the gate rescues it, waits for the snapshot,
	// exports it (its content Retain, the bundle names it) and opens. The
	// claim stays (the gate never deletes). A second run finds the same
	// snapshot and opens again.
	t.Run("rescues the orphan, exports it and opens", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		workspaceClaim(t, f, ns, "ws-alice-1", "alice", nil)
		report := filepath.Join(t.TempDir(), "report.txt")
		environ := gateEnv(t, ns, "GATE_REPORT="+report)
		r := runGate(t, environ, gateArgs...)
		if r.code != 0 || !strings.Contains(r.stderr, "GATE OPEN") || !strings.Contains(r.stderr, "bundle: "+bundlePath(environ)) {
			t.Fatalf("exit %d, want 0 (GATE OPEN) naming the bundle\n%s%s", r.code, r.stdout, r.stderr)
		}
		readySnapshotOf(t, f, ns, "ws-alice-1")
		exportedOnly(t, f, bundlePath(environ), ns, "ws-alice-1")
		if _, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "ws-alice-1", metav1.GetOptions{}); err != nil {
			t.Errorf("the gate must not delete claims: %v", err)
		}
		saved, _ := readFileString(report)
		if !strings.Contains(saved, "ws-alice-1") || !strings.Contains(saved, "Rescued") || saved != r.stdout {
			t.Errorf("GATE_REPORT %q does not hold the report %q", saved, r.stdout)
		}
		r = runGate(t, gateEnv(t, ns), gateArgs...)
		if r.code != 0 {
			t.Fatalf("second run: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
		}
		readySnapshotOf(t, f, ns, "ws-alice-1")
	})

	// A claim on hold: a teardown would lose it, so the gate stays shut
	// with exit 3 and lists it first; the orphan beside it is rescued all
	// the same.
	t.Run("a held claim keeps it shut", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		workspaceClaim(t, f, ns, "ws-bob-1", "bob", nil)
		workspaceClaim(t, f, ns, "ws-carol-1", "carol", map[string]string{"pvc-janitor.io/hold": "true"})
		r := runGate(t, gateEnv(t, ns, "GATE_OUTPUT=json"), gateArgs...)
		if r.code != 3 || !strings.Contains(r.stderr, "GATE SHUT (exit 3)") {
			t.Fatalf("exit %d, want 3 (GATE SHUT)\n%s%s", r.code, r.stdout, r.stderr)
		}
		carol, bob := strings.Index(r.stdout, `"ws-carol-1"`), strings.Index(r.stdout, `"ws-bob-1"`)
		if carol < 0 || bob < 0 || carol > bob || !strings.Contains(r.stdout, `"Held"`) {
			t.Errorf("the report must list the Held claim first:\n%s", r.stdout)
		}
		readySnapshotOf(t, f, ns, "ws-bob-1")
	})

	// Another run holds the Lease (the CronJob, say): the gate retries, then
	// stays shut with the janitor's exit 5.
	t.Run("a lease held by another run keeps it shut", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		holder, secs := "cronjob-pod/1/abcdef", int32(300)
		now := metav1.NewMicroTime(time.Now())
		_, err := f.Kube.CoordinationV1().Leases(ns).Create(context.Background(), &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-janitor", Namespace: ns},
			Spec: coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		environ := gateEnv(t, ns, "GATE_LOCK_RETRIES=1", "GATE_LOCK_WAIT=0")
		r := runGate(t, environ, gateArgs...)
		if r.code != 5 || !strings.Contains(r.stderr, "retry 1/1") || !strings.Contains(r.stderr, "GATE SHUT (exit 5)") {
			t.Fatalf("exit %d, want 5 after one retry\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, holder) {
			t.Errorf("the janitor does not name the holder:\n%s", r.stderr)
		}
		if _, err := os.Stat(bundlePath(environ)); !os.IsNotExist(err) {
			t.Errorf("a gate kept shut by the Lease wrote the bundle: %v", err)
		}
	})

	// A check that cannot run is a shut gate, never a pass. (Without
	// GATE_LOCK_NAMESPACE the Lease is in default, the janitor's and the
	// chart's namespace.)
	t.Run("a configuration error keeps it shut", func(t *testing.T) {
		t.Parallel()
		r := runGate(t, gateEnv(t, "default", "GATE_SELECTOR=app in (", "GATE_LOCK_NAMESPACE="), gateArgs...)
		if r.code != 2 || !strings.Contains(r.stderr, "GATE SHUT (exit 2)") {
			t.Fatalf("exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "--lock-namespace default ") {
			t.Errorf("GATE_LOCK_NAMESPACE unset: the Lease is not in default\n%s", r.stderr)
		}
	})
	t.Run("an empty selector keeps it shut", func(t *testing.T) {
		t.Parallel()
		r := runGate(t, gateEnv(t, "default", "GATE_SELECTOR="), gateArgs...)
		if r.code != 2 || !strings.Contains(r.stderr, "GATE SHUT") {
			t.Fatalf("exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	// An empty scope (a selector that matches nothing looks the same) keeps
	// it shut: guard's --min-claims is 1 by default; --min-claims 0 lets a
	// cluster without workspaces pass (docs/spec.md#guard-min-claims).
	t.Run("an empty scope keeps it shut", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		r := runGate(t, gateEnv(t, ns), gateArgs...)
		if r.code != 3 || !strings.Contains(r.stderr, "GATE SHUT (exit 3)") || !strings.Contains(r.stderr, "min-claims") {
			t.Fatalf("exit %d, want 3 naming --min-claims\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runGate(t, gateEnv(t, ns), append(gateArgs, "--min-claims", "0")...)
		if r.code != 0 || !strings.Contains(r.stderr, "GATE OPEN") {
			t.Fatalf("--min-claims 0: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("a missing janitor keeps it shut", func(t *testing.T) {
		t.Parallel()
		r := runGate(t, gateEnv(t, "default", "GATE_JANITOR=janitor-not-installed"), gateArgs...)
		if r.code != 127 || !strings.Contains(r.stderr, "GATE SHUT") {
			t.Fatalf("exit %d, want 127\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	// A fleet: GATE_CONTEXTS names two clusters, one of them unreachable.
	// The reachable one is rescued all the same; the gate stays shut with
	// exit 1 and the report names the unreachable cluster. The reachable
	// one alone opens it.
	t.Run("a fleet with an unreachable cluster keeps it shut", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		workspaceClaim(t, f, ns, "ws-dave-1", "dave", nil)
		kc := fleetKubeconfig(t)
		// A bundle is of one cluster: GATE_EXPORT with contexts is refused.
		r := runGate(t, gateEnv(t, ns, "KUBECONFIG="+kc, "GATE_CONTEXTS=live"), gateArgs...)
		if r.code != 2 || !strings.Contains(r.stderr, "GATE_EXPORT: a bundle is of one cluster") {
			t.Fatalf("GATE_EXPORT with GATE_CONTEXTS: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runGate(t, gateEnv(t, ns, "KUBECONFIG="+kc, "GATE_CONTEXTS=live,dead", "GATE_OUTPUT=table", "GATE_EXPORT="), append(gateArgs, "--api-timeout", "2s")...)
		if r.code != 1 || !strings.Contains(r.stderr, "GATE SHUT (exit 1)") || !strings.Contains(r.stdout, "cluster dead: exit 1") ||
			!strings.Contains(r.stdout, "cluster live: 1 claim") || !strings.HasPrefix(r.stdout, "CLUSTER") {
			t.Fatalf("exit %d, want 1 naming the dead cluster\n%s%s", r.code, r.stdout, r.stderr)
		}
		readySnapshotOf(t, f, ns, "ws-dave-1")
		r = runGate(t, gateEnv(t, ns, "KUBECONFIG="+kc, "GATE_CONTEXTS=live", "GATE_EXPORT="), gateArgs...)
		if r.code != 0 || !strings.Contains(r.stderr, "GATE OPEN") {
			t.Fatalf("live alone: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = runGate(t, gateEnv(t, ns, "KUBECONFIG="+kc, "GATE_CONTEXTS=live", "GATE_ALL_CONTEXTS=1", "GATE_EXPORT="), gateArgs...)
		if r.code != 2 {
			t.Fatalf("GATE_CONTEXTS and GATE_ALL_CONTEXTS: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("an unreachable cluster keeps it shut", func(t *testing.T) {
		t.Parallel()
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		data := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
			"users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
		if err := os.WriteFile(kc, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runGate(t, gateEnv(t, "default", "KUBECONFIG="+kc), append(gateArgs, "--api-timeout", "2s")...)
		if r.code == 0 || r.code == 3 || !strings.Contains(r.stderr, "GATE SHUT") {
			t.Fatalf("exit %d, want a runtime error\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// exportedOnly fails unless the bundle at file holds exactly one copy, the
// snapshot of claim in ns, and that snapshot's content is Retain.
func exportedOnly(t *testing.T, f *testenv.Fixtures, file, ns, claim string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the bundle: %v", err)
	}
	b, err := bundle.Decode(data)
	if err != nil {
		t.Fatalf("the bundle: %v\n%s", err, data)
	}
	if len(b.Copies) != 1 || b.Copies[0].Namespace != ns || b.Copies[0].SourceClaim != claim {
		t.Fatalf("the bundle holds %d copies, want the one of %s/%s\n%s", len(b.Copies), ns, claim, data)
	}
	ctx := context.Background()
	vs, err := f.Snap.SnapshotV1().VolumeSnapshots(ns).Get(ctx, b.Copies[0].Snapshot, metav1.GetOptions{})
	if err != nil || vs.Status == nil || vs.Status.BoundVolumeSnapshotContentName == nil {
		t.Fatalf("the exported snapshot %s: %v", b.Copies[0].Snapshot, err)
	}
	vc, err := f.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if vc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain {
		t.Errorf("the exported snapshot's content %s is %s, want Retain", vc.Name, vc.Spec.DeletionPolicy)
	}
}

// fleetKubeconfig writes a kubeconfig with two contexts: live (the local
// cluster) and dead (nothing listens there).
func fleetKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	cfg.Contexts = map[string]*clientcmdapi.Context{"live": {Cluster: cur.Cluster, AuthInfo: cur.AuthInfo}, "dead": {Cluster: "dead", AuthInfo: cur.AuthInfo}}
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.CurrentContext = "live"
	path := filepath.Join(t.TempDir(), "fleet-kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
