package message

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pvc-janitor/pvc-janitor/internal/msgtmpl"
)

// documented is the message's fields as docs/usage.md#notification-routes
// lists them for template authors.
var documented = map[string][]string{
	"Message": {"Claims", "Cluster", "Command", "DryRun", "Owner", "Route"},
	"Claim":   {"Action", "Capacity", "Name", "Namespace", "ReapAfter", "Reason", "Snapshot", "State"},
}

// TestMessageDataIsTheSchema: the schema a route's template is checked
// against when the configuration is read (Schema, config's routeTemplate)
// is exactly the fields Message and Claim have, and what a template reads
// of a message (Data) has exactly those fields too: a template the
// configuration accepted never meets a field the message lacks, nor misses
// one it has.
func TestMessageDataIsTheSchema(t *testing.T) {
	elem, ok := Schema["Claims"].(msgtmpl.List)
	if !ok {
		t.Fatalf("Schema[Claims] = %#v, want a list of objects", Schema["Claims"])
	}
	for typ, c := range map[string]struct {
		v      any
		schema msgtmpl.Schema
	}{"Message": {Message{}, Schema}, "Claim": {Claim{}, elem.Elem}} {
		fields := structFields(c.v)
		if got, want := keys(c.schema), strings.Join(fields, ","); got != want {
			t.Errorf("%s: schema %s, fields %s", typ, got, want)
		}
		if got, want := strings.Join(fields, ","), strings.Join(documented[typ], ","); got != want {
			t.Errorf("%s: fields %s, documented %s", typ, got, want)
		}
	}
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	m := Message{Route: "r", Owner: "alice", Claims: []Claim{{Name: "ws-1", Capacity: 1 << 30}, {Name: "ws-2", ReapAfter: &at}}}
	d := Data(m)
	if got, want := keys(d), keys(Schema); got != want {
		t.Errorf("data %s, schema %s", got, want)
	}
	claims, _ := d["Claims"].([]any)
	if len(claims) != 2 {
		t.Fatalf("data claims %#v, want 2", d["Claims"])
	}
	for i, c := range claims {
		obj, _ := c.(map[string]any)
		if got, want := keys(obj), keys(elem.Elem); got != want {
			t.Errorf("claim %d: data %s, schema %s", i, got, want)
		}
	}
	// The values as msgtmpl reads them: integers int64, a nil time nil.
	c0, c1 := claims[0].(map[string]any), claims[1].(map[string]any)
	if c0["Capacity"] != int64(1<<30) || c0["ReapAfter"] != nil || c1["ReapAfter"] != at || d["Owner"] != "alice" || d["DryRun"] != false {
		t.Errorf("data values %#v", d)
	}
	if got := Data(Message{})["Claims"]; !reflect.DeepEqual(got, []any{}) {
		t.Errorf("a message without claims: Claims %#v, want an empty list", got)
	}
}

// TestEveryFieldParses: a template naming every field of the message is
// accepted, one naming any other is refused.
func TestEveryFieldParses(t *testing.T) {
	var b strings.Builder
	for _, f := range documented["Message"] {
		if f != "Claims" {
			b.WriteString("{{." + f + "}}")
		}
	}
	b.WriteString("{{range .Claims}}")
	for _, f := range documented["Claim"] {
		b.WriteString("{{." + f + "}}")
	}
	b.WriteString("{{end}}")
	if _, err := msgtmpl.Parse("all", b.String(), Schema); err != nil {
		t.Errorf("every field: %v", err)
	}
	for _, text := range []string{"{{.Nope}}", "{{range .Claims}}{{.Owner}}{{end}}", "{{.Claims.Name}}"} {
		if _, err := msgtmpl.Parse("x", text, Schema); err == nil {
			t.Errorf("%s accepted", text)
		}
	}
}

func keys[V any](m map[string]V) string {
	k := make([]string, 0, len(m))
	for key := range m {
		k = append(k, key)
	}
	sort.Strings(k)
	return strings.Join(k, ",")
}

// structFields lists a struct's fields by reflect's plain field loop, apart
// from msgtmpl.SchemaOf's.
func structFields(v any) []string {
	t := reflect.TypeOf(v)
	var f []string
	for i := 0; i < t.NumField(); i++ {
		f = append(f, t.Field(i).Name)
	}
	sort.Strings(f)
	return f
}
