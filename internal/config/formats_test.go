package config

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/report"
)

// TestOutputFormatsAreTheReports: --output's values are the report's
// formats, named in config without importing report.
func TestOutputFormatsAreTheReports(t *testing.T) {
	for _, tc := range []struct{ config, report string }{
		{OutputTable, report.FormatTable},
		{OutputWide, report.FormatWide},
		{OutputJSON, report.FormatJSON},
		{OutputYAML, report.FormatYAML},
	} {
		if tc.config != tc.report {
			t.Errorf("config says %q, report %q", tc.config, tc.report)
		}
	}
}

// TestConfigImportsNothingThatActs: the option table depends only on pure
// packages and leaves (docs/architecture.md), never on what reads the
// cluster, writes to it or publishes a report.
func TestConfigImportsNothingThatActs(t *testing.T) {
	allowed := map[string]bool{"inventory": true, "classify": true, "cost": true, "endpoint": true, "term": true, "kubeout": true, "msgtmpl": true, "notify/message": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			const internal = "github.com/pvc-janitor/pvc-janitor/internal/"
			if rest, ok := strings.CutPrefix(p, internal); ok && !allowed[rest] {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}
