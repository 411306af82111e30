package mark_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
)

// TestAnnotationsOnly is docs/spec.md#marks-only: a preview keeps the
// mark annotations and the removals a use makes, drops the phase label and
// the start of a notice, and records an attachment as last-used, in place
// of the phase label Attached that would have remembered it.
func TestAnnotationsOnly(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	earlier := at.Add(-time.Hour)
	for _, tc := range []struct {
		name  string
		in    classify.Marks
		state classify.State
		want  classify.Marks
	}{
		{"a first mark keeps the mark, drops the label", classify.Marks{OrphanedSince: classify.Set, OrphanedSinceValue: earlier,
			Phase: classify.Set, PhaseValue: classify.Grace}, classify.Grace,
			classify.Marks{OrphanedSince: classify.Set, OrphanedSinceValue: earlier}},
		{"a use keeps its removals and last-used", classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove,
			Attempts: classify.Remove, ReapAfter: classify.Remove, LastUsed: classify.Set, LastUsedValue: earlier}, classify.InUse,
			classify.Marks{OrphanedSince: classify.Remove, Attempts: classify.Remove, ReapAfter: classify.Remove,
				LastUsed: classify.Set, LastUsedValue: earlier}},
		{"no notice starts", classify.Marks{ReapAfter: classify.Set, ReapAfterValue: at, Phase: classify.Set, PhaseValue: classify.Rescued},
			classify.Rescued, classify.Marks{}},
		{"an attachment is recorded as last-used", classify.Marks{Phase: classify.Set, PhaseValue: classify.Attached},
			classify.Attached, classify.Marks{LastUsed: classify.Set, LastUsedValue: at}},
		{"an attachment keeps a later last-used the classifier set", classify.Marks{LastUsed: classify.Set, LastUsedValue: earlier},
			classify.Attached, classify.Marks{LastUsed: classify.Set, LastUsedValue: earlier}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mark.AnnotationsOnly(tc.in, tc.state, at); got != tc.want {
				t.Errorf("AnnotationsOnly(%+v, %s) = %+v, want %+v", tc.in, tc.state, got, tc.want)
			}
			if p, err := mark.Patch(mark.AnnotationsOnly(tc.in, tc.state, at), "uid", "1"); err != nil || contains(p, "labels") {
				t.Errorf("the patch %s (%v) writes labels", p, err)
			}
		})
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }
