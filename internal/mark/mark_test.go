package mark

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestPatch: every patch carries the claim's UID and resourceVersion (the
// server's preconditions, path 11) and touches only the janitor's keys.
func TestPatch(t *testing.T) {
	for _, c := range []struct {
		name      string
		m         classify.Marks
		wantAnn   map[string]any
		wantLab   map[string]any
		noAnn     bool
		noLabels  bool
		wantError bool
	}{
		{name: "set both", m: classify.Marks{OrphanedSince: classify.Set, OrphanedSinceValue: t0.In(time.FixedZone("x", 3600)), Phase: classify.Set, PhaseValue: classify.Grace},
			wantAnn: map[string]any{inventory.AnnotationOrphanedSince: "2026-01-02T03:04:05Z"},
			wantLab: map[string]any{inventory.LabelPhase: "Grace"}},
		{name: "remove both (a use was seen)", m: classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove},
			wantAnn: map[string]any{inventory.AnnotationOrphanedSince: nil},
			wantLab: map[string]any{inventory.LabelPhase: nil}},
		{name: "phase only", m: classify.Marks{Phase: classify.Set, PhaseValue: classify.Rescued},
			wantLab: map[string]any{inventory.LabelPhase: "Rescued"}, noAnn: true},
		{name: "mark only", m: classify.Marks{OrphanedSince: classify.Remove},
			wantAnn: map[string]any{inventory.AnnotationOrphanedSince: nil}, noLabels: true},
		{name: "a use seen: mark removed, last use recorded in UTC", m: classify.Marks{OrphanedSince: classify.Remove,
			LastUsed: classify.Set, LastUsedValue: t0.In(time.FixedZone("x", 3600))},
			wantAnn: map[string]any{inventory.AnnotationOrphanedSince: nil, inventory.AnnotationLastUsed: "2026-01-02T03:04:05Z"}, noLabels: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := Patch(c.m, "uid-1", "42")
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Metadata map[string]json.RawMessage `json:"metadata"`
			}
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			var top map[string]any
			_ = json.Unmarshal(b, &top)
			if len(top) != 1 {
				t.Fatalf("patch touches more than metadata: %s", b)
			}
			if string(p.Metadata["uid"]) != `"uid-1"` || string(p.Metadata["resourceVersion"]) != `"42"` {
				t.Fatalf("patch lacks the uid or resourceVersion precondition: %s", b)
			}
			for k := range p.Metadata {
				if k != "uid" && k != "resourceVersion" && k != "annotations" && k != "labels" {
					t.Fatalf("patch touches metadata.%s: %s", k, b)
				}
			}
			check := func(field string, want map[string]any, absent bool) {
				raw, ok := p.Metadata[field]
				if absent {
					if ok {
						t.Fatalf("patch has %s: %s", field, b)
					}
					return
				}
				var got map[string]any
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%s = %v, want %v", field, got, want)
				}
				for k, v := range got {
					if !strings.HasPrefix(k, inventory.Prefix) {
						t.Fatalf("patch writes %s, outside %s", k, inventory.Prefix)
					}
					if w, ok := want[k]; !ok || w != v {
						t.Fatalf("%s[%s] = %v, want %v", field, k, v, want[k])
					}
				}
			}
			check("annotations", c.wantAnn, c.noAnn)
			check("labels", c.wantLab, c.noLabels)
		})
	}
	if _, err := Patch(classify.Marks{Phase: classify.Remove}, "", "42"); err == nil {
		t.Fatal("a patch without the claim's UID was built: it would apply to any claim of that name")
	}
}

