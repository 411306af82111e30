package classify

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCompatibilityTable keeps docs/compatibility.md from drifting: its
// table lists exactly the minors scripts/cluster/versions.sh supports, in
// order, and each row's Unused condition column is ConditionSupport's.
func TestCompatibilityTable(t *testing.T) {
	root := filepath.Join("..", "..")
	versions, err := os.ReadFile(filepath.Join(root, "scripts", "cluster", "versions.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSIONS="([^"]+)"`).FindSubmatch(versions)
	if m == nil {
		t.Fatal(`scripts/cluster/versions.sh has no KUBE_VERSIONS="..." line`)
	}
	want := strings.Fields(string(m[1]))
	doc, err := os.ReadFile(filepath.Join(root, "docs", "compatibility.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "<!-- compatibility-table: begin -->")
	table, _, ok2 := strings.Cut(table, "<!-- compatibility-table: end -->")
	if !ok || !ok2 {
		t.Fatal("docs/compatibility.md has no compatibility-table markers")
	}
	var got []string
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "v") {
			continue
		}
		v, support := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[2])
		got = append(got, v)
		if s := ConditionSupport(v); s != support {
			t.Errorf("docs/compatibility.md says %s has Unused condition %q; ConditionSupport says %q", v, support, s)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/compatibility.md lists %v; versions.sh supports %v", got, want)
	}
}
