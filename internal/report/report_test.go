package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

var (
	started  = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	finished = time.Date(2026, 1, 2, 4, 4, 7, 0, time.FixedZone("CET", 3600)) // 03:04:07Z
	orphaned = time.Date(2026, 1, 2, 2, 0, 0, 0, time.UTC)
)

const longReason = "in use by Pod ws/ide-0 (volume data), Pod ws/ide-1 (volume data), StatefulSet ws/ide (volumeClaimTemplate data), Job ws/backup (volume data)"

// sample is the report of the example of docs/spec.md#report-json: three claims, one of each of
// InUse, Orphaned and Rescued.
func sample() *Report {
	claims := []inventory.Claim{
		{Namespace: "ws", Name: "ws-abc", UID: "uid-abc", VolumeName: "pv-abc"},
		{Namespace: "ws", Name: "ws-def", UID: "uid-def", VolumeName: "pv-def"},
		{Namespace: "dev", Name: "ws-old", UID: "uid-old", VolumeName: "pv-old"},
	}
	ds := []classify.Decision{
		{Claim: &claims[0], Workspace: "abc", State: classify.Orphaned, Reason: "no pod or workload references this claim",
			OrphanedSince: &orphaned,
			Snapshot:      &inventory.Snapshot{Name: "ws-abc-rescue-1a2b3c4d5e"}},
		{Claim: &claims[1], Workspace: "def", State: classify.InUse, Reason: longReason},
		{Claim: &claims[2], Workspace: "", State: classify.Rescued, Reason: "rescued by snapshot ws-old-rescue-0000000000",
			Snapshot: &inventory.Snapshot{Name: "ws-old-rescue-0000000000", ReadyToUse: true}},
	}
	r := New("scan", false, "kind-dev", started.In(time.FixedZone("X", -7200)))
	r.AddDecisions(ds)
	r.Entry("ws", "ws-abc").Action = ActionSnapshotCreated
	r.Finish(finished)
	return r
}

func write(t *testing.T, r *Report, format string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, r, format); err != nil {
		t.Fatalf("Write(%s): %v", format, err)
	}
	return buf.String()
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestJSON(t *testing.T) {
	out := write(t, sample(), "json")
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	wantTop := []string{"apiVersion", "claims", "cluster", "command", "dryRun", "finishedAt", "kind", "startedAt", "summary"}
	if got := keys(m); !reflect.DeepEqual(got, wantTop) {
		t.Errorf("top-level keys = %v, want %v", got, wantTop)
	}
	for k, want := range map[string]any{
		"kind": "Report", "apiVersion": "pvc-janitor.io/v1", "command": "scan", "dryRun": false, "cluster": "kind-dev",
		"startedAt": "2026-01-02T03:04:05Z", "finishedAt": "2026-01-02T03:04:07Z",
	} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	wantSummary := map[string]any{
		"claims": 3.0, "states": map[string]any{"InUse": 1.0, "Orphaned": 1.0, "Rescued": 1.0},
		"snapshotsCreated": 1.0, "claimsDeleted": 0.0, "failures": 0.0,
	}
	if !reflect.DeepEqual(m["summary"], wantSummary) {
		t.Errorf("summary = %#v, want %#v", m["summary"], wantSummary)
	}
	claims := m["claims"].([]any)
	if len(claims) != 3 {
		t.Fatalf("%d claims, want 3", len(claims))
	}
	// Sorted by namespace, then name.
	first := claims[0].(map[string]any)
	if first["namespace"] != "dev" || claims[1].(map[string]any)["name"] != "ws-abc" {
		t.Errorf("claims not sorted by namespace/name: %v", claims)
	}
	abc := claims[1].(map[string]any)
	wantABC := map[string]any{
		"namespace": "ws", "name": "ws-abc", "uid": "uid-abc", "workspace": "abc",
		"state": "Orphaned", "reason": "no pod or workload references this claim",
		"volumeName": "pv-abc", "orphanedSince": "2026-01-02T02:00:00Z",
		"snapshot": map[string]any{"name": "ws-abc-rescue-1a2b3c4d5e", "readyToUse": false, "error": ""},
		"action":   "snapshot-created",
	}
	if !reflect.DeepEqual(abc, wantABC) {
		t.Errorf("claim ws/ws-abc =\n%#v\nwant\n%#v", abc, wantABC)
	}
	def := claims[2].(map[string]any)
	wantKeys := []string{"name", "namespace", "reason", "state", "uid", "volumeName", "workspace"}
	if got := keys(def); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("claim ws/ws-def keys = %v, want %v (omitempty fields absent)", got, wantKeys)
	}
	if def["reason"] != longReason {
		t.Errorf("json truncated the reason: %q", def["reason"])
	}
	if strings.Contains(out, `\u003c`) {
		t.Errorf("json escapes HTML characters")
	}
}

