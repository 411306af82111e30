package inventory

import "testing"

// TestHeldBy is finding F of issue 38: a hold is read the same way on a
// claim and on a rescue, case-insensitively (docs/spec.md#retention).
func TestHeldBy(t *testing.T) {
	for _, tc := range []struct {
		labels, annotations map[string]string
		want                bool
	}{
		{nil, nil, false},
		{map[string]string{KeyHold: "true"}, nil, true},
		{map[string]string{KeyHold: "True"}, nil, true},
		{nil, map[string]string{KeyHold: "TRUE"}, true},
		{map[string]string{KeyHold: "false"}, map[string]string{KeyHold: "yes"}, false},
		{map[string]string{"hold": "true"}, nil, false},
	} {
		if got := HeldBy(tc.labels, tc.annotations); got != tc.want {
			t.Errorf("HeldBy(%v, %v) = %v, want %v", tc.labels, tc.annotations, got, tc.want)
		}
	}
}
