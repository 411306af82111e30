package msgtmpl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

type evaluator struct {
	out  *bytes.Buffer
	vars []map[string]any // innermost last
}

func (e *evaluator) run(nodes []node, dot any) error {
	for i := range nodes {
		if err := e.node(&nodes[i], dot); err != nil {
			return err
		}
	}
	return nil
}

func (e *evaluator) node(n *node, dot any) error {
	switch n.kind {
	case kindText:
		e.out.WriteString(n.text)
	case kindValue:
		return e.value(n, dot)
	case kindIf:
		v, err := e.lookup(n.path, dot)
		if err != nil {
			return err
		}
		if truth(v) {
			return e.run(n.body, dot)
		}
		return e.run(n.alt, dot)
	case kindRange:
		return e.rangeOver(n, dot)
	}
	return nil
}

func (e *evaluator) value(n *node, dot any) error {
	v, err := e.lookup(n.path, dot)
	if err != nil {
		return err
	}
	switch n.fn {
	case "len":
		switch x := v.(type) {
		case []any:
			e.out.WriteString(strconv.Itoa(len(x)))
		case string:
			e.out.WriteString(strconv.Itoa(len(x)))
		case nil:
			e.out.WriteString("0")
		default:
			return fmt.Errorf("len %s: not a list or a string", n.path)
		}
	case "json":
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("json %s: %w", n.path, err)
		}
		e.out.Write(b)
	default:
		e.out.WriteString(format(v))
	}
	return nil
}

func (e *evaluator) rangeOver(n *node, dot any) error {
	v, err := e.lookup(n.path, dot)
	if err != nil {
		return err
	}
	items, _ := v.([]any)
	if len(items) == 0 {
		return e.run(n.alt, dot)
	}
	e.vars = append(e.vars, map[string]any{})
	defer func() { e.vars = e.vars[:len(e.vars)-1] }()
	for i, item := range items {
		if n.key != "" {
			e.vars[len(e.vars)-1][n.key] = int64(i)
		}
		if n.value != "" {
			e.vars[len(e.vars)-1][n.value] = item
		}
		if err := e.run(n.body, item); err != nil {
			return err
		}
	}
	return nil
}

// lookup follows a path; Parse checked its fields against the schema, so a
// field missing from the data is an error in the caller's data.
func (e *evaluator) lookup(p path, dot any) (any, error) {
	cur := dot
	if p.vari != "" {
		found := false
		for i := len(e.vars) - 1; i >= 0 && !found; i-- {
			cur, found = e.vars[i][p.vari]
		}
		if !found {
			return nil, fmt.Errorf("undefined variable %s", p.vari)
		}
	}
	for _, f := range p.fields {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not an object", p)
		}
		if cur, ok = obj[f]; !ok {
			return nil, fmt.Errorf("%s: no field %q in the data", p, f)
		}
	}
	return cur, nil
}

// truth is text/template's: false, 0, "", nil and an empty list are false.
func truth(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case time.Time:
		return !x.IsZero()
	}
	return true
}

// format prints a value as text/template prints it, except nil: nothing
// (text/template prints "<nil>" into the payload).
func format(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case time.Time:
		return x.Format(time.RFC3339)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
