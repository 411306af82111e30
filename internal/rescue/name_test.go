package rescue

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

var since = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestNameKnownAnswers checks the the docs/spec.md#rescue-name formula against answers computed
// outside Go (printf 'uid/time' | sha256sum | cut -c1-10), never against
// Name itself.
func TestNameKnownAnswers(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	cases := []struct {
		name  string
		claim string
		uid   types.UID
		since time.Time
		want  string
	}{
		{"plain", "ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", since, "ws-abc-rescue-000613e9d6"},
		// The same moment in another zone is the same orphaned-since.
		{"zone", "ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", since.In(cet), "ws-abc-rescue-000613e9d6"},
		// Below a second is below the mark's precision.
		{"subsecond", "ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", since.Add(900 * time.Millisecond), "ws-abc-rescue-000613e9d6"},
		// Orphaned anew one second later: another rescue.
		{"later", "ws-abc", "u1", since.Add(time.Second), "ws-abc-rescue-322e124c79"},
		// Another claim (UID) of the same name.
		{"other uid", "ws-abc", "u2", since, "ws-abc-rescue-54e2ce65f7"},
		{"upper case claim", "WS-ABC", "u2", since, "ws-abc-rescue-54e2ce65f7"},
		{"truncated", strings.Repeat("a", 250), "u2", since, strings.Repeat("a", 253-len("-rescue-")-10) + "-rescue-54e2ce65f7"},
		{"truncated at a dot", strings.Repeat("a", 234) + ".b" + strings.Repeat("c", 20), "u2", since, strings.Repeat("a", 234) + "-rescue-54e2ce65f7"},
		{"nothing left", "-.-", "", time.Time{}, "claim-rescue-57c126eebc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Name(c.claim, c.uid, c.since); got != c.want {
				t.Errorf("Name(%q, %q, %s) = %q, want %q", c.claim, c.uid, c.since, got, c.want)
			}
		})
	}
}

func TestNameIsDeterministicValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 240) + "-b." + strings.Repeat("c", 10)
	cases := []struct {
		claim, uid string
		since      time.Time
	}{
		{"ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", since},
		{"ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca428", since},
		{"ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", since.Add(time.Second)},
		{long, "u1", since},
		{strings.Repeat("x", 253), "u2", since},
		{strings.Repeat("y", 234) + "-.-z", "u3", since},
		{"a.b.c", "u4", since},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		n := Name(c.claim, types.UID(c.uid), c.since)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("Name(%q) = %q: not a DNS subdomain: %v", c.claim, n, errs)
		}
		if n != Name(c.claim, types.UID(c.uid), c.since) {
			t.Errorf("Name(%q) is not deterministic", c.claim)
		}
		if seen[n] {
			t.Errorf("Name(%q, %q, %s) = %q collides", c.claim, c.uid, c.since, n)
		}
		seen[n] = true
	}
}

// fuzzTime maps a fuzzed number of seconds to a time whose RFC 3339 form
// has four-digit years, as every real orphaned-since has.
func fuzzTime(sec int64) time.Time {
	const span = 253402300800 // 0001-01-01 to 9999-12-31, in seconds
	sec %= span
	if sec < 0 {
		sec += span
	}
	return time.Unix(sec-62135596800, 0).UTC()
}

func FuzzName(f *testing.F) {
	f.Add("ws-abc", "uid-1", int64(1767323045))
	f.Add(strings.Repeat("a", 300), "", int64(0))
	f.Add("-.-", "x", int64(-1))
	f.Fuzz(func(t *testing.T, claim, uid string, sec int64) {
		at := fuzzTime(sec)
		n := Name(claim, types.UID(uid), at)
		if len(n) > 253 {
			t.Fatalf("len %d", len(n))
		}
		// Claim names from the API are DNS subdomains; only check validity
		// for those inputs.
		if len(validation.IsDNS1123Subdomain(claim)) == 0 {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("Name(%q) = %q: %v", claim, n, errs)
			}
		}
		if n != Name(claim, types.UID(uid), at) {
			t.Fatal("not deterministic")
		}
	})
}
