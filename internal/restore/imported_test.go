package restore

import (
	"strings"
	"testing"
)

// imported is rescue as import makes it (docs/spec.md#import): a
// pre-provisioned snapshot, so no source claim in its spec; the claim is
// known from the template the bundle recorded.
func imported(name, claim, ws string, data, cut int) Snapshot {
	s := rescue(name, claim, ws, data, cut)
	s.SourceClaim = ""
	return s
}

// TestPlanFindsImportedRescuesByName is issue 42's: restore NS/CLAIM finds
// an imported rescue by the claim its template records, as --workspace and
// --from do, and the refusals about that claim weigh imported rescues too.
func TestPlanFindsImportedRescuesByName(t *testing.T) {
	one := imported("a-rescue-1", "a", "", 10, 20)
	two := imported("a-rescue-2", "a", "", 30, 40)
	other := imported("b-rescue-1", "b", "", 50, 60)
	noTemplate := imported("c-rescue-1", "c", "", 10, 20)
	noTemplate.Template = ""
	here := rescue("a-rescue-0", "a", "", 70, 80)
	contents := contentsOf(one, two, other, noTemplate, here)
	rows := []struct {
		name  string
		req   Request
		snaps []Snapshot
		want  string // the snapshot chosen, or the refusal's start
	}{
		{name: "the newest imported rescue of the name", req: Request{Claim: "a"}, snaps: []Snapshot{one, two, other}, want: "a-rescue-2"},
		{name: "another claim's imported rescue is not it", req: Request{Claim: "b"}, snaps: []Snapshot{one, two, other}, want: "b-rescue-1"},
		{name: "an imported rescue beside one made here", req: Request{Claim: "a"}, snaps: []Snapshot{here, one}, want: "a-rescue-0"},
		{name: "without a template the name is unknown", req: Request{Claim: "c"}, snaps: []Snapshot{noTemplate}, want: "no rescue of claim ws/c found"},
		// The refusal of an older copy weighs an imported rescue of the
		// same claim: it holds that claim's newer data.
		{name: "--from an older copy: the imported newer one refuses it", req: Request{From: "a-rescue-1"}, snaps: []Snapshot{one, two},
			want: "rescue ws/a-rescue-2 of claim a holds newer data"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			row.req.Namespace = "ws"
			before := row.snaps[0].SourceClaim
			res, err := Plan(row.req, row.snaps, contents, nil)
			switch {
			case err != nil && !strings.HasPrefix(err.Error(), row.want):
				t.Fatalf("refused %q, want %q", err, row.want)
			case err == nil && res.Snapshot.Name != row.want:
				t.Fatalf("chose %s, want %s", res.Snapshot.Name, row.want)
			case err == nil && res.Claim.Name != row.req.Claim && row.req.Claim != "":
				t.Fatalf("new claim %s, want %s", res.Claim.Name, row.req.Claim)
			}
			if row.snaps[0].SourceClaim != before {
				t.Fatal("Plan changed the caller's snapshots")
			}
		})
	}
}
