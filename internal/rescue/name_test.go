package rescue

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNameIsDeterministicValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 240) + "-b." + strings.Repeat("c", 10)
	cases := []struct{ claim, uid string }{
		{"ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"},
		{"ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca428"},
		{long, "u1"},
		{strings.Repeat("x", 253), "u2"},
		{strings.Repeat("y", 234) + "-.-z", "u3"},
		{"a.b.c", "u4"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		n := Name(c.claim, types.UID(c.uid))
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			t.Errorf("Name(%q) = %q: not a DNS subdomain: %v", c.claim, n, errs)
		}
		if n != Name(c.claim, types.UID(c.uid)) {
			t.Errorf("Name(%q) is not deterministic", c.claim)
		}
		if seen[n] {
			t.Errorf("Name(%q, %q) = %q collides", c.claim, c.uid, n)
		}
		seen[n] = true
	}
	if got := Name("ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"); !strings.HasPrefix(got, "ws-abc-rescue-") || len(got) != len("ws-abc-rescue-")+10 {
		t.Errorf("Name = %q, want ws-abc-rescue-<10 hex>", got)
	}
}

func FuzzName(f *testing.F) {
	f.Add("ws-abc", "uid-1")
	f.Add(strings.Repeat("a", 300), "")
	f.Add("-.-", "x")
	f.Fuzz(func(t *testing.T, claim, uid string) {
		n := Name(claim, types.UID(uid))
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
		if n != Name(claim, types.UID(uid)) {
			t.Fatal("not deterministic")
		}
	})
}
