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

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cli"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// explained is the part of janitor explain -o json the tests read.
type explained struct {
	Kind   string
	State  string
	Reason string
	Rules  []struct {
		Number  int
		State   string
		Matched bool
		Why     string
	}
	Snapshots []struct{ Name, Role string }
	Next      struct{ Action string }
	Capacity  int64
}

// TestExplainEachStateOfTheDemoFleet (issue 16): janitor explain shows each
// state the demo fleet seeds (the twelve of evidence) with its deciding
// evidence and every rule of the table, one subtest per state; it writes
// nothing.
func TestExplainEachStateOfTheDemoFleet(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	want, err := testenv.SeedDemo(ctx, f, ns, env.DriverStateDir)
	if err != nil {
		t.Fatal(err)
	}
	evidence := map[string]string{
		"Terminating": "being deleted", "Held": "held by annotation pvc-janitor.io/hold", "Unbound": "not Bound",
		"InUse": "used by", "Young": "younger than min-age", "Attached": "still attached to node node-1",
		"Rescued": "rescued by snapshot " + ns + "/ws-judy-backup", "Superseded": "superseded by claim " + ns + "/ws-alice-tuesday",
		"SnapshotFailed": "volume is corrupted", "Snapshotting": "is not ready yet", "Grace": "within the grace period",
		"Orphaned": "orphaned since",
	}
	byState := map[string]string{}
	for name, st := range want {
		if byState[st] == "" || name < byState[st] {
			byState[st] = name
		}
	}
	args := func(claim string) []string {
		a := demoArgs("explain", ns)
		// explain takes no lock: drop --lock-namespace.
		return append(a[:len(a)-2], ns+"/"+claim, "-o", "json")
	}
	// Young and Grace last only seconds of the demo's short min-age and
	// grace period: their explanations use long ones (the last flag wins),
	// so a slow seeding or a busy machine cannot age them out.
	longer := map[string][]string{"Young": {"--min-age", "1h"}, "Grace": {"--grace-period", "1h"}}
	for st, claim := range byState {
		t.Run(st, func(t *testing.T) {
			code, out, stderr := run(t, append(args(claim), longer[st]...)...)
			if code != 0 {
				t.Fatalf("explain %s: exit %d: %s", claim, code, stderr)
			}
			var e explained
			if err := json.Unmarshal([]byte(out), &e); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if e.Kind != "Explanation" || e.State != st || len(e.Rules) != len(classify.States) || e.Next.Action == "" {
				t.Fatalf("%s: %+v", claim, e)
			}
			matched := 0
			for i, r := range e.Rules {
				if r.Matched {
					matched++
					if r.State != st || !strings.Contains(r.Why, evidence[st]) {
						t.Errorf("%s: rule %d %s matched with %q, want %s with %q", claim, i+1, r.State, r.Why, st, evidence[st])
					}
				}
			}
			if matched != 1 {
				t.Errorf("%s: %d rules matched", claim, matched)
			}
			if st == "Rescued" {
				ok := false
				for _, s := range e.Snapshots {
					ok = ok || (s.Name == "ws-judy-backup" && strings.Contains(s.Role, "the rescue"))
				}
				if !ok {
					t.Errorf("ws-judy's snapshots %+v: want ws-judy-backup as the rescue", e.Snapshots)
				}
			}
		})
	}
	for st := range evidence {
		if byState[st] == "" {
			t.Errorf("the demo fleet seeds no %s claim", st)
		}
	}
	// The table for a person, and nothing written by any of it.
	code, out, _ := run(t, append(args("ws-olivia")[:len(args("ws-olivia"))-2], "-o", "table")...)
	if code != 0 || !strings.Contains(out, "Rules (docs/spec.md#states") || !strings.Contains(out, "Next: ") {
		t.Errorf("explain table: exit %d\n%s", code, out)
	}
	code, out, stderr := run(t, append(demoArgs("scan", ns), "--dry-run", "-o", "json")...)
	if code != 0 {
		t.Fatalf("scan: %d %s", code, stderr)
	}
	for _, c := range parse(t, out).Claims {
		if c.Action == "marked" {
			t.Errorf("%s was marked: explain wrote", c.Name)
		}
	}
	if code, _, stderr := run(t, "explain", ns+"/nope", "-o", "json"); code != 2 || !strings.Contains(stderr, "not found in scope") {
		t.Errorf("explain of an unknown claim: exit %d: %s", code, stderr)
	}
}

