package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

func TestWriteExplanations(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	price := 0.5
	e := &Explanation{Kind: "Explanation", APIVersion: "pvc-janitor.io/v1", Capacity: 5 << 30, StorageClass: "fast",
		Volume: "pv-1", ReclaimPolicy: "Delete", MonthlyCost: &price,
		Explanation: classify.Explanation{Claim: inventory.Key{Namespace: "ns", Name: "ws-a"}, Workspace: "alice",
			State: classify.Rescued, Reason: "rescued by VolumeSnapshot ws-a-1",
			Rules: []classify.Rule{{Number: 4, State: classify.InUse, Why: "nothing references it"},
				{Number: 12, State: classify.Rescued, Matched: true, Why: "rescued"}},
			Mark: t0.Format(time.RFC3339), ConditionUse: classify.ConditionAbsent, Counts: "mark", OrphanedSince: &t0,
			Snapshots: []classify.SnapshotEvidence{{Name: "ws-a-1", Source: "ws-a", Janitor: true, Intact: true,
				Cut: t0.Add(time.Minute), Data: t0, DataKnown: true, Role: "the rescue"}},
			Next: classify.Next{Action: "reap"}}}
	var table strings.Builder
	if err := WriteExplanations(&table, e, Output{Format: FormatTable}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Claim ns/ws-a: Rescued\n", "workspace alice", "5Gi, class fast, volume pv-1 (reclaim policy Delete), 0.50 a month",
		"12  Rescued  MATCH", "nothing references the claim", "counts: mark -> 2026-12-01T10:00:00Z",
		"ws-a-1  ws-a    true", "the rescue", "Next: reap"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js strings.Builder
	if err := WriteExplanations(&js, e, Output{Format: FormatJSON}); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
		t.Fatal(err)
	}
	if back["kind"] != "Explanation" || back["state"] != "Rescued" || back["storageClass"] != "fast" || back["monthlyCost"] != 0.5 {
		t.Errorf("json %s", js.String())
	}
	list := &ExplanationList{Kind: "ExplanationList", Items: []*Explanation{e},
		Errors: []ClusterError{{Cluster: "east", ExitCode: 1, Error: "read claims: forbidden"}}}
	e.Cluster = "west"
	var lt strings.Builder
	if err := WriteExplanations(&lt, list, Output{Format: FormatTable}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(lt.String(), "Cluster west:\nClaim ns/ws-a: Rescued") || !strings.HasSuffix(lt.String(), "\nCluster east: read claims: forbidden\n") {
		t.Errorf("fleet table:\n%s", lt.String())
	}
	if err := WriteExplanations(&lt, "x", Output{Format: FormatTable}); err == nil {
		t.Error("a table of an unknown document")
	}
}

// TestWriteExplanationsKubectl: explain honours --no-headers and --sort-by
// in kubectl's kinds, as every other command does.
func TestWriteExplanationsKubectl(t *testing.T) {
	explained := func(cluster, name string, state classify.State) *Explanation {
		return &Explanation{Kind: "Explanation", Cluster: cluster,
			Explanation: classify.Explanation{Claim: inventory.Key{Namespace: "ns", Name: name}, State: state}}
	}
	list := &ExplanationList{Kind: "ExplanationList", Items: []*Explanation{
		explained("west", "ws-b", classify.Rescued), explained("east", "ws-a", classify.InUse)}}
	cols := "custom-columns=CLUSTER:.cluster,CLAIM:.claim.Name,STATE:.state"
	for _, tc := range []struct {
		name string
		out  Output
		want string
	}{
		{"as listed, with headers", Output{Format: cols}, "CLUSTER   CLAIM   STATE\nwest      ws-b    Rescued\neast      ws-a    InUse\n"},
		{"--no-headers", Output{Format: cols, NoHeaders: true}, "west   ws-b   Rescued\neast   ws-a   InUse\n"},
		{"--sort-by a claim's name", Output{Format: cols, NoHeaders: true, SortBy: ".claim.Name"}, "east   ws-a   InUse\nwest   ws-b   Rescued\n"},
		{"-o name as listed", Output{Format: "name"}, "persistentvolumeclaim/ws-b\npersistentvolumeclaim/ws-a\n"},
		{"-o name sorted", Output{Format: "name", SortBy: "{.cluster}"}, "persistentvolumeclaim/ws-a\npersistentvolumeclaim/ws-b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteExplanations(&b, list, tc.out); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
	if err := WriteExplanations(&strings.Builder{}, list, Output{Format: cols, SortBy: "{.nope["}); err == nil {
		t.Error("a bad --sort-by path was accepted")
	}
}
