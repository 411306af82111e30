//go:build integration

package charttest_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/metrics"
)

// PrometheusOperatorVersion is the prometheus-operator whose PrometheusRule
// CRD the server-side dry run installs (from its Go module, as the rest of
// the stack: example/prometheus-operator-crd/).
const PrometheusOperatorVersion = "v0.89.0"

// monitoringTool runs scripts/monitoring (its own module, on Prometheus's
// PromQL parser) with args.
func monitoringTool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(root(t), "scripts", "monitoring"), "run", "."}, args...)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMonitoring (issue 28): with the monitoring values the chart renders
// a PrometheusRule and the Grafana dashboard's ConfigMap; every alert and
// every panel query parses as PromQL and selects only metrics the janitor
// exports (metrics.Names); a query on a metric it does not export, or one
// that does not parse, is refused by the same check. Off by default.
func TestMonitoring(t *testing.T) {
	values := filepath.Join(chartDir(t), "ci", "monitoring-values.yaml")
	r := render(t, "mon", "janitor", []string{values})
	kinds := map[string]int{}
	for _, o := range r.Objects {
		kinds[o.GetKind()]++
	}
	if kinds["PrometheusRule"] != 1 || kinds["ConfigMap"] != 2 {
		t.Fatalf("rendered kinds %v: want a PrometheusRule and the dashboard's ConfigMap beside the configuration's", kinds)
	}
	// The last-success alert fires when there is no success at all: a
	// failed run pushes none, and the Pushgateway then holds none (issue 39
	// item 10).
	if !strings.Contains(r.YAML, `absent_over_time(pvc_janitor_last_success_timestamp_seconds{command="run"}`) {
		t.Error("PVCJanitorNoRecentSuccess does not fire on an absent last success")
	}
	def := render(t, "def", "janitor", nil, "config.selector=app=ide")
	for _, o := range def.Objects {
		if o.GetKind() == "PrometheusRule" || strings.HasSuffix(o.GetName(), "-dashboard") {
			t.Errorf("default values render %s %s", o.GetKind(), o.GetName())
		}
	}
	file := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(file, []byte(r.YAML), 0o644); err != nil {
		t.Fatal(err)
	}
	names := strings.Join(metrics.Names, ",")
	out, err := monitoringTool(t, "check", "-metrics", names, file)
	if err != nil || !strings.Contains(out, "expressions parse") {
		t.Fatalf("monitoring check: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(out))
	// The same check refuses an unknown metric and a broken expression.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	rule := `{"kind":"PrometheusRule","spec":{"groups":[{"name":"x","rules":[{"alert":"A","expr":"pvc_janitor_nope > 0"},{"alert":"B","expr":"sum(pvc_janitor_claims"}]}]}}`
	if err := os.WriteFile(bad, []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = monitoringTool(t, "check", "-metrics", names, bad)
	if err == nil || !strings.Contains(out, `"pvc_janitor_nope", which the janitor does not export`) || !strings.Contains(out, "does not parse") {
		t.Errorf("check of a bad rule: %v\n%s", err, out)
	}
	// The dashboard is valid JSON with panels, and its file is the chart's.
	var dash struct{ Panels []json.RawMessage }
	raw, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "pvc-janitor.json"))
	if err != nil || json.Unmarshal(raw, &dash) != nil || len(dash.Panels) == 0 {
		t.Errorf("dashboards/pvc-janitor.json: %v, %d panels", err, len(dash.Panels))
	}
}

var crdOnce sync.Once

// installPrometheusRuleCRD applies prometheus-operator's PrometheusRule CRD
// to the local control plane once, so that the server-side dry run checks
// the rendered rule against its real schema.
func installPrometheusRuleCRD(t *testing.T) {
	t.Helper()
	var err error
	var out string
	crdOnce.Do(func() {
		cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator@"+PrometheusOperatorVersion)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		var b []byte
		if b, err = cmd.Output(); err != nil {
			return
		}
		var mod struct{ Dir string }
		if err = json.Unmarshal(b, &mod); err != nil {
			return
		}
		var crd []byte
		if crd, err = os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_prometheusrules.yaml")); err != nil {
			return
		}
		if out, err = kubectl(t, env.Kubeconfig, string(crd), "apply", "--server-side", "-f", "-"); err != nil {
			return
		}
		out, err = kubectl(t, env.Kubeconfig, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/prometheusrules.monitoring.coreos.com")
	})
	if err != nil {
		t.Fatalf("install the PrometheusRule CRD (prometheus-operator %s): %v\n%s", PrometheusOperatorVersion, err, out)
	}
}
