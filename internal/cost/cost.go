// Package cost turns bytes into money: a price table per storage class
// (per GiB-month, from --price CLASS=PRICE, "*" for every other class) and
// one price for snapshots (--snapshot-price). No price given means no
// money anywhere: the janitor never makes a price up.
package cost

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// GiB is the unit prices are per (a GiB-month).
const GiB = 1 << 30

// Prices is the price table.
type Prices struct {
	byClass  map[string]float64
	fallback *float64 // "*"
	snapshot *float64
}

// Parse reads --price entries ("CLASS=PRICE", "*=PRICE"; repeatable, or
// comma-separated) and --snapshot-price ("" for none). Prices are
// non-negative decimal numbers per GiB-month, in any one currency.
func Parse(entries []string, snapshot string) (Prices, error) {
	p := Prices{byClass: map[string]float64{}}
	for _, e := range entries {
		for _, part := range strings.Split(e, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			class, raw, ok := strings.Cut(part, "=")
			class = strings.TrimSpace(class)
			if !ok || class == "" {
				return Prices{}, fmt.Errorf("--price %q: want CLASS=PRICE (per GiB-month; * for every other class)", part)
			}
			v, err := price(raw)
			if err != nil {
				return Prices{}, fmt.Errorf("--price %q: %w", part, err)
			}
			if class == "*" {
				if p.fallback != nil {
					return Prices{}, fmt.Errorf("--price: * given twice")
				}
				p.fallback = &v
				continue
			}
			if _, dup := p.byClass[class]; dup {
				return Prices{}, fmt.Errorf("--price: class %q given twice", class)
			}
			p.byClass[class] = v
		}
	}
	if snapshot != "" {
		v, err := price(snapshot)
		if err != nil {
			return Prices{}, fmt.Errorf("--snapshot-price %q: %w", snapshot, err)
		}
		p.snapshot = &v
	}
	return p, nil
}

func price(raw string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("price %q is not a non-negative number", strings.TrimSpace(raw))
	}
	return v, nil
}

// Any reports whether any price was given: without one, reports carry no
// money at all.
func (p Prices) Any() bool { return len(p.byClass) > 0 || p.fallback != nil || p.snapshot != nil }

// Claim is the monthly cost of bytes of a volume of class; ok is false when
// no price applies to the class.
func (p Prices) Claim(class string, bytes int64) (float64, bool) {
	v, ok := p.byClass[class]
	if !ok {
		if p.fallback == nil {
			return 0, false
		}
		v = *p.fallback
	}
	return monthly(v, bytes), true
}

// Snapshot is the monthly cost of bytes of snapshots; ok is false without
// --snapshot-price.
func (p Prices) Snapshot(bytes int64) (float64, bool) {
	if p.snapshot == nil {
		return 0, false
	}
	return monthly(*p.snapshot, bytes), true
}

func monthly(perGiB float64, bytes int64) float64 {
	return math.Round(perGiB*float64(bytes)/GiB*100) / 100
}

// String renders the table as the flags that make it, sorted.
func (p Prices) String() string {
	var parts []string
	for c, v := range p.byClass {
		parts = append(parts, c+"="+strconv.FormatFloat(v, 'f', -1, 64))
	}
	sort.Strings(parts)
	if p.fallback != nil {
		parts = append(parts, "*="+strconv.FormatFloat(*p.fallback, 'f', -1, 64))
	}
	s := strings.Join(parts, ",")
	if p.snapshot != nil {
		s += "; snapshots " + strconv.FormatFloat(*p.snapshot, 'f', -1, 64)
	}
	return s
}

// Bytes renders a byte count as kubectl-style binary units (Ki, Mi, Gi,
// Ti), at most one decimal.
func Bytes(n int64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	v := float64(n)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(n, 10)
	}
	s := strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	return s + units[i]
}
