package examplestest

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestExamplesAreKnown fails on an examples/*.yaml that is neither
// manifests, a janitor configuration nor a workflow, and checks that the
// examples the project documents exist as what they claim to be.
func TestExamplesAreKnown(t *testing.T) {
	byKind := exampleYAML(t)
	want := map[fileKind][]string{
		kindManifests: {"cronjob.yaml", "rbac-namespaced.yaml", "restore-role.yaml"},
		kindConfig:    {"config.yaml", "workspace-platform.yaml"},
		kindWorkflow:  {"github-workflow.yaml"},
	}
	for k, names := range want {
		var got []string
		for _, f := range byKind[k] {
			got = append(got, filepath.Base(f))
		}
		for _, n := range names {
			if !slices.Contains(got, n) {
				t.Errorf("examples/%s is not a %s (the %s are %v)", n, k, k, got)
			}
		}
	}
}
