//go:build integration

package testenv_test

import (
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/testenv"
)

// TestUnusedConditionEnabled: which --feature-gates values give a control
// plane without the Unused condition (the gate is beta, on by default, in
// v1.37).
func TestUnusedConditionEnabled(t *testing.T) {
	for gates, want := range map[string]bool{
		"": true,
		"PersistentVolumeClaimUnusedSinceTime=false":     false,
		"PersistentVolumeClaimUnusedSinceTime=true":      true,
		" PersistentVolumeClaimUnusedSinceTime = false ": false,
		"AllBeta=false": false,
		"AllBeta=false,PersistentVolumeClaimUnusedSinceTime=true":  true,
		"AllAlpha=true,PersistentVolumeClaimUnusedSinceTime=false": false,
		"SomethingElse=false": true,
		"PersistentVolumeClaimUnusedSinceTime=false,SomethingElse=true": false,
	} {
		if got := testenv.UnusedConditionEnabled(gates); got != want {
			t.Errorf("UnusedConditionEnabled(%q) = %v, want %v", gates, got, want)
		}
	}
}
