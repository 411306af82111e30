package kubeout

import (
	"bytes"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in        string
		ok        bool
		kind, err string
		columns   int
	}{
		{in: "table"}, {in: "json"}, {in: "yaml"}, {in: "wide"},
		{in: "name", ok: true, kind: KindName},
		{in: "jsonpath={.claims[*].name}", ok: true, kind: KindJSONPath},
		{in: "jsonpath=names: {.claims[*].name}{\"\\n\"}", ok: true, kind: KindJSONPath},
		{in: "jsonpath={.claims[*}", ok: true, err: "error parsing jsonpath {.claims[*}, unterminated array"},
		{in: "jsonpath=", ok: true, err: "template format specified but no template given"},
		{in: "custom-columns=NAME:.name,STATE:.state", ok: true, kind: KindCustomColumns, columns: 2},
		{in: "custom-columns=NAME:{.name},SIZE:capacity", ok: true, kind: KindCustomColumns, columns: 2},
		{in: "custom-columns=NAME", ok: true, err: "unexpected custom-columns spec: NAME, expected <header>:<json-path-expr>"},
		{in: "custom-columns=NAME:{{.name}", ok: true, err: "unexpected path string, expected a 'name1.name2'"},
		{in: "custom-columns=", ok: true, err: "custom-columns format specified but no custom columns given"},
	} {
		s, ok, err := Parse(tc.in)
		if ok != tc.ok {
			t.Errorf("%q: ok %v, want %v", tc.in, ok, tc.ok)
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && (s.Kind != tc.kind || len(s.Columns) != tc.columns):
			t.Errorf("%q: %+v, want kind %q with %d columns", tc.in, s, tc.kind, tc.columns)
		}
	}
}

func TestRelaxed(t *testing.T) {
	for in, want := range map[string]string{".a.b": "{.a.b}", "a.b": "{.a.b}", "{.a.b}": "{.a.b}", "{a.b}": "{.a.b}", "": ""} {
		if got, err := Relaxed(in); err != nil || got != want {
			t.Errorf("Relaxed(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Relaxed("{a}{b}"); err == nil {
		t.Error("Relaxed of two expressions: no error")
	}
	if err := CheckSortBy(".capacity"); err != nil {
		t.Error(err)
	}
	if err := CheckSortBy("{.a[}"); err == nil || !strings.HasPrefix(err.Error(), "error parsing jsonpath") {
		t.Errorf("CheckSortBy of a broken path: %v", err)
	}
}

func doc(t *testing.T) any {
	d, err := Document(map[string]any{"claims": []map[string]any{
		{"name": "ws-b", "state": "Orphaned", "capacity": 1073741824, "labels": map[string]string{"a": "1"}},
		{"name": "ws-a", "state": "InUse", "capacity": 20},
		{"name": "ws-c", "state": "Rescued"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestJSONPathAndColumns(t *testing.T) {
	d := doc(t)
	var b bytes.Buffer
	if err := JSONPath(&b, "{.claims[*].name} {.claims[0].capacity}{.claims[0].missing}", d); err != nil || b.String() != "ws-b ws-a ws-c 1073741824" {
		t.Errorf("jsonpath: %q, %v", b.String(), err)
	}
	items := d.(map[string]any)["claims"].([]any)
	cols, _, _ := Parse("custom-columns=NAME:.name,SIZE:.capacity,LABELS:.labels")
	b.Reset()
	if err := Columns(&b, cols.Columns, items, false); err != nil {
		t.Fatal(err)
	}
	want := "NAME   SIZE         LABELS\nws-b   1073741824   {\"a\":\"1\"}\nws-a   20           <none>\nws-c   <none>       <none>\n"
	if b.String() != want {
		t.Errorf("columns:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	_ = Columns(&b, cols.Columns[:1], items, true)
	if b.String() != "ws-b\nws-a\nws-c\n" {
		t.Errorf("--no-headers: %q", b.String())
	}
}

func TestSortBy(t *testing.T) {
	names := func(items []any) string {
		var out []string
		for _, it := range items {
			out = append(out, it.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	for path, want := range map[string]string{".capacity": "ws-c,ws-a,ws-b", "name": "ws-a,ws-b,ws-c", "{.state}": "ws-a,ws-b,ws-c", ".nothing": "ws-b,ws-a,ws-c"} {
		items := doc(t).(map[string]any)["claims"].([]any)
		if err := SortBy(items, path); err != nil || names(items) != want {
			t.Errorf("--sort-by %s: %s, %v; want %s", path, names(items), err, want)
		}
	}
}
