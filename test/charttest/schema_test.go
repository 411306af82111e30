package charttest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/pvc-janitor/pvc-janitor/internal/config"
)

// TestSchemaAcceptsWhatTheJanitorAccepts (issue 39 item 11): for the
// durations with bounds, the chart's values.schema.json accepts a value
// exactly when the janitor does, so that `helm install` refuses at once what
// every run would refuse (clock-skew 10m), and never what a run takes.
// It needs no cluster and no helm: the schema's pattern against
// config.Load.
func TestSchemaAcceptsWhatTheJanitorAccepts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "pvc-janitor", "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Config struct {
				Properties map[string]struct {
					Pattern string
					Not     *struct{ Pattern string }
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	values := []string{"0", "0s", "1ns", "500ms", "2s", "1.5s", "59s", "90s", "299.9s", "300s", "300.0s", "301s", "1000s",
		"1m", "1m30s", "4m59s", "4m59.5s", "2.5m", "5m", "5m0s", "5m1s", "5.5m", "6m", "10m", "1h", "0.5h",
		"299999ms", "300000ms", "300001ms", "-1s", "2x", ""}
	for _, key := range []string{"clock-skew", "request-timeout"} {
		prop, ok := schema.Properties.Config.Properties[key]
		if !ok || prop.Pattern == "" {
			t.Fatalf("values.schema.json: config.%s has no pattern", key)
		}
		pattern := regexp.MustCompile(prop.Pattern)
		for _, v := range values {
			if v == "" {
				continue
			}
			chart := pattern.MatchString(v)
			if prop.Not != nil && regexp.MustCompile(prop.Not.Pattern).MatchString(v) {
				chart = false
			}
			fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
			config.Register(fs)
			janitor := fs.Parse([]string{"--" + key, v}) == nil
			if janitor {
				_, err := config.Load(fs, config.CommandScan, func(string) (string, bool) { return "", false })
				janitor = err == nil
			}
			if chart != janitor {
				t.Errorf("config.%s: %q: the chart's schema accepts it: %v, the janitor: %v", key, v, chart, janitor)
			}
		}
	}
}

// TestChartDocAnchorsResolve (issue 39 item 10): every docs/FILE.md#anchor
// the chart's values, schema and templates cite exists (a heading or an
// <a id>), as scripts/lint/repocheck checks the Markdown links; the alerts
// pointed at docs/usage.md#metrics, which does not exist.
func TestChartDocAnchorsResolve(t *testing.T) {
	chart := filepath.Join("..", "..", "charts", "pvc-janitor")
	var files []string
	for _, glob := range []string{"*.yaml", "*.json", "templates/*.yaml", "templates/*.tpl", "templates/*.txt", "templates/tests/*.yaml"} {
		m, _ := filepath.Glob(filepath.Join(chart, glob))
		files = append(files, m...)
	}
	cite := regexp.MustCompile(`docs/([a-z-]+\.md)#([a-z0-9-]+)`)
	anchors := map[string]map[string]bool{}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cite.FindAllStringSubmatch(string(data), -1) {
			doc, anchor := m[1], m[2]
			if anchors[doc] == nil {
				anchors[doc] = docAnchors(t, filepath.Join("..", "..", "docs", doc))
			}
			n++
			if !anchors[doc][anchor] {
				t.Errorf("%s cites docs/%s#%s, which has no such heading or anchor", f, doc, anchor)
			}
		}
	}
	if n == 0 {
		t.Fatal("no docs/…#anchor cited in the chart: the check finds nothing")
	}
}

// docAnchors returns the anchors of a Markdown file: <a id="…"> and its
// headings as GitHub slugs them.
func docAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`<a id="([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		out[m[1]] = true
	}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(data), -1) {
		slug := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		out[strings.ReplaceAll(slug, " ", "-")] = true
	}
	return out
}
