//go:build integration

package examplestest

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

type workflow struct {
	Jobs map[string]struct {
		Env   map[string]string `yaml:"env"`
		Steps []step            `yaml:"steps"`
	} `yaml:"jobs"`
}

type step struct {
	Name            string            `yaml:"name"`
	If              string            `yaml:"if"`
	Run             string            `yaml:"run"`
	Uses            string            `yaml:"uses"`
	Env             map[string]string `yaml:"env"`
	With            map[string]string `yaml:"with"`
	ContinueOnError any               `yaml:"continue-on-error"`
}

// TestGitHubWorkflow checks the teardown workflow: the gate step runs
// teardown-gate.sh before the destroy step, nothing lets the destroy run
// after a failed gate (continue-on-error on the gate, an `if:` with
// always()/failure() on the destroy), the gate's settings are those of
// workspace-platform.yaml, the janitor version is the chart's, and what the
// gate writes (its report, GATE_REPORT, and the bundle it exports,
// GATE_EXPORT, teardown-bundle.yaml by default) is uploaded as an artifact
// after it, whether it passed or not. Then
// actionlint lints the workflow (and, through shellcheck, its shell steps);
// without actionlint the test fails (make tools installs both).
func TestGitHubWorkflow(t *testing.T) {
	files := exampleYAML(t)[kindWorkflow]
	if len(files) == 0 {
		t.Fatal("no workflow in examples/")
	}
	platformCfg, err := loadConfig(t, example(t, "workspace-platform.yaml"), config.CommandGuard)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			text, err := readFileString(f)
			if err != nil {
				t.Fatal(err)
			}
			var w workflow
			if err := yaml.Unmarshal([]byte(text), &w); err != nil {
				t.Fatal(err)
			}
			gates := 0
			for name, job := range w.Jobs {
				gate, destroy := -1, -1
				for i, s := range job.Steps {
					if strings.Contains(s.Run, "teardown-gate.sh") {
						gate = i
					}
					if strings.Contains(s.Run, "terraform destroy") {
						destroy = i
					}
				}
				if gate < 0 {
					if destroy >= 0 {
						t.Errorf("job %s destroys without the gate", name)
					}
					continue
				}
				gates++
				if destroy < 0 || destroy < gate {
					t.Errorf("job %s: the destroy step (%d) must come after the gate (%d)", name, destroy, gate)
					continue
				}
				g, d := job.Steps[gate], job.Steps[destroy]
				if g.ContinueOnError != nil && fmt.Sprint(g.ContinueOnError) != "false" {
					t.Errorf("job %s: the gate step has continue-on-error: %v", name, g.ContinueOnError)
				}
				if g.If != "" {
					t.Errorf("job %s: the gate step has if: %s", name, g.If)
				}
				for _, s := range job.Steps[gate+1 : destroy+1] {
					for _, bad := range []string{"always()", "failure()", "cancelled()"} {
						if strings.Contains(s.If, bad) && strings.Contains(s.Run, "destroy") {
							t.Errorf("job %s: step %q runs after a failed gate (if: %s)", name, s.Name, s.If)
						}
					}
				}
				if d.If != "" {
					t.Errorf("job %s: the destroy step has if: %s; it must run only when every step before succeeded", name, d.If)
				}
				// The gate's settings are the workspace platform's.
				if got := g.Env["GATE_SELECTOR"]; got != platformCfg.SelectorString {
					t.Errorf("job %s: GATE_SELECTOR %q, workspace-platform.yaml selects %q", name, got, platformCfg.SelectorString)
				}
				if got := g.Env["GATE_WORKSPACE_LABEL"]; got != platformCfg.WorkspaceLabel {
					t.Errorf("job %s: GATE_WORKSPACE_LABEL %q, workspace-platform.yaml has %q", name, got, platformCfg.WorkspaceLabel)
				}
				if got := g.Env["GATE_LOCK_NAMESPACE"]; got != platformCfg.LockNamespace {
					t.Errorf("job %s: GATE_LOCK_NAMESPACE %q, workspace-platform.yaml has %q", name, got, platformCfg.LockNamespace)
				}
				if v, app := job.Env["JANITOR_VERSION"], chartAppVersion(t); v != app {
					t.Errorf("job %s: JANITOR_VERSION %q, the chart's appVersion is %q", name, v, app)
				}
				for _, e := range gateFiles(g) {
					if !uploaded(job.Steps[gate+1:], e.path) {
						t.Errorf("job %s: the gate's %s (%s %q) is not uploaded by an actions/upload-artifact step with if: always() after the gate", name, e.what, e.env, e.path)
					}
				}
			}
			if gates == 0 {
				t.Error("no job runs teardown-gate.sh")
			}
			if !strings.Contains(text, "PLACEHOLDER") {
				t.Error("the workflow must mark its credential placeholders")
			}
			al, err := testenv.LintTool("actionlint")
			if err != nil {
				t.Fatal(err)
			}
			// actionlint runs shellcheck on the run: steps only when it
			// finds it; without it that part would pass silently.
			sc, err := testenv.LintTool("shellcheck")
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(al, "-shellcheck="+sc, f).CombinedOutput(); err != nil {
				t.Errorf("actionlint: %v\n%s", err, out)
			}
		})
	}
}

// gateFile is a file the gate step writes.
type gateFile struct{ what, env, path string }

// gateFiles lists what the gate step g writes: its report when GATE_REPORT
// is set, and its bundle unless GATE_EXPORT is set empty (the gate's
// default is teardown-bundle.yaml; teardown-gate.sh).
func gateFiles(g step) []gateFile {
	var out []gateFile
	if p := g.Env["GATE_REPORT"]; p != "" {
		out = append(out, gateFile{"report", "GATE_REPORT", p})
	}
	p, set := g.Env["GATE_EXPORT"]
	if !set {
		p = "teardown-bundle.yaml"
	}
	if p != "" {
		out = append(out, gateFile{"bundle", "GATE_EXPORT", p})
	}
	return out
}

// uploaded reports whether one of steps uploads path as an artifact even
// when a step before it failed (the gate shut: the report says why, and the
// bundle holds what was exported).
func uploaded(steps []step, path string) bool {
	for _, s := range steps {
		if !strings.HasPrefix(s.Uses, "actions/upload-artifact@") || !strings.Contains(s.If, "always()") {
			continue
		}
		// path: one path a line.
		for _, p := range strings.Split(s.With["path"], "\n") {
			if strings.TrimSpace(p) == path {
				return true
			}
		}
	}
	return false
}
