package archtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The hand-written replacements of libraries were each made for a measured
// reason (docs/benchmarks.md); these rows keep the reason alive in the
// linked binary, where it was measured. text/template's executor came back
// once already (20aa66b, the notification routes), and the binary grew by
// 19 MB before anyone looked.
var notLinked = []struct {
	what     string
	prefix   string // of a symbol's name, as `go tool nm` prints it
	measured string // what it protects, from docs/benchmarks.md
}{
	{"text/template's executor (msgtmpl writes the routes' templates; --help is written in Go)",
		"text/template.(*state).",
		"its reflect.Value.MethodByName keeps every exported method of every type: release binary 50.2 → 31.1 MB, `janitor version` 31.0 → 25.4 MiB, a 10k scan 60.6 → 51.2 MiB (median; route templates without text/template, 2026-12-03; 155a7e5, --help: 49.9 → 30.8 MB)"},
	{"text/template's Execute", "text/template.(*Template).Execute", "as above"},
	{"github.com/prometheus/client_golang (metrics writes the text format)",
		"github.com/prometheus/",
		"4ec9191: client_golang and its protobuf runtime were 4.5 MB; binary 18.1 MB, `janitor version` 26.3 → 15.7 MiB"},
	{"the protobuf runtime client_golang needs (kube/wire walks protobuf with protowire alone)",
		"google.golang.org/protobuf/internal/impl.", "as above"},
	{"client-go's Clientset (kube.API is the typed client of the five groups the janitor calls)",
		"k8s.io/client-go/kubernetes",
		"2ec9f01: every API group linked and registered, 7.2 MB of k8s.io/api; binary 31.2 → 20.1 MB, RSS at the first request 27.6 → 20.4 MiB, a 10k scan 51-54 → 43-46 MiB"},
	{"client-go's discovery (what the snapshot Clientset and the REST mapper import)",
		"k8s.io/client-go/discovery.", "as above"},
	{"client-go's generic typed client, gentype (its fake object tracker and server-side apply's machinery)",
		"k8s.io/client-go/gentype.", "as above (kube/api.go)"},
}

// apiGroups are the k8s.io/api packages the binary may link: the five
// groups kube.API calls, and what they import (batch/v1 imports
// scheduling/v1alpha3 since Kubernetes 1.35). Any other is a group
// registered for nothing: the Clientset's cost, 2ec9f01.
var apiGroups = []string{"apps/v1", "batch/v1", "coordination/v1", "core/v1", "storage/v1", "scheduling/v1alpha3"}

// maxBinary bounds the unstripped binary `go build` makes on a 64-bit
// platform: 25.9 MB at this test's commit, 32.2 MB with text/template's
// executor linked again (measured on a scratch copy, Go 1.26, linux/amd64).
// A method lookup by a name not known at link time, from any package, keeps
// every exported method of every type: the rows above name the package
// that did it once, this bound the mechanism.
const maxBinary = 30_000_000

var apiPackage = regexp.MustCompile(`^k8s\.io/api/([a-z0-9]+/v[a-z0-9]+)\.`)

// TestLinkedBinary builds cmd/janitor once (the build cache makes it a link)
// and reads its symbols.
func TestLinkedBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, _ := packages(t)
	bin := filepath.Join(t.TempDir(), "janitor")
	build := exec.Command("go", "build", "-o", bin, "./cmd/janitor")
	build.Dir = root
	// The flags of the release, not of the test run (-race, -cover).
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	var syms []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 {
			syms = append(syms, f[2])
		}
	}
	if len(syms) < 1000 {
		t.Fatalf("go tool nm listed %d symbols: not the binary", len(syms))
	}
	for _, r := range notLinked {
		for _, s := range syms {
			if strings.HasPrefix(s, r.prefix) {
				t.Errorf("the binary links %s (symbol %s), which a hand-written replacement took out: %s", r.what, s, r.measured)
				break
			}
		}
	}
	groups := map[string]bool{}
	for _, s := range syms {
		if m := apiPackage.FindStringSubmatch(s); m != nil && !slices.Contains(apiGroups, m[1]) && !groups[m[1]] {
			groups[m[1]] = true
			t.Errorf("the binary links k8s.io/api/%s (symbol %s): only the groups kube.API calls are linked (2ec9f01; %v)", m[1], s, apiGroups)
		}
	}
	if fi, err := os.Stat(bin); err != nil {
		t.Fatal(err)
	} else if runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64" {
		t.Logf("binary: %.1f MB", float64(fi.Size())/1e6)
		if fi.Size() > maxBinary {
			t.Errorf("the binary is %.1f MB, over %.0f MB: did a method lookup by name, or a library a replacement took out, come back? (docs/benchmarks.md)",
				float64(fi.Size())/1e6, float64(maxBinary)/1e6)
		}
	}
}
