package metrics

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ContentType is the Prometheus text format's media type, version 0.0.4:
// what node-exporter's textfile collector and the Pushgateway read.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// label is one label pair of a series.
type label struct{ name, value string }

// series is one sample: its labels, sorted by name, and its value.
type series struct {
	labels []label
	value  float64
}

// family is one metric: its help and its series.
type family struct {
	help   string
	series []series
}

// families are the gauges of one file or one push, by metric name.
type families map[string]*family

// gauges sets gauges into a families, each with the same constant labels;
// the first error (a series set twice) is kept.
type gauges struct {
	fs          families
	constLabels []label
	err         error
}

// set sets the gauge name with the constant labels and these.
func (g *gauges) set(name, help string, v float64, labels ...label) {
	all := append(slices.Clone(g.constLabels), labels...)
	slices.SortFunc(all, func(a, b label) int { return strings.Compare(a.name, b.name) })
	f := g.fs[name]
	if f == nil {
		f = &family{help: help}
		g.fs[name] = f
	}
	for _, s := range f.series {
		if slices.Equal(s.labels, all) && g.err == nil {
			g.err = fmt.Errorf("metrics: series %s%s set twice", name, labelText(all))
		}
	}
	f.series = append(f.series, series{labels: all, value: v})
}

// text renders the families in the text format, as Prometheus' own
// encoder does: families by name, each series by its label values (in
// label name order), labels by name.
func (fs families) text() []byte {
	var b bytes.Buffer
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f := fs[n]
		slices.SortStableFunc(f.series, compareSeries)
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", n, helpEscaper.Replace(f.help), n)
		for _, s := range f.series {
			b.WriteString(n)
			b.WriteString(labelText(s.labels))
			b.WriteByte(' ')
			b.WriteString(formatValue(s.value))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// compareSeries orders series by their number of labels, then by their
// label values in order.
func compareSeries(a, b series) int {
	if len(a.labels) != len(b.labels) {
		return len(a.labels) - len(b.labels)
	}
	for i := range a.labels {
		if c := strings.Compare(a.labels[i].value, b.labels[i].value); c != 0 {
			return c
		}
	}
	return 0
}

// labelText is {a="x",b="y"}, or "" without labels.
func labelText(labels []label) string {
	if len(labels) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.name)
		b.WriteString(`="`)
		b.WriteString(valueEscaper.Replace(l.value))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// formatValue is a sample value as the text format writes it.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, +1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