// TestReportSizesAndPrices (issue 16): the report's sizes and reclaim
// policies are the objects'; reaping a claim whose volume is Retain frees
// nothing and names the Released volume; the same prices from flags, the
// environment and a config file give the same money.
func TestReportSizesAndPrices(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	orphan(t, f, ns, "ws-kept", "kept", "") // a hand-made PV: Retain
	labels := map[string]string{"app.kubernetes.io/part-of": "demo-workspaces", "workspace": "freed"}
	if _, err := f.ProvisionedClaim(ctx, testenv.ClaimSpec{Namespace: ns, Name: "ws-freed", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	idle(t, f, ns, "ws-freed")
	if code, _, stderr := run(t, snapArgs(ns)...); code != 0 {
		t.Fatalf("snapshot: %d %s", code, stderr)
	}
	code, out, stderr := run(t, reapArgs("reap", ns, "--yes", "--max-deletion-percent", "100")...)
	if code != 0 {
		t.Fatalf("reap: %d %s\n%s", code, out, stderr)
	}
	var r struct {
		Summary struct {
			FreedBytes, UnfreedBytes int64
			ReleasedVolumes          []string
		}
		Claims []struct {
			Name, Action, StorageClass, ReclaimPolicy, VolumeName string
			Capacity                                              int64
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	const gi = 1 << 30
	for _, c := range r.Claims {
		wantClass, wantPolicy := testenv.StorageClassName, "Retain"
		if c.Name == "ws-freed" {
			wantClass, wantPolicy = testenv.ProvisionedStorageClassName, "Delete"
		}
		if c.Action != "deleted" || c.Capacity != gi || c.StorageClass != wantClass || c.ReclaimPolicy != wantPolicy {
			t.Errorf("%s: %+v, want deleted, 1Gi, %s, %s", c.Name, c, wantClass, wantPolicy)
		}
	}
	if r.Summary.FreedBytes != gi || r.Summary.UnfreedBytes != gi || len(r.Summary.ReleasedVolumes) != 1 ||
		r.Summary.ReleasedVolumes[0] != "pv-"+ns+"-ws-kept" {
		t.Errorf("summary %+v: want 1Gi freed, 1Gi not freed, pv-%s-ws-kept Released", r.Summary, ns)
	}

	// Prices: flags, environment, file.
	scanEnv := func(environ map[string]string, extra ...string) string {
		var out, errOut bytes.Buffer
		args := append([]string{"scan", "-n", ns, "--workspace-label", "workspace", "--min-age", "0s", "--dry-run", "-o", "json",
			"--kubeconfig", env.Kubeconfig, "--log-format", "json"}, extra...)
		code := cli.Run(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut,
			LookupEnv: func(k string) (string, bool) { v, ok := environ[k]; return v, ok }})
		if code != 0 {
			t.Fatalf("scan %v: %d %s", extra, code, errOut.String())
		}
		var r struct {
			Summary struct{ Cost *map[string]float64 }
		}
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Summary.Cost == nil {
			return ""
		}
		b, _ := json.Marshal(*r.Summary.Cost)
		return string(b)
	}
	scan := func(extra ...string) string { return scanEnv(nil, extra...) }
	// Something still costs: a new orphan of each kind of volume.
	orphan(t, f, ns, "ws-new", "new", "")
	fromFlags := scan("--price", testenv.StorageClassName+"=0.25", "--price", "*=0.1", "--snapshot-price", "0.05")
	if !strings.Contains(fromFlags, `"orphanedMonthly":0.25`) {
		t.Errorf("cost from flags %s: want 0.25 for the 1Gi orphan", fromFlags)
	}
	environ := map[string]string{"JANITOR_PRICE": testenv.StorageClassName + "=0.25,*=0.1", "JANITOR_SNAPSHOT_PRICE": "0.05"}
	if fromEnv := scanEnv(environ); fromEnv != fromFlags {
		t.Errorf("cost from the environment %s, from flags %s", fromEnv, fromFlags)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("price:\n- "+testenv.StorageClassName+"=0.25\n- \"*=0.1\"\nsnapshot-price: \"0.05\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fromFile := scan("--config", file); fromFile != fromFlags {
		t.Errorf("cost from the file %s, from flags %s", fromFile, fromFlags)
	}
	if noPrice := scan(); noPrice != "" {
		t.Errorf("cost without prices: %s, want none", noPrice)
	}
}