func TestJSONNotesErrorAndEmpty(t *testing.T) {
	r := New("reap", true, "c", started)
	r.AddNote("blast radius: 60 claims would be deleted, over --max-deletions 50; nothing was deleted")
	r.Error = "list pods in \"ws\": forbidden"
	r.Finish(finished)
	var m map[string]any
	if err := json.Unmarshal([]byte(write(t, r, "json")), &m); err != nil {
		t.Fatal(err)
	}
	if got, ok := m["claims"].([]any); !ok || len(got) != 0 {
		t.Errorf("claims = %#v, want []", m["claims"])
	}
	if s := m["summary"].(map[string]any)["states"]; !reflect.DeepEqual(s, map[string]any{}) {
		t.Errorf("states = %#v, want {}", s)
	}
	if n := m["notes"].([]any); len(n) != 1 {
		t.Errorf("notes = %v", n)
	}
	if m["error"] != r.Error || m["dryRun"] != true {
		t.Errorf("error = %v, dryRun = %v", m["error"], m["dryRun"])
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	r := sample()
	r.AddNote("a note")
	y := write(t, r, "yaml")
	if !strings.Contains(y, "apiVersion: pvc-janitor.io/v1") || !strings.Contains(y, "orphanedSince:") {
		t.Errorf("yaml lacks the JSON field names:\n%s", y)
	}
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML, fromJSON map[string]any
	if err := json.Unmarshal(j, &fromYAML); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(write(t, r, "json")), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("yaml and json differ:\n%v\n%v", fromYAML, fromJSON)
	}
}

func TestTable(t *testing.T) {
	out := write(t, sample(), "table")
	lines := strings.Split(out, "\n")
	if f := strings.Fields(lines[0]); !reflect.DeepEqual(f, []string{"NAMESPACE", "NAME", "WORKSPACE", "STATE", "SIZE", "ORPHANED-SINCE", "ACTION", "REASON"}) {
		t.Errorf("header = %q", lines[0])
	}
	for i, want := range [][]string{
		{"dev", "ws-old", "<none>", "Rescued", "<none>", "<none>", "<none>", "rescued"},
		{"ws", "ws-abc", "abc", "Orphaned", "<none>", "2026-01-02T02:00:00Z", "snapshot-created", "no"},
		{"ws", "ws-def", "def", "InUse", "<none>", "<none>", "<none>", "in"},
	} {
		if got := strings.Fields(lines[i+1]); len(got) < len(want) || !reflect.DeepEqual(got[:len(want)], want) {
			t.Errorf("row %d = %q, want it to start with %v", i, lines[i+1], want)
		}
	}
	// REASON is cut to 80 runes.
	def := lines[3]
	reason := def[strings.Index(def, "in use by"):]
	if n := utf8.RuneCountInString(reason); n != maxReason || !strings.HasSuffix(reason, "…") {
		t.Errorf("reason = %q (%d runes), want %d runes ending in …", reason, n, maxReason)
	}
	wantTail := "\n\n3 claims: 1 InUse, 1 Rescued, 1 Orphaned; 1 snapshot created, 0 claims deleted, 0 failures\n"
	if !strings.HasSuffix(out, wantTail) {
		t.Errorf("table does not end with the summary %q:\n%s", wantTail, out)
	}
	if strings.Contains(out, "uid-abc") || strings.Contains(out, "pv-abc") {
		t.Errorf("table shows wide columns:\n%s", out)
	}
}

