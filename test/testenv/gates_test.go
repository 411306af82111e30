//go:build integration

package testenv_test

import (
	"testing"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestUnusedConditionEnabled: which Kubernetes versions and --feature-gates
// give a control plane that maintains the Unused condition (KEP-5541):
// absent in v1.35, alpha (off) in v1.36, beta (on) in v1.37.
func TestUnusedConditionEnabled(t *testing.T) {
	for _, tc := range []struct {
		version, gates string
		want           bool
	}{
		{"v1.37.2", "", true},
		{"v1.37.2", "PersistentVolumeClaimUnusedSinceTime=false", false},
		{"v1.37.2", "PersistentVolumeClaimUnusedSinceTime=true", true},
		{"v1.37.2", " PersistentVolumeClaimUnusedSinceTime = false ", false},
		{"v1.37.2", "AllBeta=false", false},
		{"v1.37.2", "AllBeta=false,PersistentVolumeClaimUnusedSinceTime=true", true},
		{"v1.37.2", "AllAlpha=true,PersistentVolumeClaimUnusedSinceTime=false", false},
		{"v1.37.2", "SomethingElse=false", true},
		{"v1.37.2", "PersistentVolumeClaimUnusedSinceTime=false,SomethingElse=true", false},
		{"v1.38.0", "", true},
		{"", "", true},
		{"v1.36.3", "", false},
		{"v1.36.3", "AllBeta=true", false},
		{"v1.36.3", "AllAlpha=true", true},
		{"v1.36.3", "PersistentVolumeClaimUnusedSinceTime=true", true},
		{"v1.36.3", "AllAlpha=true,PersistentVolumeClaimUnusedSinceTime=false", false},
		{"v1.35.4", "", false},
		{"v1.35.4", "AllAlpha=true,AllBeta=true", false},
	} {
		if got := testenv.UnusedConditionEnabled(tc.version, tc.gates); got != tc.want {
			t.Errorf("UnusedConditionEnabled(%q, %q) = %v, want %v", tc.version, tc.gates, got, tc.want)
		}
	}
}

func TestMinor(t *testing.T) {
	for in, want := range map[string]int{"v1.35.4": 35, "1.36.3": 36, "v1.37.2": 37, "v2.0.0": 0, "": 0, "v1.x": 0} {
		if got := testenv.Minor(in); got != want {
			t.Errorf("Minor(%q) = %d, want %d", in, got, want)
		}
	}
}
