package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/internal/notify/message"
)

// TestRouteTemplatesAreCheckedAgainstTheMessage: the schema a route's
// template is checked against when the configuration is read is the fields
// of notify's message.Message and of its claims, read here from the type
// itself: a template naming every one of them is accepted, and one naming
// anything else is refused.
func TestRouteTemplatesAreCheckedAgainstTheMessage(t *testing.T) {
	var b strings.Builder
	mt := reflect.TypeFor[message.Message]()
	for i := 0; i < mt.NumField(); i++ {
		if f := mt.Field(i); f.Name != "Claims" {
			b.WriteString("{{." + f.Name + "}}")
		}
	}
	ct := reflect.TypeFor[message.Claim]()
	b.WriteString("{{range .Claims}}")
	for i := 0; i < ct.NumField(); i++ {
		b.WriteString("{{." + ct.Field(i).Name + "}}")
	}
	b.WriteString("{{end}}")
	r := &Route{Name: "all", Format: FormatTemplate, Template: b.String()}
	if tp, err := routeTemplate(r); err != nil || tp == nil {
		t.Errorf("a template of every field of the message: %v", err)
	}
	for _, text := range []string{"{{.Nope}}", "{{range .Claims}}{{.Route}}{{end}}", "{{range .Claims}}{{.Labels}}{{end}}"} {
		r := &Route{Name: "x", Format: FormatTemplate, Template: text}
		if _, err := routeTemplate(r); err == nil || !strings.Contains(err.Error(), "no field") {
			t.Errorf("%s: %v, want refused (no field)", text, err)
		}
	}
}
