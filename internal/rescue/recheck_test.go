package rescue

import (
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// TestUseMarks: a use a re-check's pod list shows is written down as the
// scan would (docs/spec.md#rule-use-restarts-clock, docs/spec.md#rule-last-used):
// the marks removed and the last use recorded, or the last use alone where
// the Unused condition says True against it; nothing for a claim whose
// evidence agrees.
func TestUseMarks(t *testing.T) {
	at := t0.Add(time.Second)
	claim := func(ann map[string]string, unused string, phase bool) *inventory.Claim {
		c := &inventory.Claim{Annotations: ann}
		if unused != "" {
			c.Unused = &inventory.Condition{Status: unused, LastTransitionTime: t0.Add(-time.Hour)}
		}
		c.Labels.HasPhase = phase
		return c
	}
	mark := map[string]string{inventory.AnnotationOrphanedSince: t0.Format(time.RFC3339)}
	for _, c := range []struct {
		name  string
		cl    *inventory.Claim
		want  classify.Marks
		write bool
	}{
		{"a mark: removed, the use recorded", claim(mark, "", false),
			classify.Marks{OrphanedSince: classify.Remove, LastUsed: classify.Set, LastUsedValue: at}, true},
		{"a phase label and attempts: removed, the use recorded", claim(map[string]string{inventory.AnnotationRescueAttempts: "1"}, "False", true),
			classify.Marks{Phase: classify.Remove, Attempts: classify.Remove, LastUsed: classify.Set, LastUsedValue: at}, true},
		{"no marks, Unused True against the use: the use recorded", claim(map[string]string{}, "True", false),
			classify.Marks{LastUsed: classify.Set, LastUsedValue: at}, true},
		{"no marks, Unused True, the use already recorded at that second", claim(map[string]string{inventory.AnnotationLastUsed: at.Format(time.RFC3339)}, "True", false),
			classify.Marks{}, false},
		{"no marks, Unused False: nothing to write", claim(map[string]string{}, "False", false), classify.Marks{}, false},
		{"no marks, no condition: nothing to write", claim(nil, "", false), classify.Marks{}, false},
	} {
		got, write := useMarks(c.cl, at)
		if write != c.write || got != c.want {
			t.Errorf("%s: useMarks = %+v, %v; want %+v, %v", c.name, got, write, c.want, c.write)
		}
	}
}
