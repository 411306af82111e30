package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/cost"
)

// TestMergeFleet: every entry carries its cluster, each cluster has its
// block, the summary is the total, and the table has a CLUSTER column and
// a line per cluster; a cluster without a report shows its error.
func TestMergeFleet(t *testing.T) {
	west := sample()
	west.Finish(finished)
	east := sample()
	east.Claims = east.Claims[:1]
	east.AddNote("nothing deleted")
	east.Finish(finished)
	r := Merge("scan", false, started, cost.Prices{}, []Part{
		{Context: "west", Report: west},
		{Context: "east", Report: east, Code: 4, Err: errors.New("1 marks failed")},
		{Context: "north", Code: 1, Err: errors.New("dial tcp: connection refused")},
	})
	r.Finish(finished.Add(time.Second))
	if r.Cluster != "west,east,north" || r.Summary.Claims != 4 || len(r.Clusters) != 3 {
		t.Fatalf("merged: cluster %q, %d claims, %d blocks", r.Cluster, r.Summary.Claims, len(r.Clusters))
	}
	for i, want := range []string{"west", "west", "west", "east"} {
		if r.Claims[i].Cluster != want {
			t.Errorf("claim %d: cluster %q, want %q", i, r.Claims[i].Cluster, want)
		}
	}
	if b := r.Clusters[2]; b.Summary != nil || b.ExitCode != 1 || !strings.Contains(b.Error, "refused") {
		t.Errorf("north block: %+v", b)
	}
	if b := r.Clusters[1]; b.Summary == nil || b.Summary.Claims != 1 || b.ExitCode != 4 {
		t.Errorf("east block: %+v", b)
	}
	var buf bytes.Buffer
	if err := Write(&buf, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"CLUSTER   NAMESPACE", "\nwest ", "\neast ", "cluster west: 3 claims", "cluster east: 1 claim:",
		"; exit 4: error: 1 marks failed", "cluster north: exit 1: error: dial tcp: connection refused", "total: 4 claims", "note: east: nothing deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := Write(&buf, r, FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Claims   []struct{ Cluster string }
		Clusters []struct {
			Name     string
			ExitCode int
		}
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || len(doc.Claims) != 4 || doc.Claims[3].Cluster != "east" || doc.Clusters[2].ExitCode != 1 {
		t.Errorf("json: %v %+v\n%s", err, doc, buf.String())
	}
	// One cluster: no cluster fields at all.
	one := sample()
	one.Finish(finished)
	buf.Reset()
	_ = Write(&buf, one, FormatJSON)
	if strings.Contains(buf.String(), `"clusters"`) || strings.Count(buf.String(), `"cluster"`) != 1 {
		t.Errorf("a one-cluster report grew fleet fields:\n%s", buf.String())
	}
}
