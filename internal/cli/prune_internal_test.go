package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/prune"
	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

// TestPruneReportSaysWhatEachRescueIs: prune's entries carry what the
// rescue is, as read: ready, its source UID, its data time and its
// content's deletion policy, in the table and in JSON (they were READY
// false, no DATA-TIME, no DELETION-POLICY and sourceUID "").
func TestPruneReportSaysWhatEachRescueIs(t *testing.T) {
	orphaned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cut := orphaned.Add(time.Minute)
	res := &prune.Result{Now: cut.Add(time.Hour), Outcomes: []prune.Outcome{{
		Namespace: "ns", Name: "ws-a-rescue-1", Source: "ws-a", Workspace: "a", Action: prune.ActionKept, Reason: "the newest rescue",
		Snapshot: inventory.Snapshot{Namespace: "ns", Name: "ws-a-rescue-1", SourceClaim: "ws-a", SourceUID: "uid-a",
			ManagedByJanitor: true, OrphanedSince: &orphaned, CutTime: &cut, ReadyToUse: true, ContentName: "snapcontent-1"},
		DeletionPolicy: "Retain",
	}}}
	r := report.New("prune", true, "", cut)
	if err := addPrune(r, res); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := report.Write(&table, r, report.FormatTable); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(table.String(), "\n") {
		if strings.Contains(l, "ws-a-rescue-1") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) < 6 || f[3] != orphaned.Format(time.RFC3339) || f[4] != "true" || f[5] != "Retain" {
		t.Errorf("table row %q: want DATA-TIME %s, READY true, DELETION-POLICY Retain\n%s", row, orphaned.Format(time.RFC3339), table.String())
	}
	var js bytes.Buffer
	if err := report.Write(&js, r, "json"); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Snapshots []struct {
			SourceUID, DeletionPolicy string
			ReadyToUse                bool
			DataTime                  *time.Time
		}
	}
	if err := json.Unmarshal(js.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Snapshots) != 1 {
		t.Fatalf("%d snapshot entries, want 1", len(v.Snapshots))
	}
	if s := v.Snapshots[0]; !s.ReadyToUse || s.SourceUID != "uid-a" || s.DeletionPolicy != "Retain" || s.DataTime == nil || !s.DataTime.Equal(orphaned) {
		t.Errorf("JSON entry %+v: want readyToUse, sourceUID uid-a, Retain, dataTime %s", s, orphaned)
	}
}
