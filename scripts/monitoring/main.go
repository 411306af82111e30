// Command monitoring checks the chart's alerts and dashboard against what
// the janitor exports (make test runs it from test/charttest):
//
//	monitoring check -metrics pvc_janitor_claims,... rendered.yaml...
//
// Each file is helm template output. Every PrometheusRule's rule
// expressions and every dashboard's query expressions (a ConfigMap value
// that is Grafana dashboard JSON) must parse as PromQL (Prometheus's own
// parser, github.com/prometheus/prometheus/promql/parser) and select only
// metrics in -metrics; template variables ($command) are Grafana's and
// allowed in label values. It prints what it checked and exits 1 on the
// first file with a problem, naming every problem.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "check" {
		fmt.Fprintln(os.Stderr, "usage: monitoring check -metrics NAME,... FILE...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	names := fs.String("metrics", "", "the metric names the janitor exports, comma-separated")
	_ = fs.Parse(os.Args[2:])
	known := strings.Split(*names, ",")
	for _, f := range fs.Args() {
		n, err := checkFile(f, known)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", f, err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d expressions parse and use only the janitor's metrics\n", f, n)
	}
}

// query is one expression and where it came from.
type query struct{ where, expr string }

// checkFile checks the expressions of one rendered file; it returns how
// many it checked.
func checkFile(path string, known []string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var qs []query
	for _, doc := range strings.Split(string(b), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return 0, err
		}
		q, err := queries(obj)
		if err != nil {
			return 0, err
		}
		qs = append(qs, q...)
	}
	if len(qs) == 0 {
		return 0, errors.New("no alert or dashboard expression found")
	}
	var problems []string
	p := parser.NewParser(parser.Options{})
	for _, q := range qs {
		problems = append(problems, check(p, q, known)...)
	}
	if len(problems) > 0 {
		return 0, errors.New(strings.Join(problems, "; "))
	}
	return len(qs), nil
}

// queries are a rendered object's expressions: a PrometheusRule's rules, a
// ConfigMap's dashboards' targets.
func queries(obj map[string]any) ([]query, error) {
	var out []query
	switch obj["kind"] {
	case "PrometheusRule":
		spec, _ := obj["spec"].(map[string]any)
		groups, _ := spec["groups"].([]any)
		for _, g := range groups {
			rules, _ := g.(map[string]any)["rules"].([]any)
			for _, r := range rules {
				rm := r.(map[string]any)
				out = append(out, query{where: fmt.Sprintf("alert %v", rm["alert"]), expr: fmt.Sprint(rm["expr"])})
			}
		}
	case "ConfigMap":
		data, _ := obj["data"].(map[string]any)
		for k, v := range data {
			var dash struct {
				Panels []struct {
					Title   string
					Targets []struct{ Expr string }
				}
			}
			if !strings.HasSuffix(k, ".json") || json.Unmarshal([]byte(fmt.Sprint(v)), &dash) != nil {
				continue
			}
			for _, p := range dash.Panels {
				for _, t := range p.Targets {
					out = append(out, query{where: "panel " + p.Title, expr: t.Expr})
				}
			}
		}
	}
	return out, nil
}

// check parses one expression and names what is wrong with it.
func check(p parser.Parser, q query, known []string) []string {
	expr, err := p.ParseExpr(q.expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %q does not parse: %v", q.where, q.expr, err)}
	}
	var problems []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && !slices.Contains(known, vs.Name) {
			problems = append(problems, fmt.Sprintf("%s: %q selects %q, which the janitor does not export", q.where, q.expr, vs.Name))
		}
		return nil
	})
	return problems
}
