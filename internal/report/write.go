package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/cost"
	"github.com/pvc-janitor/pvc-janitor/internal/kubeout"
	"github.com/pvc-janitor/pvc-janitor/internal/term"
)

// Output formats of Write.
const (
	FormatTable = "table"
	FormatWide  = "wide"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// maxReason is how many runes of a reason the table shows; json, yaml and
// wide show it whole.
const maxReason = 80

// none fills an empty cell, as kubectl does.
const none = "<none>"

// Write prints r in format: "table" (the default when format is empty),
// "wide", "json" or "yaml". The JSON and YAML field names are those of
// docs/spec.md#report-json; YAML is made from the JSON so that the two always agree.
func Write(w io.Writer, r *Report, format string) error {
	return WriteOutput(w, r, Output{Format: format})
}

// WriteOutput prints r as o says: Write's formats, kubectl's name,
// jsonpath=… and custom-columns=… (kubeout), --no-headers for the tables
// and --sort-by over the report's rows (its claims; prune's snapshots).
func WriteOutput(w io.Writer, r *Report, o Output) error {
	if r == nil {
		return errors.New("no report to write")
	}
	var rows []any // the rows as documents, once --sort-by built them
	if o.SortBy != "" {
		var err error
		if rows, err = sortRows(r, o.SortBy); err != nil {
			return err
		}
	}
	if spec, ok, err := kubeout.Parse(o.Format); ok {
		if err != nil {
			return err
		}
		return writeKubectl(w, r, spec, o.NoHeaders, rows)
	}
	switch o.Format {
	case FormatTable, "":
		return writeTable(w, r, tableOpts{noHeaders: o.NoHeaders})
	case FormatWide:
		return writeTable(w, r, tableOpts{wide: true, noHeaders: o.NoHeaders})
	case FormatJSON:
		return streamJSON(w, r)
	case FormatYAML:
		b, err := marshalJSON(r)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return fmt.Errorf("convert report to yaml: %w", err)
		}
		_, err = w.Write(y)
		return err
	default:
		return fmt.Errorf("unknown output format %q: want table, wide, json, yaml, name, jsonpath=… or custom-columns=…", o.Format)
	}
}

// marshalJSON indents the report and leaves <, > and & alone: reasons name
// things like "<template>-<statefulset>-<ordinal>".
func marshalJSON(r *Report) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTable prints the claims and the snapshots as tables, then the
// summary lines. A fleet report groups by cluster: a CLUSTER column first,
// entries in the order of the clusters, one summary line per cluster and a
// total.
func writeTable(w io.Writer, r *Report, o tableOpts) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	o.fleet = len(r.Clusters) > 0
	claimTable(tw, r, o)
	snapshotTable(tw, r, o)
	if err := tw.Flush(); err != nil {
		return err
	}
	if o.noHeaders {
		return nil // rows only, as kubectl's --no-headers: no summary either
	}
	_, err := io.WriteString(w, summaryLines(r, o.fleet))
	return err
}

// tableOpts are the table's variants: -o wide, a fleet's CLUSTER column,
// --no-headers (no header row, no empty-scope line, no summary).
type tableOpts struct{ wide, fleet, noHeaders bool }

