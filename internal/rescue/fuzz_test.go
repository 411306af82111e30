package rescue

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzNameDistinct extends FuzzName (name_test.go): for any claim name the
// API server accepts, any two UIDs and any two orphaned-since moments, the
// rescue names are valid DNS subdomains of at most 253 characters,
// deterministic, recognisably the claim's (its name, truncated, then
// -rescue-<10 hex>), and distinct when the UIDs or the moments differ (a
// claim recreated under the same name never finds its predecessor's snapshot
// by name, and a claim orphaned anew gets a new rescue). Seed corpus:
// testdata/fuzz/FuzzNameDistinct.
func FuzzNameDistinct(f *testing.F) {
	f.Add("ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "1b4e28ba-2fa1-11d2-883f-0016d3cca428", int64(1767323045), int64(1767323045))
	f.Add(strings.Repeat("a", 253), "u1", "u2", int64(0), int64(0))
	f.Add(strings.Repeat("a", 234)+".b", "u1", "", int64(1), int64(2))
	f.Add("a.b.c", "", "x", int64(-5), int64(7))
	f.Add("x", "same", "same", int64(1767323045), int64(1767323046))
	f.Add("x", "same", "same", int64(42), int64(42))
	f.Fuzz(func(t *testing.T, claim, uid1, uid2 string, sec1, sec2 int64) {
		if len(validation.IsDNS1123Subdomain(claim)) > 0 {
			return // not a claim name the API server would accept
		}
		t1, t2 := fuzzTime(sec1), fuzzTime(sec2)
		a, b := Name(claim, types.UID(uid1), t1), Name(claim, types.UID(uid2), t2)
		for _, n := range []string{a, b} {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("Name(%q) = %q: %v", claim, n, errs)
			}
			i := strings.LastIndex(n, "-rescue-")
			if i < 1 || len(n)-i != len("-rescue-")+10 || !strings.HasPrefix(claim, n[:i]) {
				t.Fatalf("Name(%q) = %q is not <claim, truncated>-rescue-<10 hex>", claim, n)
			}
		}
		if a != Name(claim, types.UID(uid1), t1) {
			t.Fatal("not deterministic")
		}
		same := uid1 == uid2 && t1.Equal(t2)
		if same != (a == b) {
			t.Fatalf("(%q, %s) and (%q, %s) give %q and %q", uid1, t1, uid2, t2, a, b)
		}
	})
}
