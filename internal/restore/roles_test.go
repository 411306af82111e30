package restore

import (
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
)

// roleRescue is a rescue of claim of workspace ws whose claim carried the
// volume label "volume: role" (docs/spec.md#restore-roles).
func roleRescue(name, claim, ws, role string, data, cut int) Snapshot {
	p := claimNamed(claim, ws)
	if role != "" {
		p.Labels["volume"] = role
	}
	tmpl, _, _ := NewTemplate(p)
	s := rescue(name, claim, ws, data, cut)
	s.Template = tmpl
	return s
}

// TestPlanAllRestoresEachRole is issue 41 item 4: a workspace with a home
// and a data claim, each rescued; restore --workspace with --volume-label
// brings back one claim per role, each from its role's newest rescue, and
// the refusals weigh only the same role's claims and rescues.
func TestPlanAllRestoresEachRole(t *testing.T) {
	home1 := roleRescue("home-r1", "w-home", "w", "home", 10, 11)
	home2 := roleRescue("home-r2", "w-home", "w", "home", 20, 21)
	data := roleRescue("data-r1", "w-data", "w", "data", 30, 31)
	other := roleRescue("x-r1", "x-home", "x", "home", 40, 41) // another workspace
	snaps := []Snapshot{home1, home2, data, other}
	contents := contentsOf(snaps...)
	idle := func(name, role string, lastUse int) Claim {
		return Claim{Name: name, Workspace: "w", Role: role, State: classify.Grace, Created: *at(0), DataTime: *at(lastUse)}
	}
	inUse := func(name, role string) Claim {
		return Claim{Name: name, Workspace: "w", Role: role, State: classify.InUse, Created: *at(0), InUse: true}
	}
	rows := []struct {
		name   string
		req    Request
		claims []Claim
		want   string // "snapshot>claim" per claim restored, or the refusal's start
	}{
		{name: "--workspace: each role from its newest rescue", req: Request{Workspace: "w", VolumeLabel: "volume"},
			want: "data-r1>w-data home-r2>w-home"},
		{name: "--workspace without --volume-label: one claim, the newest of the workspace", req: Request{Workspace: "w"},
			want: "data-r1>w-data"},
		{name: "by name: the home is not refused for the data's newer rescue", req: Request{Claim: "w-home", VolumeLabel: "volume"},
			want: "home-r2>w-home"},
		{name: "by name without --volume-label: refused, the data's rescue is newer", req: Request{Claim: "w-home"},
			want: "rescue ws/data-r1 of workspace w holds newer data"},
		{name: "by name: an older rescue of the same role still refused", req: Request{From: "home-r1", As: "h", VolumeLabel: "volume"},
			want: "rescue ws/home-r2 of workspace w holds newer data"},
		{name: "--workspace beside the data claim in use: the home comes back, the data is refused, nothing written",
			req: Request{Workspace: "w", VolumeLabel: "volume"}, claims: []Claim{inUse("w-data-2", "data")},
			want: `role volume="data" of workspace w: claim ws/w-data-2 of workspace w is InUse`},
		{name: "by name: another role's claim in use is no refusal", req: Request{Claim: "w-home", VolumeLabel: "volume"},
			claims: []Claim{inUse("w-data-2", "data")}, want: "home-r2>w-home"},
		{name: "by name: the same role's newer claim refuses", req: Request{Claim: "w-home", VolumeLabel: "volume"},
			claims: []Claim{idle("w-home-2", "home", 25)}, want: "claim ws/w-home-2 of workspace w may hold newer data"},
		{name: "--as names one claim: refused with two roles", req: Request{Workspace: "w", As: "x", VolumeLabel: "volume"},
			want: "workspace w in namespace ws has 2 roles"},
		{name: "a claim without the label is of the unlabelled role", req: Request{Claim: "w-home", VolumeLabel: "volume"},
			claims: []Claim{idle("w-scratch", "", 50)}, want: "home-r2>w-home"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			row.req.Namespace = "ws"
			res, err := PlanAll(row.req, snaps, contents, row.claims)
			if err != nil {
				if !strings.HasPrefix(err.Error(), row.want) {
					t.Fatalf("refused %q, want %q", err, row.want)
				}
				return
			}
			var got []string
			for _, r := range res {
				got = append(got, r.Snapshot.Name+">"+r.Claim.Name)
			}
			if strings.Join(got, " ") != row.want {
				t.Fatalf("restores %v, want %s", got, row.want)
			}
		})
	}
}