// claimTable writes the claims' table.
func claimTable(tw io.Writer, r *Report, o tableOpts) {
	wide, fleet := o.wide, o.fleet
	if len(r.Claims) == 0 {
		if !o.noHeaders {
			fmt.Fprintln(tw, "No claims in scope.")
		}
		return
	}
	head := []string{"NAMESPACE", "NAME", "WORKSPACE", "STATE", "SIZE", "ORPHANED-SINCE", "ACTION"}
	if fleet {
		head = append([]string{"CLUSTER"}, head...)
	}
	if wide {
		head = append(head, "CLASS", "RECLAIM", "UID", "VOLUME", "SNAPSHOT", "SNAPSHOT-READY")
	}
	head = append(head, "REASON")
	if !o.noHeaders {
		fmt.Fprintln(tw, strings.Join(head, "\t"))
	}
	for _, e := range r.Claims {
		row := claimRow(e, wide)
		if fleet {
			row = append([]string{cell(e.Cluster)}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
}

// snapshotTable writes the snapshots' table (prune's), if any.
func snapshotTable(tw io.Writer, r *Report, o tableOpts) {
	wide, fleet := o.wide, o.fleet
	if len(r.Snapshots) == 0 {
		return
	}
	head := "NAMESPACE\tSNAPSHOT\tSOURCE-CLAIM\tDATA-TIME\tREADY\tDELETION-POLICY\tACTION\tREASON"
	if fleet {
		head = "CLUSTER\t" + head
	}
	if !o.noHeaders {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, head)
	}
	for _, s := range r.Snapshots {
		row := []string{cell(s.Namespace), cell(s.Name), cell(s.SourceClaim), cell(timeCell(s.DataTime)),
			strconv.FormatBool(s.ReadyToUse), cell(s.DeletionPolicy), cell(s.Action), reasonCell(s.Reason, wide)}
		if fleet {
			row = append([]string{cell(s.Cluster)}, row...)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
}

// summaryLines are the lines under the tables: per cluster, the summary,
// sizes, rescues, money, notes and the error.
func summaryLines(r *Report, fleet bool) string {
	var b strings.Builder
	b.WriteString("\n")
	for _, c := range r.Clusters {
		b.WriteString(clusterLine(c, r) + "\n")
	}
	if fleet {
		b.WriteString("total: ")
	}
	b.WriteString(summaryLine(r) + "\n")
	if line := sizeLine(r.Summary); line != "" {
		b.WriteString(line + "\n")
	}
	if line := rescuesLine(r.Summary.Rescues); line != "" {
		b.WriteString(line + "\n")
	}
	if c := r.Summary.Cost; c != nil {
		b.WriteString(fmt.Sprintf("monthly cost (prices' currency): %.2f in unused claims, %.2f in superseded claims, %.2f in rescues; this run saved %.2f",
			c.Orphaned, c.Superseded, c.Rescues, c.Saved))
		if c.Unpriced > 0 {
			b.WriteString(fmt.Sprintf(" (%s without a price)", plural(c.Unpriced, "claim", "claims")))
		}
		b.WriteString("\n")
	}
	if r.UnusedCondition == "ignored" {
		b.WriteString("note: the claims' Unused condition is ignored in this run: the controller manager does not maintain it\n")
	}
	if r.ServerVersion != "" && classify.ConditionSupport(r.ServerVersion) == classify.SupportNone {
		b.WriteString("note: Kubernetes " + r.ServerVersion + " has no Unused condition: orphaned-since is the janitor's own marks, and the grace period guards uses between runs\n")
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + term.OneLine(n) + "\n")
	}
	if r.Error != "" {
		b.WriteString("error: " + term.OneLine(r.Error) + "\n")
	}
	return b.String()
}

// claimRow is a claim's row of the table.
func claimRow(e *ClaimEntry, wide bool) []string {
	size := ""
	if e.Capacity > 0 {
		size = cost.Bytes(e.Capacity)
	}
	row := []string{cell(e.Namespace), cell(e.Name), cell(e.Workspace), cell(e.State), cell(size), cell(timeCell(e.OrphanedSince)), cell(e.Action)}
	if wide {
		snap, ready := "", ""
		if e.Snapshot != nil {
			snap, ready = e.Snapshot.Name, strconv.FormatBool(e.Snapshot.ReadyToUse)
		}
		row = append(row, cell(e.StorageClass), cell(e.ReclaimPolicy), cell(e.UID), cell(e.VolumeName), cell(snap), cell(ready))
	}
	return append(row, reasonCell(e.Reason, wide))
}

// timeCell renders an optional time in RFC 3339.
func timeCell(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// reasonCell is a reason cell: whole in the wide table, cut otherwise.
func reasonCell(reason string, wide bool) string {
	if wide {
		return cell(reason)
	}
	return truncate(cell(reason), maxReason)
}

// summaryLine renders the summary, states in precedence order, e.g.
// "3 claims: 1 InUse, 1 Orphaned, 1 Rescued; 0 snapshots created, 0 claims
// deleted, 0 failures".
func summaryLine(r *Report) string {
	s := r.Summary
	var states []string
	seen := map[string]bool{}
	for _, cs := range classify.States {
		st := string(cs)
		seen[st] = true
		if n := s.States[st]; n > 0 {
			states = append(states, fmt.Sprintf("%d %s", n, st))
		}
	}
	var other []string
	for st, n := range s.States {
		if !seen[st] && n > 0 {
			other = append(other, fmt.Sprintf("%d %s", n, st))
		}
	}
	sort.Strings(other)
	states = append(states, other...)

	line := plural(s.Claims, "claim", "claims")
	if len(states) > 0 {
		line += ": " + strings.Join(states, ", ")
	}
	line += "; " + plural(s.SnapshotsCreated, "snapshot created", "snapshots created") +
		", " + plural(s.ClaimsDeleted, "claim deleted", "claims deleted") +
		", " + plural(s.Failures, "failure", "failures")
	switch {
	case r.MarksOnly:
		line += " (marks only: nothing but the janitor's marks was written)"
	case r.DryRun:
		line += " (dry run: nothing was changed)"
	}
	return line
}

// clusterLine is one cluster's summary in a fleet report, e.g. "cluster
// west: 3 claims: …" or "cluster east: exit 1: error: …".
func clusterLine(c ClusterBlock, r *Report) string {
	line := "cluster " + c.Name + ": "
	if c.Summary != nil {
		line += summaryLine(&Report{Summary: *c.Summary, DryRun: r.DryRun, MarksOnly: r.MarksOnly})
	}
	if c.ExitCode != 0 {
		if c.Summary != nil {
			line += "; "
		}
		line += "exit " + strconv.Itoa(c.ExitCode)
	}
	if c.Error != "" {
		line += ": error: " + term.OneLine(c.Error)
	}
	return line
}

// sizeLine is the summary's bytes: per state, freed and not freed.
func sizeLine(s Summary) string {
	if len(s.BytesByState) == 0 && s.FreedBytes == 0 && s.UnfreedBytes == 0 {
		return ""
	}
	var parts []string
	for _, st := range classify.States {
		if n := s.BytesByState[string(st)]; n > 0 {
			parts = append(parts, cost.Bytes(n)+" "+string(st))
		}
	}
	line := "size: " + strings.Join(parts, ", ")
	if s.FreedBytes > 0 || s.UnfreedBytes > 0 {
		line += "; freed " + cost.Bytes(s.FreedBytes)
	}
	if s.UnfreedBytes > 0 {
		line += "; not freed " + cost.Bytes(s.UnfreedBytes) + " (reclaim policy Retain: Released volumes " + strings.Join(s.ReleasedVolumes, ", ") + ")"
	}
	return line
}

// rescuesLine is the table's line about the janitor's ready rescues: how
// many, their bytes, and how old (only the buckets that have some).
func rescuesLine(r *Rescues) string {
	if r == nil || r.Count == 0 {
		return ""
	}
	var ages []string
	for _, bk := range AgeBuckets {
		if n := r.ByAge[bk.Label]; n > 0 {
			ages = append(ages, bk.Label+" "+strconv.Itoa(n))
		}
	}
	held := plural(r.Count, "ready rescue holds ", "ready rescues hold ") + cost.Bytes(r.Bytes)
	if r.Bytes == 0 {
		// CSI's size_bytes 0 is "unknown", not empty.
		held = plural(r.Count, "ready rescue", "ready rescues") + ", restoreSize not reported"
	}
	return "rescues: " + held + " (age: " + strings.Join(ages, ", ") + ")"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// cell makes a value fit a table cell: one line, no tabs, <none> when empty.
func cell(s string) string {
	s = term.OneLine(s)
	if s == "" {
		return none
	}
	return s
}

// truncate cuts s to at most n runes, ending in "…" when cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// streamJSON writes what marshalJSON makes, one claim at a time, so that a
// report of a hundred thousand claims is never held whole as JSON.
func streamJSON(w io.Writer, r *Report) error {
	shell := *r
	shell.Claims = nil
	head, err := marshalJSON(&shell)
	if err != nil {
		return err
	}
	const hole = `"claims": null`
	if r.Claims == nil {
		_, err := w.Write(head)
		return err
	}
	i := bytes.Index(head, []byte(hole))
	if i < 0 {
		return errors.New("encode report: no claims field to stream into")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.Write(head[:i])
	if len(r.Claims) == 0 {
		_, _ = bw.WriteString(`"claims": []`)
	} else {
		_, _ = bw.WriteString("\"claims\": [\n")
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("    ", "  ")
		for j := range r.Claims {
			buf.Reset()
			if err := enc.Encode(r.Claims[j]); err != nil {
				return fmt.Errorf("encode report: %w", err)
			}
			_, _ = bw.WriteString("    ")
			_, _ = bw.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
			if j < len(r.Claims)-1 {
				_, _ = bw.WriteString(",")
			}
			_, _ = bw.WriteString("\n")
		}
		_, _ = bw.WriteString("  ]")
	}
	_, _ = bw.Write(head[i+len(hole):])
	return bw.Flush()
}
