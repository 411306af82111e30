//go:build integration

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// fleetReport is the part of a fleet report the tests read.
type fleetReport struct {
	Cluster  string
	Summary  struct{ Claims int }
	Claims   []struct{ Cluster, Namespace, Name, State, Action, Reason string }
	Clusters []struct {
		Name     string
		ExitCode int
		Error    string
		Summary  *struct{ Claims int }
	}
}

// startSecondCluster starts a second local control plane for the test and
// stops it at cleanup (Stop is idempotent enough for a test that stopped it
// already).
func startSecondCluster(t *testing.T) *testenv.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	two, err := testenv.Start(ctx, testenv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start the second cluster: %v", err)
	}
	t.Logf("second control plane up in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = two.Stop() })
	return two
}

// fleetKubeconfig writes one kubeconfig with a context per cluster, named
// as given, each with its own cluster and user entries.
func fleetKubeconfig(t *testing.T, clusters map[string]*testenv.Cluster) string {
	t.Helper()
	out := clientcmdapi.NewConfig()
	for name, c := range clusters {
		in, err := clientcmd.LoadFromFile(c.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		ctx := in.Contexts[in.CurrentContext]
		out.Clusters[name] = in.Clusters[ctx.Cluster]
		out.AuthInfos[name] = in.AuthInfos[ctx.AuthInfo]
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
		out.CurrentContext = name
	}
	path := filepath.Join(t.TempDir(), "fleet-kubeconfig")
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// sameNamespace creates namespace ns in a cluster that does not have it.
func sameNamespace(t *testing.T, f *testenv.Fixtures, ns string) {
	t.Helper()
	if _, err := f.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func parseFleet(t *testing.T, s string) fleetReport {
	t.Helper()
	var r fleetReport
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, s)
	}
	return r
}

// TestFleetTwoClusters is issue 17 on two local control planes and one
// kubeconfig with two contexts, west (the package's cluster) and east (one
// started here): a merged scan shows each cluster's claims once with its
// cluster; a guard fails when either cluster holds data at risk and names
// it; a run acts on both, each under its own blast radius and Lease; with
// east stopped, the run exits 1 with a complete report of west.
func TestFleetTwoClusters(t *testing.T) {
	ctx := context.Background()
	two := startSecondCluster(t)
	kc := fleetKubeconfig(t, map[string]*testenv.Cluster{"west": env, "east": two})
	fw, err := env.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	fe, err := two.NewFixtures()
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	sameNamespace(t, fe, ns)
	lbl := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces"}
	clusters := map[string]*testenv.Fixtures{"west": fw, "east": fe}
	for name, f := range clusters {
		for _, c := range []string{name + "-used", name + "-gone"} {
			if _, err := f.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: c, Labels: lbl}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.Pod(ctx, testenv.PodSpec{Namespace: ns, Name: "p", Claims: []string{name + "-used"}}); err != nil {
			t.Fatal(err)
		}
	}
	janitor := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := runWith(append(args, "--kubeconfig", kc, "--log-format", "json"), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	sel := []string{"-n", ns, "-l", "app.kubernetes.io/part-of=demo-workspaces", "--min-age", "0s", "--grace-period", "0s",
		"--lock-namespace", ns, "--api-timeout", "5s"}
	fleetArgs := func(cmd string, more ...string) []string {
		return append(append([]string{cmd, "--context", "west", "--context", "east"}, sel...), more...)
	}

	t.Run("usage", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			msg  string
		}{
			{fleetArgs("reap"), "reap over several clusters deletes without a prompt: pass --yes"},
			{fleetArgs("run"), "run over several clusters"},
			{fleetArgs("prune", "--keep-last", "1"), "prune over several clusters"},
			{[]string{"restore", "--context", "west,east", "-n", ns, "x"}, "restore acts on one claim in one cluster"},
			{[]string{"scan", "--context", "north,east", "-n", ns}, `context "north" not found in the kubeconfig`},
			{[]string{"scan", "--context", "west", "--all-contexts", "-n", ns}, "mutually exclusive"},
		} {
			code, out, stderr := janitor(c.args...)
			if code != 2 || !strings.Contains(stderr, c.msg) || out != "" {
				t.Errorf("%v: exit %d, want 2 with %q\n%s%s", c.args, code, c.msg, out, stderr)
			}
		}
	})

	t.Run("scan", func(t *testing.T) {
		start := time.Now()
		code, out, stderr := janitor(fleetArgs("scan", "--dry-run", "-o", "json")...)
		t.Logf("fleet scan --dry-run: %s", time.Since(start).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("fleet scan: exit %d\n%s", code, stderr)
		}
		r := parseFleet(t, out)
		seen := map[string]int{}
		for _, c := range r.Claims {
			seen[c.Cluster+"/"+c.Name]++
			if !strings.HasPrefix(c.Name, c.Cluster+"-") {
				t.Errorf("claim %s carries cluster %q", c.Name, c.Cluster)
			}
		}
		for _, want := range []string{"west/west-used", "west/west-gone", "east/east-used", "east/east-gone"} {
			if seen[want] != 1 {
				t.Errorf("%s appears %d times, want once (report: %v)", want, seen[want], seen)
			}
		}
		if len(r.Claims) != 4 || r.Summary.Claims != 4 || len(r.Clusters) != 2 || r.Clusters[0].Name != "west" ||
			r.Clusters[1].Name != "east" || r.Clusters[0].Summary == nil || r.Clusters[0].Summary.Claims != 2 {
			t.Errorf("report: %+v", r)
		}
		// The table groups by cluster: a CLUSTER column, a line per cluster.
		code, out, _ = janitor(fleetArgs("scan", "--dry-run")...)
		if code != 0 || !strings.HasPrefix(out, "CLUSTER") || !strings.Contains(out, "cluster west: 2 claims") ||
			!strings.Contains(out, "cluster east: 2 claims") || !strings.Contains(out, "total: 4 claims") {
			t.Errorf("table: exit %d\n%s", code, out)
		}
		// One context: the report of today, without fleet fields.
		code, out, _ = janitor(append([]string{"scan", "--context", "east", "--dry-run", "-o", "json"}, sel...)...)
		if code != 0 || strings.Contains(out, `"clusters"`) || strings.Count(out, `"cluster"`) != 1 || !strings.Contains(out, "east-used") ||
			strings.Contains(out, "west-used") {
			t.Errorf("one context: exit %d\n%s", code, out)
		}
	})

	t.Run("guard", func(t *testing.T) {
		// Only east holds data at risk in this namespace (a claim in use);
		// west's part of it is empty.
		ns2 := env.Namespace(t)
		sameNamespace(t, fe, ns2)
		if _, err := fe.BoundClaim(ctx, testenv.ClaimSpec{Namespace: ns2, Name: "live", Labels: lbl}); err != nil {
			t.Fatal(err)
		}
		if _, err := fe.Pod(ctx, testenv.PodSpec{Namespace: ns2, Name: "p", Claims: []string{"live"}}); err != nil {
			t.Fatal(err)
		}
		// --min-claims 0: west's empty part would fail the gate by default.
		code, out, stderr := janitor("guard", "--all-contexts", "-n", ns2, "-l", "app.kubernetes.io/part-of=demo-workspaces", "--min-claims", "0", "-o", "json")
		if code != 3 || !strings.Contains(stderr, "east: ") || strings.Contains(stderr, "west: ") {
			t.Fatalf("guard with east at risk: exit %d, want 3 naming east\n%s\n%s", code, out, stderr)
		}
		r := parseFleet(t, out)
		if len(r.Claims) != 1 || r.Claims[0].Cluster != "east" || r.Claims[0].Action != "at-risk" ||
			len(r.Clusters) != 2 || r.Clusters[0].Name != "east" || r.Clusters[0].ExitCode != 3 || r.Clusters[1].ExitCode != 0 {
			t.Errorf("guard report: %+v", r)
		}
	})

	t.Run("run", func(t *testing.T) {
		for name, f := range clusters {
			if _, err := f.WaitOrphanedSince(ctx, ns, name+"-gone"); err != nil {
				t.Fatal(err)
			}
		}
		// Mark both orphans (a mark that races the controller manager is
		// left for the next scan), then let the clock pass the marks so
		// that the rescues are cut after them.
		marked := func(c *corev1.PersistentVolumeClaim) bool {
			return c.Annotations["pvc-janitor.io/orphaned-since"] != ""
		}
		var marks []time.Time
		for i := 0; i < 5 && len(marks) < 2; i++ {
			if code, _, stderr := janitor(fleetArgs("scan")...); code != 0 {
				t.Fatalf("fleet scan: exit %d\n%s", code, stderr)
			}
			marks = marks[:0]
			for name, f := range clusters {
				if c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name+"-gone", metav1.GetOptions{}); err == nil && marked(c) {
					m, _ := time.Parse(time.RFC3339, c.Annotations["pvc-janitor.io/orphaned-since"])
					marks = append(marks, m)
				}
			}
		}
		if len(marks) != 2 {
			t.Fatalf("the fleet scan marked %d of 2 orphans", len(marks))
		}
		for _, m := range marks {
			time.Sleep(time.Until(m.Add(1100 * time.Millisecond)))
		}
		// The blast radius is each cluster's: 1 of 2 claims, over the
		// default 25% in both (not 2 of 4 claims of the fleet).
		code, out, stderr := janitor(fleetArgs("run", "--yes", "-o", "json")...)
		if r := parseFleet(t, out); code != 4 || len(r.Clusters) != 2 || r.Clusters[0].ExitCode != 4 || r.Clusters[1].ExitCode != 4 ||
			!strings.Contains(r.Clusters[1].Error, "1 of 2 claims in scope") {
			t.Fatalf("fleet run over the blast radius: exit %d, want 4 in each cluster\n%s\n%s", code, out, stderr)
		}
		start := time.Now()
		code, out, stderr = janitor(fleetArgs("run", "--yes", "--max-deletion-percent", "50", "-o", "json")...)
		t.Logf("fleet run: %s", time.Since(start).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("fleet run: exit %d\n%s\n%s", code, out, stderr)
		}
		r := parseFleet(t, out)
		acted := map[string]string{}
		for _, c := range r.Claims {
			acted[c.Cluster+"/"+c.Name] = c.Action
		}
		for name, f := range clusters {
			if acted[name+"/"+name+"-gone"] != "deleted" {
				t.Errorf("%s-gone: action %q, want deleted (%v)", name, acted[name+"/"+name+"-gone"], acted)
			}
			if err := f.WaitClaimGone(ctx, ns, name+"-gone"); err != nil {
				t.Errorf("%s-gone is still there: %v", name, err)
			}
			if got := snapshotsOf(t, f, ns, name+"-gone"); len(got) != 1 {
				t.Errorf("%s-gone has rescues %v, want one", name, got)
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		// A claim lives in one cluster: the others' "not found" is no
		// failure.
		code, out, stderr := janitor("explain", "--all-contexts", ns+"/west-used", "-o", "json")
		var doc struct {
			Kind   string
			Items  []struct{ Cluster, State string }
			Errors []struct {
				Cluster  string
				ExitCode int
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Kind != "ExplanationList" || len(doc.Items) != 1 ||
			doc.Items[0].Cluster != "west" || doc.Items[0].State != "InUse" || len(doc.Errors) != 1 || doc.Errors[0].Cluster != "east" {
			t.Errorf("explain over the fleet: exit %d %v %+v\n%s\n%s", code, err, doc, out, stderr)
		}
		code, out, _ = janitor("explain", "--context", "west,east", ns+"/west-used")
		if code != 0 || !strings.HasPrefix(out, "Cluster west:\nClaim "+ns+"/west-used: InUse") {
			t.Errorf("explain table: exit %d\n%s", code, out)
		}
		if code, _, _ := janitor("explain", "--all-contexts", ns+"/nobody"); code != 2 {
			t.Errorf("explain of a claim no cluster has: exit %d, want 2", code)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "janitor.prom")
		if code, _, stderr := janitor(fleetArgs("scan", "--dry-run", "--metrics-file", path)...); code != 0 {
			t.Fatalf("fleet scan: exit %d\n%s", code, stderr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`pvc_janitor_claims{cluster="west",command="scan",state="InUse"} 1`,
			`pvc_janitor_claims{cluster="east",command="scan",state="InUse"} 1`, `pvc_janitor_run_success{cluster="east",command="scan"} 1`} {
			if !strings.Contains(string(data), want) {
				t.Errorf("metrics lack %s:\n%s", want, data)
			}
		}
	})

	t.Run("lease held in one cluster", func(t *testing.T) {
		// Each cluster has its own Lease: another run holding west's keeps
		// west out (exit 5, naming the holder) and east runs to the end.
		holder, secs := "cronjob-pod/1/abcdef", int32(300)
		now := metav1.NewMicroTime(time.Now())
		if _, err := fw.Kube.CoordinationV1().Leases(ns).Create(ctx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-janitor", Namespace: ns},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = fw.Kube.CoordinationV1().Leases(ns).Delete(ctx, "pvc-janitor", metav1.DeleteOptions{}) }()
		code, out, stderr := janitor(fleetArgs("scan", "-o", "json")...)
		r := parseFleet(t, out)
		if code != 5 || !strings.Contains(stderr, holder) || len(r.Clusters) != 2 || r.Clusters[0].ExitCode != 5 ||
			r.Clusters[1].ExitCode != 0 || len(r.Claims) != 1 || r.Claims[0].Cluster != "east" {
			t.Errorf("fleet scan with west's lease held: exit %d, want 5 with east's report\n%s\n%s", code, out, stderr)
		}
	})

	t.Run("one cluster stopped", func(t *testing.T) {
		if err := two.Stop(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, out, stderr := janitor(fleetArgs("run", "--yes", "-o", "json")...)
		t.Logf("fleet run with east stopped: %s", time.Since(start).Round(time.Millisecond))
		if code != 1 || !strings.Contains(stderr, "east: ") {
			t.Fatalf("fleet run with east stopped: exit %d, want 1 naming east\n%s\n%s", code, out, stderr)
		}
		r := parseFleet(t, out)
		if len(r.Clusters) != 2 || r.Clusters[1].Name != "east" || r.Clusters[1].ExitCode != 1 || r.Clusters[1].Error == "" ||
			r.Clusters[1].Summary != nil || r.Clusters[0].ExitCode != 0 || r.Clusters[0].Summary == nil {
			t.Errorf("blocks: %+v", r.Clusters)
		}
		if len(r.Claims) != 1 || r.Claims[0].Cluster != "west" || r.Claims[0].Name != "west-used" || r.Claims[0].State != "InUse" {
			t.Errorf("west's claims: %+v", r.Claims)
		}
	})
}
