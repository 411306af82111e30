package cost

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		entries  []string
		snapshot string
		err      string
		str      string
	}{
		{nil, "", "", ""},
		{[]string{"fast=0.17", "standard=0.04"}, "0.05", "", "fast=0.17,standard=0.04; snapshots 0.05"},
		{[]string{"fast=0.17,*=0.1"}, "", "", "fast=0.17,*=0.1"},
		{[]string{"fast"}, "", "want CLASS=PRICE", ""},
		{[]string{"=1"}, "", "want CLASS=PRICE", ""},
		{[]string{"fast=cheap"}, "", `price "cheap" is not a non-negative number`, ""},
		{[]string{"fast=-1"}, "", "not a non-negative number", ""},
		{[]string{"fast=NaN"}, "", "not a non-negative number", ""},
		{[]string{"fast=1", "fast=2"}, "", `class "fast" given twice`, ""},
		{[]string{"*=1", "*=2"}, "", "* given twice", ""},
		{nil, "x", `--snapshot-price "x"`, ""},
	} {
		p, err := Parse(c.entries, c.snapshot)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%v, %q): %v, want %q", c.entries, c.snapshot, err, c.err)
			}
			continue
		}
		if err != nil || p.String() != c.str || p.Any() != (c.str != "") {
			t.Errorf("Parse(%v, %q) = %q set %v, %v; want %q", c.entries, c.snapshot, p.String(), p.Any(), err, c.str)
		}
	}
}

func TestCosts(t *testing.T) {
	p, err := Parse([]string{"fast=0.20", "*=0.10"}, "0.05")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p.Claim("fast", 10*GiB); !ok || v != 2 {
		t.Errorf("fast 10Gi: %v %v, want 2", v, ok)
	}
	if v, ok := p.Claim("other", 5*GiB); !ok || v != 0.5 {
		t.Errorf("other 5Gi: %v %v, want 0.5 (the * price)", v, ok)
	}
	if v, ok := p.Snapshot(3 * GiB); !ok || v != 0.15 {
		t.Errorf("snapshot 3Gi: %v %v", v, ok)
	}
	q, _ := Parse([]string{"fast=0.20"}, "")
	if _, ok := q.Claim("slow", GiB); ok {
		t.Error("a class without a price (and no *) got one")
	}
	if _, ok := q.Snapshot(GiB); ok {
		t.Error("snapshots got a price without --snapshot-price")
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 1023: "1023", 1024: "1Ki", 1536: "1.5Ki", 10 * GiB: "10Gi", 1<<40 + 1<<39: "1.5Ti"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
