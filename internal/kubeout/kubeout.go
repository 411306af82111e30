// Package kubeout is the kubectl side of the janitor's output: the -o kinds
// name, jsonpath=TEMPLATE and custom-columns=SPEC, --no-headers and
// --sort-by, with kubectl's semantics and its error messages. Templates run
// on client-go's JSONPath engine (k8s.io/client-go/util/jsonpath), the one
// kubectl runs; a column's or --sort-by's path is relaxed as kubectl's is
// (".name", "name", "{.name}" and "{name}" are one path). It knows nothing
// of reports: it works on JSON documents (decoded into any).
package kubeout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// The -o kinds of this package.
const (
	KindName          = "name"
	KindJSONPath      = "jsonpath"
	KindCustomColumns = "custom-columns"
)

// Spec is a parsed -o value of one of this package's kinds.
type Spec struct {
	Kind     string
	Template string   // jsonpath: the template as given
	Columns  []Column // custom-columns
}

// Column is one column of custom-columns: its header and relaxed path.
type Column struct {
	Header string
	Path   string // "{.field}"
}

// Parse parses an -o value. ok is false when it is none of this package's
// kinds (table, wide, json, yaml are the caller's); err is kubectl's
// message for a template or spec that does not parse.
func Parse(output string) (s Spec, ok bool, err error) {
	kind, arg, hasArg := strings.Cut(output, "=")
	switch kind {
	case KindName:
		return Spec{Kind: KindName}, !hasArg, nil
	case KindJSONPath:
		if !hasArg || arg == "" {
			return Spec{}, true, fmt.Errorf("template format specified but no template given")
		}
		if _, err := newJSONPath(arg); err != nil {
			return Spec{}, true, err
		}
		return Spec{Kind: KindJSONPath, Template: arg}, true, nil
	case KindCustomColumns:
		if !hasArg || arg == "" {
			return Spec{}, true, fmt.Errorf("custom-columns format specified but no custom columns given")
		}
		cols, err := parseColumns(arg)
		return Spec{Kind: KindCustomColumns, Columns: cols}, true, err
	}
	return Spec{}, false, nil
}

// parseColumns parses "HEADER:path,HEADER:path".
func parseColumns(spec string) ([]Column, error) {
	var cols []Column
	for _, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		rel, err := Relaxed(path)
		if err != nil {
			return nil, err
		}
		if _, err := newJSONPath(rel); err != nil {
			return nil, err
		}
		cols = append(cols, Column{Header: header, Path: rel})
	}
	return cols, nil
}

var relaxed = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

// Relaxed turns a field path as kubectl's custom-columns and --sort-by take
// it (".a.b", "a.b", "{.a.b}", "{a.b}") into a JSONPath template "{.a.b}".
func Relaxed(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	m := relaxed.FindStringSubmatch(path)
	if m == nil {
		return "", fmt.Errorf("unexpected path string, expected a 'name1.name2' or '.name1.name2' or '{name1.name2}' or '{.name1.name2}'")
	}
	field := m[1]
	if field == "" {
		field = m[2]
	}
	return "{." + field + "}", nil
}

// CheckSortBy checks a --sort-by path: kubectl's message when it does not
// parse.
func CheckSortBy(path string) error {
	rel, err := Relaxed(path)
	if err != nil {
		return err
	}
	_, err = newJSONPath(rel)
	return err
}

func newJSONPath(template string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("out").AllowMissingKeys(true)
	if err := j.Parse(template); err != nil {
		return nil, fmt.Errorf("error parsing jsonpath %s, %v", template, err)
	}
	return j, nil
}

// Document is v as a JSON document (maps, slices, strings, float64s): what
// the templates run on, field names as in -o json.
func Document(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return doc, d.Decode(&doc)
}

// JSONPath runs a template (Parse checked it) on doc and writes the result,
// as kubectl's -o jsonpath does (missing keys print nothing).
func JSONPath(w io.Writer, template string, doc any) error {
	j, err := newJSONPath(template)
	if err != nil {
		return err
	}
	if err := j.Execute(w, doc); err != nil {
		return fmt.Errorf("error executing jsonpath %q: %v", template, err)
	}
	return nil
}