func TestWide(t *testing.T) {
	out := write(t, sample(), "wide")
	lines := strings.Split(out, "\n")
	wantHead := []string{"NAMESPACE", "NAME", "WORKSPACE", "STATE", "SIZE", "ORPHANED-SINCE", "ACTION", "CLASS", "RECLAIM", "UID", "VOLUME", "SNAPSHOT", "SNAPSHOT-READY", "REASON"}
	if f := strings.Fields(lines[0]); !reflect.DeepEqual(f, wantHead) {
		t.Errorf("header = %v, want %v", f, wantHead)
	}
	if got := strings.Fields(lines[1])[9:13]; !reflect.DeepEqual(got, []string{"uid-old", "pv-old", "ws-old-rescue-0000000000", "true"}) {
		t.Errorf("wide columns of dev/ws-old = %v", got)
	}
	if got := strings.Fields(lines[3])[9:13]; !reflect.DeepEqual(got, []string{"uid-def", "pv-def", "<none>", "<none>"}) {
		t.Errorf("wide columns of ws/ws-def = %v", got)
	}
	if !strings.Contains(lines[3], longReason) {
		t.Errorf("wide truncated the reason: %q", lines[3])
	}
}

func TestTableEmptyDryRunNotes(t *testing.T) {
	r := New("reap", true, "c", started)
	r.AddNote("nothing\tto\ndo")
	r.Error = "boom"
	r.Finish(finished)
	out := write(t, r, "")
	want := "No claims in scope.\n\n0 claims; 0 snapshots created, 0 claims deleted, 0 failures (dry run: nothing was changed)\nnote: nothing to do\nerror: boom\n"
	if out != want {
		t.Errorf("table =\n%q\nwant\n%q", out, want)
	}
}

func TestSummaryCounts(t *testing.T) {
	r := New("run", false, "c", started)
	var claims []inventory.Claim
	states := []classify.State{classify.Orphaned, classify.Orphaned, classify.Rescued, classify.Rescued, classify.Grace, classify.SnapshotFailed, classify.Superseded}
	for i := range states {
		claims = append(claims, inventory.Claim{Namespace: "ns", Name: string(rune('a' + i))})
	}
	var ds []classify.Decision
	for i, st := range states {
		ds = append(ds, classify.Decision{Claim: &claims[i], State: st})
	}
	r.AddDecisions(ds)
	for name, action := range map[string]string{"a": "snapshot-created", "b": "snapshot-created", "c": "deleted",
		"d": "delete-failed", "e": "mark-failed", "f": "snapshot-failed", "g": "marked"} {
		r.Entry("ns", name).Action = action
	}
	// run rescued c, then reaped it: the snapshot still counts.
	r.Entry("ns", "c").SnapshotCreated = true
	r.Finish(finished)
	want := Summary{Claims: 7, States: map[string]int{"Orphaned": 2, "Rescued": 2, "Grace": 1, "SnapshotFailed": 1, "Superseded": 1},
		SnapshotsCreated: 3, ClaimsDeleted: 1, Failures: 3}
	if !reflect.DeepEqual(r.Summary, want) {
		t.Errorf("summary = %+v, want %+v", r.Summary, want)
	}
	line := summaryLine(r)
	wantLine := "7 claims: 2 Rescued, 1 Superseded, 1 SnapshotFailed, 1 Grace, 2 Orphaned; 3 snapshots created, 1 claim deleted, 3 failures"
	if line != wantLine {
		t.Errorf("summary line = %q, want %q", line, wantLine)
	}
}

func TestSortAtRiskFirstAndEntry(t *testing.T) {
	r := sample()
	// Guard keys its verdicts by entry pointer before sorting.
	risky := map[*ClaimEntry]bool{r.Entry("ws", "ws-def"): true, r.Entry("ws", "ws-abc"): true}
	before := r.Entry("dev", "ws-old")
	r.SortAtRiskFirst(func(e *ClaimEntry) bool { return risky[e] })
	var got []string
	for _, e := range r.Claims {
		got = append(got, e.Namespace+"/"+e.Name)
	}
	want := []string{"ws/ws-abc", "ws/ws-def", "dev/ws-old"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if r.Entry("dev", "ws-old") != before {
		t.Error("Entry pointer changed by sorting")
	}
	if r.Entry("ws", "absent") != nil {
		t.Error("Entry of an absent claim is not nil")
	}
}

func TestAddDecisionsReplaces(t *testing.T) {
	r := sample()
	e := r.Entry("ws", "ws-abc")
	cl := inventory.Claim{Namespace: "ws", Name: "ws-abc", UID: "uid-abc"}
	r.AddDecisions([]classify.Decision{{Claim: &cl, State: classify.Snapshotting, Reason: "waiting"}})
	if len(r.Claims) != 3 || r.Entry("ws", "ws-abc") != e || e.State != "Snapshotting" || e.Action != ActionSnapshotCreated || e.Snapshot != nil {
		t.Errorf("re-adding did not replace the classification in place: %+v", e)
	}
}

func TestWriteErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, sample(), "xml"); err == nil || !strings.Contains(err.Error(), `unknown output format "xml"`) {
		t.Errorf("Write(xml) = %v", err)
	}
	if err := Write(&buf, nil, "json"); err == nil {
		t.Error("Write(nil) succeeded")
	}
	if buf.Len() != 0 {
		t.Errorf("failed writes wrote %q", buf.String())
	}
}

