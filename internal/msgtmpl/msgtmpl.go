// Package msgtmpl is the template language of notification routes
// (docs/usage.md#notification-routes): Go's {{ }} syntax over a message's
// fields, with the actions a webhook payload needs: fields, variables,
// len, json, if/else and range/else.
//
// It is not text/template on purpose. text/template calls methods by name
// through reflection, and a binary that links it keeps every exported
// method of every type: the janitor went from 31 to 50 MB and its scan's
// peak RSS from 52 to 62 MiB at 10k claims (docs/benchmarks.md). A message
// is data, not an object with methods, so the subset loses nothing a
// payload needs, and a template is checked against the message's fields
// when the configuration is read, not when a message is sent.
package msgtmpl

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// A Schema names the fields of a value: a field's schema is nil for a
// scalar, a Schema for an object, or a List for a list of objects.
type Schema map[string]any

// List is the schema of a list field whose elements are objects.
type List struct{ Elem Schema }

// Template is a parsed template.
type Template struct {
	name  string
	nodes []node
}

// Parse parses text and checks every field it names against schema, the
// schema of the data Execute will get.
func Parse(name, text string, schema Schema) (*Template, error) {
	toks, err := lex(text)
	if err != nil {
		return nil, fmt.Errorf("template: %s: %w", name, err)
	}
	p := &parser{toks: toks, scopes: []scope{{dot: schema, vars: map[string]any{"$": schema}}}}
	nodes, end, err := p.parseList()
	if err == nil && end != "" {
		err = fmt.Errorf("unexpected {{%s}}", end)
	}
	if err != nil {
		return nil, fmt.Errorf("template: %s: %w", name, err)
	}
	return &Template{name: name, nodes: nodes}, nil
}

// Execute writes the template over data: objects are map[string]any,
// lists []any, scalars string, bool, int64, time.Time or nil.
func (t *Template) Execute(w io.Writer, data map[string]any) error {
	var b bytes.Buffer
	e := &evaluator{out: &b, vars: []map[string]any{{"$": data}}}
	if err := e.run(t.nodes, data); err != nil {
		return fmt.Errorf("template: %s: %w", t.name, err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// --- lexing -------------------------------------------------------------

// token is a run of text or one action's words.
type token struct {
	text   string
	action []string
}

// lex splits text into text runs and actions, applying the trim markers
// ("{{- " and " -}}") as text/template does.
func lex(text string) ([]token, error) {
	var toks []token
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			return append(toks, token{text: text}), nil
		}
		before, rest := text[:i], text[i+2:]
		if strings.HasPrefix(rest, "- ") {
			before, rest = strings.TrimRight(before, " \t\r\n"), rest[2:]
		}
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, fmt.Errorf("unclosed action %q", "{{"+firstLine(rest))
		}
		inner, after := rest[:j], rest[j+2:]
		if strings.HasSuffix(inner, " -") {
			inner, after = inner[:len(inner)-2], strings.TrimLeft(after, " \t\r\n")
		}
		words := strings.Fields(inner)
		if len(words) == 0 {
			return nil, fmt.Errorf("empty action {{%s}}", inner)
		}
		toks = append(toks, token{text: before}, token{action: words})
		text = after
	}
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}
