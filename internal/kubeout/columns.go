package kubeout

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/util/jsonpath"
)

// none is kubectl's empty cell.
const none = "<none>"

// Columns writes one row per item (a JSON document each), the columns'
// headers first unless noHeaders, aligned as kubectl aligns them. A path
// that finds nothing prints <none>, several values are joined by commas.
func Columns(w io.Writer, cols []Column, items []any, noHeaders bool) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0) // kubectl's widths
	if !noHeaders {
		hs := make([]string, len(cols))
		for i, c := range cols {
			hs[i] = c.Header
		}
		fmt.Fprintln(tw, strings.Join(hs, "\t"))
	}
	paths := make([]*pathFinder, len(cols))
	for i, c := range cols {
		p, err := newFinder(c.Path)
		if err != nil {
			return err
		}
		paths[i] = p
	}
	for _, item := range items {
		cells := make([]string, len(cols))
		for i, p := range paths {
			vals, err := p.values(item)
			if err != nil {
				return err
			}
			cells[i] = none
			if len(vals) > 0 {
				cells[i] = strings.Join(vals, ",")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// pathFinder finds the values of one relaxed path in a document, parsed
// once for every row.
type pathFinder struct {
	path string
	j    *jsonpath.JSONPath
}

func newFinder(path string) (*pathFinder, error) {
	j, err := newJSONPath(path)
	if err != nil {
		return nil, err
	}
	return &pathFinder{path: path, j: j}, nil
}

// found is what a path finds in doc, as values (nil when it finds nothing).
func (p *pathFinder) found(doc any) ([]reflect.Value, error) {
	rs, err := p.j.FindResults(doc)
	if err != nil {
		return nil, fmt.Errorf("error executing jsonpath %q: %v", p.path, err)
	}
	var out []reflect.Value
	for _, r := range rs {
		for _, v := range r {
			if v.IsValid() && !(v.Kind() == reflect.Interface && v.IsNil()) {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// values is what a path finds in doc, printed.
func (p *pathFinder) values(doc any) ([]string, error) {
	vs, err := p.found(doc)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, cell(v.Interface()))
	}
	return out, nil
}

// cell prints one value: a string as it is, a map or list as JSON.
func cell(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case map[string]any, []any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

// SortBy sorts items (JSON documents) by the value a --sort-by path finds
// in each (Order).
func SortBy(items []any, path string) error {
	idx, err := Order(items, path)
	if err != nil {
		return err
	}
	sorted := make([]any, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// Order is the order of items (JSON documents) by the value a --sort-by
// path finds in each: numbers by value, strings and everything else by
// their text; an item where the path finds nothing comes first. The order
// of equal items is kept. It returns item indexes, first to last.
func Order(items []any, path string) ([]int, error) {
	rel, err := Relaxed(path)
	if err != nil {
		return nil, err
	}
	p, err := newFinder(rel)
	if err != nil {
		return nil, err
	}
	type keyed struct {
		has  bool
		num  *float64
		text string
	}
	keys := make([]keyed, len(items))
	for i, it := range items {
		vs, err := p.found(it)
		if err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			continue
		}
		k := keyed{has: true, text: cell(vs[0].Interface())}
		if n, ok := vs[0].Interface().(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				k.num = &f
			}
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		switch {
		case ka.has != kb.has:
			return !ka.has
		case ka.num != nil && kb.num != nil:
			return *ka.num < *kb.num
		}
		return ka.text < kb.text
	})
	return idx, nil
}