// TestStreamedJSONIsTheDocument: the JSON report, written one claim at a
// time, is byte for byte the document encoding/json makes of the report.
func TestStreamedJSONIsTheDocument(t *testing.T) {
	empty := New("scan", false, "c", started)
	empty.Finish(finished)
	null := New("scan", false, "c", started)
	null.Finish(finished)
	null.Claims = nil
	one := sample()
	one.Claims = one.Claims[:1]
	for name, r := range map[string]*Report{"sample": sample(), "one claim": one, "no claims": empty, "nil claims": null} {
		want, err := marshalJSON(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := write(t, r, "json"); got != string(want) {
			t.Errorf("%s: streamed\n%s\nwant\n%s", name, got, want)
		}
	}
}

// TestUnusedConditionFieldAndWarning (docs/spec.md#rule-condition-trust): the report's
// unusedCondition is in the JSON when set and absent when not, and the
// table warns once, only when the run ignored the condition.
func TestUnusedConditionFieldAndWarning(t *testing.T) {
	const warning = "the claims' Unused condition is ignored in this run"
	for _, c := range []struct {
		value string
		warn  bool
	}{{"", false}, {"trusted", false}, {"absent", false}, {"ignored", true}} {
		r := sample()
		r.UnusedCondition = c.value
		var m map[string]any
		if err := json.Unmarshal([]byte(write(t, r, "json")), &m); err != nil {
			t.Fatal(err)
		}
		if got, ok := m["unusedCondition"]; ok != (c.value != "") || (ok && got != c.value) {
			t.Errorf("unusedCondition %q: JSON has %v (present %v)", c.value, got, ok)
		}
		want := 0
		if c.warn {
			want = 1
		}
		if n := strings.Count(write(t, r, "table"), warning); n != want {
			t.Errorf("unusedCondition %q: the table warns %d times, want %d", c.value, n, want)
		}
	}
}

// TestServerVersionAndCondition: the report carries the server's version
// and the run's judgement of the Unused condition, and the table says when
// the server has no condition at all (v1.35) or when it was ignored.
func TestServerVersionAndCondition(t *testing.T) {
	for _, tc := range []struct {
		version, condition string
		note               string // "" for none
	}{
		{"v1.37.2", "trusted", ""},
		{"v1.36.3", "absent", ""},
		{"v1.35.4", "absent", "note: Kubernetes v1.35.4 has no Unused condition: orphaned-since is the janitor's own marks"},
		{"v1.35.4", "ignored", "note: the claims' Unused condition is ignored in this run"},
		{"v1.37.2", "ignored", "note: the claims' Unused condition is ignored in this run"},
	} {
		r := New("scan", false, "c", started)
		r.ServerVersion, r.UnusedCondition = tc.version, tc.condition
		r.Finish(finished)
		var m map[string]any
		if err := json.Unmarshal([]byte(write(t, r, "json")), &m); err != nil {
			t.Fatal(err)
		}
		if m["serverVersion"] != tc.version || m["unusedCondition"] != tc.condition {
			t.Errorf("%s/%s: json serverVersion %v, unusedCondition %v", tc.version, tc.condition, m["serverVersion"], m["unusedCondition"])
		}
		table := write(t, r, "")
		if got := strings.Contains(table, "note: "); got != (tc.note != "") {
			t.Errorf("%s/%s: table notes:\n%s", tc.version, tc.condition, table)
		}
		if tc.note != "" && !strings.Contains(table, tc.note) {
			t.Errorf("%s/%s: table lacks %q:\n%s", tc.version, tc.condition, tc.note, table)
		}
	}
}
