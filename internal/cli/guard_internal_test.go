package cli

import (
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// TestGuardHelpListsTheAtRiskStates: guard's help names every state whose
// claims a teardown would lose, as the rule table says, and no other, in
// lines of at most 80 columns.
func TestGuardHelpListsTheAtRiskStates(t *testing.T) {
	long := newGuardCommand(Streams{}).Long
	start := strings.Index(long, "claims that are ")
	end := strings.Index(long[start:], ";")
	listed := strings.NewReplacer(",", " ", "\n", " ", " or ", " ").Replace(long[start+len("claims that are ") : start+end])
	got := map[string]bool{}
	for _, f := range strings.Fields(listed) {
		got[f] = true
	}
	for _, r := range classify.StateRules {
		if got[string(r.State)] != (r.Teardown != "") {
			t.Errorf("%s: listed %v in guard's help, at risk in the table %v", r.State, got[string(r.State)], r.Teardown != "")
		}
	}
	for _, line := range strings.Split(long, "\n") {
		if len(line) > 80 {
			t.Errorf("help line of %d columns: %q", len(line), line)
		}
	}
}
