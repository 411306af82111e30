package rescue

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzNameDistinct extends FuzzName (name_test.go): for any claim name the
// API server accepts and any two UIDs, the rescue names are valid DNS
// subdomains of at most 253 characters, deterministic, recognisably the
// claim's (its name, truncated, then -rescue-<10 hex>), and distinct when
// the UIDs differ (a claim recreated under the same name never finds its
// predecessor's snapshot by name). Seed corpus: testdata/fuzz/FuzzNameDistinct.
func FuzzNameDistinct(f *testing.F) {
	f.Add("ws-abc", "1b4e28ba-2fa1-11d2-883f-0016d3cca427", "1b4e28ba-2fa1-11d2-883f-0016d3cca428")
	f.Add(strings.Repeat("a", 253), "u1", "u2")
	f.Add(strings.Repeat("a", 234)+".b", "u1", "")
	f.Add("a.b.c", "", "x")
	f.Add("x", "same", "same")
	f.Fuzz(func(t *testing.T, claim, uid1, uid2 string) {
		if len(validation.IsDNS1123Subdomain(claim)) > 0 {
			return // not a claim name the API server would accept
		}
		a, b := Name(claim, types.UID(uid1)), Name(claim, types.UID(uid2))
		for _, n := range []string{a, b} {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("Name(%q) = %q: %v", claim, n, errs)
			}
			i := strings.LastIndex(n, "-rescue-")
			if i < 1 || len(n)-i != len("-rescue-")+10 || !strings.HasPrefix(claim, n[:i]) {
				t.Fatalf("Name(%q) = %q is not <claim, truncated>-rescue-<10 hex>", claim, n)
			}
		}
		if a != Name(claim, types.UID(uid1)) {
			t.Fatal("not deterministic")
		}
		if (uid1 == uid2) != (a == b) {
			t.Fatalf("uids %q and %q give %q and %q", uid1, uid2, a, b)
		}
	})
}