// TestRetryRemoval: a conflicting removal (a use was seen) is retried on a
// re-read of the same claim, removing only what it still carries; a Set
// is never retried (path 2).
func TestRetryRemoval(t *testing.T) {
	const uid = types.UID("uid-1")
	claim := func(u types.UID, mark, phase, deleting bool) *corev1.PersistentVolumeClaim {
		p := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{UID: u, ResourceVersion: "43",
			Labels: map[string]string{"workspace": "a"}, Annotations: map[string]string{"example.com/x": "y"}}}
		if mark {
			p.Annotations[inventory.AnnotationOrphanedSince] = "2026-01-02T03:04:05Z"
		}
		if phase {
			p.Labels[inventory.LabelPhase] = "Rescued"
		}
		if deleting {
			ts := metav1.NewTime(t0)
			p.DeletionTimestamp = &ts
		}
		return p
	}
	remove := classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Remove}
	used := classify.Marks{LastUsed: classify.Set, LastUsedValue: t0}
	withLastUsed := func(p *corev1.PersistentVolumeClaim, v string) *corev1.PersistentVolumeClaim {
		p.Annotations[inventory.AnnotationLastUsed] = v
		return p
	}
	for _, c := range []struct {
		name  string
		m     classify.Marks
		cur   *corev1.PersistentVolumeClaim
		want  classify.Marks
		retry bool
	}{
		{"same claim, both keys: remove both", remove, claim(uid, true, true, false), remove, true},
		{"same claim, only the mark left", remove, claim(uid, true, false, false), classify.Marks{OrphanedSince: classify.Remove}, true},
		{"same claim, only the phase left", remove, claim(uid, false, true, false), classify.Marks{Phase: classify.Remove}, true},
		{"same claim, nothing left to remove", remove, claim(uid, false, false, false), classify.Marks{}, false},
		{"gone", remove, nil, classify.Marks{}, false},
		{"recreated under the name", remove, claim("uid-2", true, true, false), classify.Marks{}, false},
		{"being deleted", remove, claim(uid, true, true, true), classify.Marks{}, false},
		{"removal with a phase Set keeps only the removal", classify.Marks{OrphanedSince: classify.Remove, Phase: classify.Set, PhaseValue: classify.Attached},
			claim(uid, true, true, false), classify.Marks{OrphanedSince: classify.Remove}, true},
		{"a Set is left for the next run", classify.Marks{OrphanedSince: classify.Set, OrphanedSinceValue: t0, Phase: classify.Set, PhaseValue: classify.Grace},
			claim(uid, false, false, false), classify.Marks{}, false},
		{"a phase removal alone (no use seen) is left for the next run", classify.Marks{Phase: classify.Remove},
			claim(uid, true, true, false), classify.Marks{}, false},
		{"a last use alone is retried", used, claim(uid, false, false, false), used, true},
		{"a last use is retried with the removal", classify.Marks{OrphanedSince: classify.Remove, LastUsed: classify.Set, LastUsedValue: t0},
			claim(uid, true, false, false), classify.Marks{OrphanedSince: classify.Remove, LastUsed: classify.Set, LastUsedValue: t0}, true},
		{"an older last use is moved forward", used, withLastUsed(claim(uid, false, false, false), "2026-01-02T03:00:00Z"), used, true},
		{"a later last use is never moved back", used, withLastUsed(claim(uid, false, false, false), "2026-01-02T03:05:00Z"), classify.Marks{}, false},
		{"a last use that does not parse is overwritten", used, withLastUsed(claim(uid, false, false, false), "soon"), used, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, retry := RetryRemoval(c.m, uid, c.cur)
			if retry != c.retry || (retry && got != c.want) {
				t.Fatalf("RetryRemoval = %+v, %v; want %+v, %v", got, retry, c.want, c.retry)
			}
			if retry {
				b, err := Patch(got, c.cur.UID, c.cur.ResourceVersion)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), `"resourceVersion":"43"`) || !strings.Contains(string(b), `"uid":"uid-1"`) {
					t.Fatalf("retry patch not at the fresh version of the same claim: %s", b)
				}
			}
		})
	}
}

// TestOtherClaim: the refusals of a patch whose UID is not the claim's, as
// the API server gives them, are told apart from other failures.
func TestOtherClaim(t *testing.T) {
	gk := schema.GroupKind{Kind: "PersistentVolumeClaim"}
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	uidImmutable := apierrors.NewInvalid(gk, "ws-a", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "x", "field is immutable")})
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"uid immutable (422)", uidImmutable, true},
		{"uid immutable, wrapped by the retry", fmt.Errorf("mark claim ws/ws-a: %w", uidImmutable), true},
		{"conflict (409)", apierrors.NewConflict(gr, "ws-a", errors.New("the object has been modified")), true},
		{"another field invalid", apierrors.NewInvalid(gk, "ws-a", field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "bad")}), false},
		{"not found", apierrors.NewNotFound(gr, "ws-a"), false},
		{"forbidden", apierrors.NewForbidden(gr, "ws-a", errors.New("no")), false},
		{"nil", nil, false},
	} {
		if got := OtherClaim(c.err); got != c.want {
			t.Errorf("%s: OtherClaim = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestUseTime: a use seen by a read the server answered at most at latest is
// recorded rounded up, never down (docs/spec.md#rule-last-used).
func TestUseTime(t *testing.T) {
	for _, c := range []struct{ latest, want time.Time }{
		{t0, t0},
		{t0.Add(time.Millisecond), t0.Add(time.Second)},
		{t0.Add(999 * time.Millisecond).In(time.FixedZone("x", 3600)), t0.Add(time.Second)},
		{time.Time{}, time.Time{}},
	} {
		if got := UseTime(c.latest); !got.Equal(c.want) || (!got.IsZero() && got.Location() != time.UTC) {
			t.Errorf("UseTime(%s) = %s, want %s in UTC", c.latest, got, c.want)
		}
	}
}
