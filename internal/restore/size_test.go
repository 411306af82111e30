package restore

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// TestPlanSizeOfASnapshotWithoutTemplate (docs/spec.md#restore-refusals): a snapshot
// that carries no claim template restores only at a size someone knows:
// --size, or the snapshot's restoreSize (the larger wins). Without either
// (or with a restoreSize of zero) the plan is refused, naming --size.
func TestPlanSizeOfASnapshotWithoutTemplate(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, c := range []struct {
		name        string
		size        string
		restoreSize *resource.Quantity
		want        string // the claim's size, or "!" and the refusal's start
	}{
		{name: "neither --size nor restoreSize", want: "!snapshot ws/manual carries no claim template: --size required"},
		{name: "a zero restoreSize and no --size", restoreSize: q("0"), want: "!snapshot ws/manual: the size is not known: pass --size"},
		{name: "--size alone", size: "3Gi", want: "3Gi"},
		{name: "restoreSize alone", restoreSize: q("2Gi"), want: "2Gi"},
		{name: "--size below restoreSize: raised", size: "1Gi", restoreSize: q("2Gi"), want: "2Gi"},
		{name: "--size above restoreSize", size: "5Gi", restoreSize: q("2Gi"), want: "5Gi"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := rescue("manual", "a", "w", 90, 90)
			s.ManagedByJanitor, s.OrphanedSince, s.Template, s.RestoreSize = false, nil, "", c.restoreSize
			res, err := Plan(Request{Namespace: "ws", From: "manual", As: "x", StorageClass: "fast", Size: c.size},
				[]Snapshot{s}, contentsOf(s), nil)
			if want, refused := strings.CutPrefix(c.want, "!"); refused {
				var ref *Refusal
				if !errors.As(err, &ref) || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("got %v, %v; want the refusal %q", res, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := res.Claim.Spec.Resources.Requests["storage"]; got.String() != c.want {
				t.Errorf("size %s, want %s", got.String(), c.want)
			}
		})
	}
}
