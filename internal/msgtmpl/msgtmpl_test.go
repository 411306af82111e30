package msgtmpl

import (
	"strings"
	"testing"
	"time"
)

var schema = Schema{
	"Owner": nil, "DryRun": nil,
	"Claims": List{Elem: Schema{"Name": nil, "Capacity": nil, "ReapAfter": nil}},
}

func data() map[string]any {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	return map[string]any{"Owner": "alice", "DryRun": false, "Claims": []any{
		map[string]any{"Name": "ws-1", "Capacity": int64(1024), "ReapAfter": nil},
		map[string]any{"Name": `ws-"2"`, "Capacity": int64(0), "ReapAfter": at},
	}}
}

func TestExecute(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"plain text", "plain text"},
		{"{{.Owner}}", "alice"},
		{"{{$.Owner}}", "alice"},
		{"{{len .Claims}} claims", "2 claims"},
		{"{{range .Claims}}[{{.Name}}]{{end}}", `[ws-1][ws-"2"]`},
		{"{{range $i, $c := .Claims}}{{if $i}},{{end}}{{$c.Name}}{{end}}", `ws-1,ws-"2"`},
		{"{{range $c := .Claims}}{{$.Owner}}/{{$c.Name}} {{end}}", `alice/ws-1 alice/ws-"2" `},
		{"{{range .Claims}}{{json .Name}}{{end}}", `"ws-1""ws-\"2\""`},
		{`{"owner":{{json .Owner}},"n":{{len .Claims}}}`, `{"owner":"alice","n":2}`},
		{"{{range .Claims}}{{if .ReapAfter}}{{.ReapAfter}}{{else}}now{{end}};{{end}}", "now;2026-12-03T10:00:00Z;"},
		{"{{range .Claims}}{{.Capacity}} {{end}}", "1024 0 "},
		{"{{if .DryRun}}dry{{else}}real{{end}}", "real"},
		{"a  {{- .Owner -}}  b", "aaliceb"},
		{"{{json .}}", `{"Claims":[{"Capacity":1024,"Name":"ws-1","ReapAfter":null},{"Capacity":0,"Name":"ws-\"2\"","ReapAfter":"2026-12-03T10:00:00Z"}],"DryRun":false,"Owner":"alice"}`},
	} {
		tp, err := Parse("t", tc.tmpl, schema)
		if err != nil {
			t.Errorf("%s: %v", tc.tmpl, err)
			continue
		}
		var b strings.Builder
		if err := tp.Execute(&b, data()); err != nil || b.String() != tc.want {
			t.Errorf("%s = %q (%v), want %q", tc.tmpl, b.String(), err, tc.want)
		}
	}
}

func TestRangeElse(t *testing.T) {
	tp, err := Parse("t", "{{range .Claims}}x{{else}}none for {{.Owner}}{{end}}", schema)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := tp.Execute(&b, map[string]any{"Owner": "bob", "DryRun": true, "Claims": []any{}}); err != nil || b.String() != "none for bob" {
		t.Errorf("got %q (%v)", b.String(), err)
	}
}

// TestParseRefuses: every template the language cannot run is refused
// when the configuration is read, with what is wrong.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ tmpl, want string }{
		{"{{.Nope}}", `no field "Nope" (the fields: .Claims, .DryRun, .Owner)`},
		{"{{range .Claims}}{{.Owner}}{{end}}", `no field "Owner"`},
		{"{{.Owner.X}}", "has no fields"},
		{"{{range .Owner}}{{end}}", "not a list"},
		{"{{len .Owner}}", ""},
		{"{{.Owner", "unclosed action"},
		{"{{}}", "empty action"},
		{"{{if .Owner}}x", "has no {{end}}"},
		{"{{end}}", "unexpected {{end}}"},
		{"{{printf \"%s\" .Owner}}", "unsupported action"},
		{"{{$x}}", "undefined variable $x"},
		{"{{range $a, $b, $c := .Claims}}{{end}}", "want range $key, $value := PATH"},
		{"{{end x}}", "takes nothing"},
	} {
		_, err := Parse("t", tc.tmpl, schema)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", tc.tmpl, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.tmpl, err, tc.want)
		}
	}
}
