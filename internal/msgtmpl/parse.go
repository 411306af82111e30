package msgtmpl

import (
	"fmt"
	"sort"
	"strings"
)

// node is one piece of a parsed template.
type node struct {
	kind  nodeKind
	text  string // kindText
	fn    string // kindValue: "", "len" or "json"
	path  path   // kindValue, kindIf, kindRange: the value
	body  []node // kindIf: then; kindRange: per element
	alt   []node // {{else}}: if false, or range over nothing
	key   string // kindRange: $key variable ("" for none)
	value string // kindRange: $value variable ("" for none)
}

type nodeKind int

const (
	kindText nodeKind = iota
	kindValue
	kindIf
	kindRange
)

// path is a value reference: a variable ("" for dot, "$" for the root, or
// "$name") and the fields after it.
type path struct {
	vari   string
	fields []string
}

func (p path) String() string {
	s := p.vari
	if s == "" && len(p.fields) == 0 {
		return "."
	}
	for _, f := range p.fields {
		s += "." + f
	}
	return s
}

// scope is what dot and the variables are, as schemas, at a point of the
// template.
type scope struct {
	dot  any
	vars map[string]any
}

type parser struct {
	toks   []token
	pos    int
	scopes []scope
}

const supported = "fields (.Owner, .Claims, $c.Name), len, json, if/else/end, range/else/end"

// parseList parses nodes up to {{else}}, {{end}} or the end; it returns
// which of the first two stopped it ("" at the end).
func (p *parser) parseList() ([]node, string, error) {
	var nodes []node
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		p.pos++
		if t.action == nil {
			if t.text != "" {
				nodes = append(nodes, node{kind: kindText, text: t.text})
			}
			continue
		}
		switch w := t.action; w[0] {
		case "else", "end":
			if len(w) > 1 {
				return nil, "", fmt.Errorf("{{%s}} takes nothing", strings.Join(w, " "))
			}
			return nodes, w[0], nil
		case "if", "range":
			n, err := p.parseBlock(w)
			if err != nil {
				return nil, "", err
			}
			nodes = append(nodes, n)
		default:
			n, err := p.parseValue(w)
			if err != nil {
				return nil, "", err
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, "", nil
}

// parseValue parses {{PATH}}, {{len PATH}} or {{json PATH}}.
func (p *parser) parseValue(w []string) (node, error) {
	n := node{kind: kindValue}
	if w[0] == "len" || w[0] == "json" {
		n.fn, w = w[0], w[1:]
	}
	if len(w) != 1 {
		return n, fmt.Errorf("unsupported action {{%s}}: the template language has %s", strings.Join(w, " "), supported)
	}
	pa, schema, err := p.resolve(w[0])
	if err != nil {
		return n, err
	}
	if n.fn == "len" {
		if _, isList := schema.(List); !isList && schema != nil {
			return n, fmt.Errorf("len %s: not a list or a string", pa)
		}
	}
	n.path = pa
	return n, nil
}

// parseBlock parses {{if PATH}} and {{range [$k, ][$v :=] PATH}} with their
// bodies up to {{end}}.
func (p *parser) parseBlock(w []string) (node, error) {
	n := node{kind: kindIf}
	if w[0] == "range" {
		n.kind = kindRange
	}
	args := w[1:]
	if n.kind == kindRange && len(args) >= 3 && args[len(args)-2] == ":=" {
		vars := strings.Split(strings.Join(args[:len(args)-2], ""), ",")
		if len(vars) > 2 || !validVars(vars) {
			return n, fmt.Errorf("{{%s}}: want range $key, $value := PATH or range $value := PATH", strings.Join(w, " "))
		}
		n.value = vars[len(vars)-1]
		if len(vars) == 2 {
			n.key = vars[0]
		}
		args = args[len(args)-1:]
	}
	if len(args) != 1 {
		return n, fmt.Errorf("unsupported action {{%s}}: the template language has %s", strings.Join(w, " "), supported)
	}
	pa, schema, err := p.resolve(args[0])
	if err != nil {
		return n, err
	}
	n.path = pa
	inner := p.scopes[len(p.scopes)-1]
	if n.kind == kindRange {
		l, isList := schema.(List)
		if !isList {
			return n, fmt.Errorf("range %s: not a list", pa)
		}
		inner = scope{dot: l.Elem, vars: copyVars(inner.vars)}
		if n.key != "" {
			inner.vars[n.key] = nil
		}
		if n.value != "" {
			inner.vars[n.value] = l.Elem
		}
	}
	return n, p.parseBodies(&n, inner)
}

// parseBodies parses a block's body and {{else}} branch in scope.
func (p *parser) parseBodies(n *node, inner scope) error {
	p.scopes = append(p.scopes, inner)
	body, end, err := p.parseList()
	p.scopes = p.scopes[:len(p.scopes)-1]
	if err != nil {
		return err
	}
	n.body = body
	if end == "else" {
		// Inside range's else, dot is what it was outside.
		if n.alt, end, err = p.parseList(); err != nil {
			return err
		}
	}
	if end != "end" {
		return fmt.Errorf("{{%s %s}} has no {{end}}", map[nodeKind]string{kindIf: "if", kindRange: "range"}[n.kind], n.path)
	}
	return nil
}

func validVars(vars []string) bool {
	for _, v := range vars {
		if len(v) < 2 || v[0] != '$' || strings.ContainsAny(v[1:], ".$") {
			return false
		}
	}
	return true
}

func copyVars(m map[string]any) map[string]any {
	c := make(map[string]any, len(m)+2)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// resolve parses a path and checks its fields against the scope's
// schemas; it returns the schema of the value it names.
func (p *parser) resolve(s string) (path, any, error) {
	sc := p.scopes[len(p.scopes)-1]
	var pa path
	var cur any
	rest := s
	switch {
	case s == ".":
		return pa, sc.dot, nil
	case strings.HasPrefix(s, "$"):
		name, tail, _ := strings.Cut(s, ".")
		v, ok := sc.vars[name]
		if !ok {
			return pa, nil, fmt.Errorf("undefined variable %s", name)
		}
		pa.vari, cur, rest = name, v, tail
		if tail == "" {
			return pa, cur, nil
		}
	case strings.HasPrefix(s, "."):
		cur, rest = sc.dot, s[1:]
	default:
		return pa, nil, fmt.Errorf("unsupported action {{%s}}: the template language has %s", s, supported)
	}
	for _, f := range strings.Split(rest, ".") {
		obj, ok := cur.(Schema)
		if !ok {
			return pa, nil, fmt.Errorf("%s: %s has no fields", s, pa)
		}
		next, ok := obj[f]
		if !ok {
			return pa, nil, fmt.Errorf("%s: no field %q (the fields: %s)", s, f, fieldNames(obj))
		}
		pa.fields = append(pa.fields, f)
		cur = next
	}
	return pa, cur, nil
}

func fieldNames(s Schema) string {
	names := make([]string, 0, len(s))
	for k := range s {
		names = append(names, "."+k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
