package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

var (
	t0    = time.Date(2026, 12, 2, 6, 18, 32, 0, time.UTC)
	class = "csi-hostpath"
)

func copyOf(ns, snap, ws, handle string) Copy {
	cut := t0.Add(5 * time.Second)
	return Copy{Workspace: ws, Namespace: ns, Snapshot: snap, Origin: OriginRescue, SourceClaim: "ws-" + ws,
		SourceUID: "uid-" + ws, Driver: "hostpath.pvc-janitor.io", SnapshotHandle: handle, RestoreSize: 1 << 30,
		DataTime: t0, CutTime: &cut,
		Claim: &restore.Template{Name: "ws-" + ws, Labels: map[string]string{"workspace": ws, "role": "home"},
			AccessModes: []string{"ReadWriteOnce"}, Storage: "1Gi", StorageClassName: &class}}
}

func testBundle(t *testing.T, copies ...Copy) *Bundle {
	t.Helper()
	b, err := New(Source{Cluster: "west", WorkspaceLabel: "workspace"}, t0.Add(time.Hour+300*time.Millisecond), copies)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encode(t *testing.T, b *Bundle) string {
	t.Helper()
	y, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

// TestRoundTrip: what export writes, import reads back as it was, in
// order, with the time to the second.
func TestRoundTrip(t *testing.T) {
	b := testBundle(t, copyOf("ws", "ws-b-rescue-2", "b", "snap-2"), copyOf("ws", "ws-a-rescue-1", "a", "snap-1"))
	if b.Copies[0].Workspace != "a" || !b.ExportedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("copies not sorted by workspace, or time not to the second: %+v", b)
	}
	got, err := Decode([]byte(encode(t, b)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, b)
	}
	if !strings.HasPrefix(b.Checksum, "sha256:") || len(b.Checksum) != len("sha256:")+64 {
		t.Errorf("checksum %q", b.Checksum)
	}
}

// TestChecksumDefinition pins what is hashed (docs/spec.md#bundle-checksum):
// the canonical JSON of the document without checksum, keys in byte
// order, no whitespace.
func TestChecksumDefinition(t *testing.T) {
	b := testBundle(t)
	canonical := `{"apiVersion":"pvc-janitor.io/v1alpha1","copies":[],"exportedAt":"2026-12-02T07:18:32Z","kind":"Bundle","source":{"cluster":"west","workspaceLabel":"workspace"}}`
	sum := sha256.Sum256([]byte(canonical))
	if want := "sha256:" + hex.EncodeToString(sum[:]); b.Checksum != want {
		t.Errorf("checksum %s, want %s (of %s)", b.Checksum, want, canonical)
	}
	// HTML characters are not escaped, as a template's annotations may
	// hold them.
	c := copyOf("ws", "s", "a", "h<&>")
	doc := map[string]any{"a": c.SnapshotHandle}
	got, err := Checksum(doc)
	if err != nil {
		t.Fatal(err)
	}
	sum = sha256.Sum256([]byte(`{"a":"h<&>"}`))
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("checksum of %v: %s, want %s", doc, got, want)
	}
}

// TestDecodeRefuses: every way a bundle is refused whole, with one line
// naming why; a document reformatted without changing a value is not.
func TestDecodeRefuses(t *testing.T) {
	good := encode(t, testBundle(t, copyOf("ws", "ws-a-rescue-1", "a", "snap-1")))
	resum := func(s string) string { // an edit whose checksum was recomputed
		var b map[string]any
		raw, err := yaml.YAMLToJSON([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = generic(raw); err != nil {
			t.Fatal(err)
		}
		sum, err := Checksum(b)
		if err != nil {
			t.Fatal(err)
		}
		b["checksum"] = sum
		y, err := yaml.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return string(y)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"version", strings.Replace(good, "apiVersion: pvc-janitor.io/v1alpha1", "apiVersion: pvc-janitor.io/v1beta1", 1),
			`apiVersion "pvc-janitor.io/v1beta1" kind "Bundle": this janitor reads apiVersion pvc-janitor.io/v1alpha1`},
		{"kind", strings.Replace(good, "kind: Bundle", "kind: Report", 1), `kind "Report"`},
		{"handle edited", strings.Replace(good, "snapshotHandle: snap-1", "snapshotHandle: snap-9", 1), "does not match its content"},
		{"data time edited", strings.Replace(good, `dataTime: "2026-12-02T06:18:32Z"`, `dataTime: "2026-12-02T06:18:33Z"`, 1), "does not match its content"},
		{"checksum removed", strings.Replace(good, "checksum: sha256:", "sum: sha256:", 1), "has no checksum"},
		{"not yaml", "copies: [", "not YAML"},
		{"a list", "- a\n", "not a YAML mapping"},
		{"unknown field", resum(strings.Replace(good, "driver:", "colour: red\n  driver:", 1)), `bundle: unknown field "colour"`},
		{"no handle", resum(strings.Replace(good, "snapshotHandle: snap-1", `snapshotHandle: ""`, 1)), "no driver or snapshotHandle"},
		{"bad origin", resum(strings.Replace(good, "origin: rescue", "origin: mine", 1)), `origin "mine"`},
		{"bad namespace", resum(strings.Replace(good, "namespace: ws", "namespace: WS", 1)), `namespace "WS"`},
		{"bad storage", resum(strings.Replace(good, "storage: 1Gi", "storage: lots", 1)), `claim storage "lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.doc == good {
				t.Fatal("the edit did not apply")
			}
			_, err := Decode([]byte(tc.doc))
			var be *Error
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Decode: %v, want one line saying %q", err, tc.want)
			}
		})
	}
	// The same values, laid out differently (as JSON, keys reordered): the
	// checksum is of the values, not the bytes.
	raw, err := yaml.YAMLToJSON([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(raw); err != nil {
		t.Errorf("the bundle as JSON: %v", err)
	}
}
