package report

import (
	"io"
	"strings"
	"testing"
)

// TestWriteKubectlRows: custom-columns, --sort-by and -o name over the
// report's rows (its claims; prune's snapshots), as kubectl prints them
// (every row here was acted on: TestNameIsWhatWasActedOn has the rest).
// With --sort-by, the columns come from the rows in their sorted order.
func TestWriteKubectlRows(t *testing.T) {
	claims := func() *Report {
		return &Report{Command: "scan", Claims: []*ClaimEntry{
			{Namespace: "ws", Name: "c", State: "InUse", Action: "marked"},
			{Namespace: "ws", Name: "a", State: "Orphaned", Action: "marked"},
			{Namespace: "ws", Name: "b", State: "Rescued", Action: "marked"},
		}}
	}
	prune := func() *Report {
		return &Report{Command: "prune", Snapshots: []*SnapshotEntry{
			{Namespace: "ws", Name: "s-2", SourceClaim: "b", Action: "pruned"},
			{Namespace: "ws", Name: "s-1", SourceClaim: "a", Action: "pruned"},
		}}
	}
	cases := []struct {
		name string
		r    *Report
		o    Output
		want string
	}{
		{"custom columns, the report's order", claims(), Output{Format: "custom-columns=NAME:.name,STATE:.state"},
			"NAME   STATE\nc      InUse\na      Orphaned\nb      Rescued\n"},
		{"custom columns sorted by name", claims(), Output{Format: "custom-columns=NAME:.name,STATE:.state", SortBy: ".name"},
			"NAME   STATE\na      Orphaned\nb      Rescued\nc      InUse\n"},
		{"custom columns sorted by state, no headers", claims(), Output{Format: "custom-columns=NAME:.name", SortBy: "{.state}", NoHeaders: true},
			"c\na\nb\n"},
		{"name", claims(), Output{Format: "name"},
			"persistentvolumeclaim/c\npersistentvolumeclaim/a\npersistentvolumeclaim/b\n"},
		{"name, sorted", claims(), Output{Format: "name", SortBy: ".name"},
			"persistentvolumeclaim/a\npersistentvolumeclaim/b\npersistentvolumeclaim/c\n"},
		{"prune: its snapshots, sorted", prune(), Output{Format: "custom-columns=NAME:.name,SOURCE:.sourceClaim", SortBy: ".name"},
			"NAME   SOURCE\ns-1    a\ns-2    b\n"},
		{"prune: name", prune(), Output{Format: "name"},
			"volumesnapshot.snapshot.storage.k8s.io/s-2\nvolumesnapshot.snapshot.storage.k8s.io/s-1\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteOutput(&b, tc.r, tc.o); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

// BenchmarkSortedColumns10k: -o custom-columns=… --sort-by over 10k
// claims, the rows' JSON built once (docs/benchmarks.md).
func BenchmarkSortedColumns10k(b *testing.B) {
	entries := make([]*ClaimEntry, 10000)
	for i := range entries {
		entries[i] = &ClaimEntry{Namespace: "ws", Name: "ws-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)),
			UID: "uid", Workspace: "w", State: "Orphaned", Reason: "no pod or workload references this claim", VolumeName: "pv"}
	}
	o := Output{Format: "custom-columns=NAME:.name,STATE:.state", SortBy: ".name"}
	b.ReportAllocs()
	for b.Loop() {
		r := &Report{Command: "scan", Claims: append([]*ClaimEntry(nil), entries...)}
		if err := WriteOutput(io.Discard, r, o); err != nil {
			b.Fatal(err)
		}
	}
}
