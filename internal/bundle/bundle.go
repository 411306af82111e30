// Package bundle is what carries a workspace platform's copies across a
// cluster teardown (docs/spec.md#export-and-import): the versioned document
// `janitor export` writes and `janitor import` reads, naming per copy the
// storage snapshot that holds it (driver and handle) and what a restore
// needs (data time, workspace, claim template). Everything here is pure:
// which copies to export (Select), a copy from the objects read (NewCopy),
// the document and its checksum (New, Encode, Decode), and what an import
// creates in a cluster (Plan). The commands read and write the cluster.
package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

// APIVersion and Kind identify the document; Decode reads no other.
const (
	APIVersion = "pvc-janitor.io/v1alpha1"
	Kind       = "Bundle"
)

// Origins of a copy.
const (
	// OriginRescue is the janitor's rescue of a claim.
	OriginRescue = "rescue"
	// OriginArchive is the janitor's archive of a superseded claim
	// (label pvc-janitor.io/superseded).
	OriginArchive = "archive"
	// OriginForeign is someone else's snapshot (a backup tool's) that is
	// the only copy of a claim that is gone.
	OriginForeign = "foreign"
)

// ChecksumPrefix starts Bundle.Checksum: the hash's name.
const ChecksumPrefix = "sha256:"

// Bundle is the document (docs/spec.md#export-and-import). Field names are
// its format: new optional fields need no new version, any other change
// does.
type Bundle struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ExportedAt is the API server's time of the export.
	ExportedAt time.Time `json:"exportedAt"`
	Source     Source    `json:"source"`
	Copies     []Copy    `json:"copies"`
	// Checksum is ChecksumPrefix and the hex SHA-256 of the document's
	// canonical JSON without this field (Checksum).
	Checksum string `json:"checksum"`
}

// Source is where the copies were exported from.
type Source struct {
	// Cluster is the kubeconfig cluster's name of the export.
	Cluster string `json:"cluster"`
	// WorkspaceLabel is the export's --workspace-label: the label whose
	// value is a copy's workspace, which import sets on the snapshots.
	WorkspaceLabel string `json:"workspaceLabel,omitempty"`
}

// Copy is one storage snapshot holding a workspace's newest data.
type Copy struct {
	// Workspace is the workspace label's value ("" without one: the
	// copy is its source claim's own workspace).
	Workspace string `json:"workspace,omitempty"`
	// Namespace and Snapshot name the VolumeSnapshot in the source
	// cluster; import recreates it under the same names (or -n).
	Namespace string `json:"namespace"`
	Snapshot  string `json:"snapshot"`
	// Origin is OriginRescue, OriginArchive or OriginForeign.
	Origin string `json:"origin"`
	// SourceClaim and SourceUID name the claim the copy was cut from.
	SourceClaim string `json:"sourceClaim"`
	SourceUID   string `json:"sourceUID,omitempty"`
	// Driver is the CSI driver; SnapshotHandle the storage system's id of
	// the snapshot (the content's status.snapshotHandle).
	Driver         string `json:"driver"`
	SnapshotHandle string `json:"snapshotHandle"`
	// SourceVolumeMode is the content's spec.sourceVolumeMode, if set.
	SourceVolumeMode string `json:"sourceVolumeMode,omitempty"`
	// RestoreSize is status.restoreSize in bytes (0: not reported).
	RestoreSize int64 `json:"restoreSize,omitempty"`
	// DataTime is the newest moment whose writes the copy holds
	// (docs/spec.md#rule-data-time); CutTime when the storage took it.
	DataTime time.Time  `json:"dataTime"`
	CutTime  *time.Time `json:"cutTime,omitempty"`
	// RestoredDataTime is the rescue's pvc-janitor.io/restored-data-time
	// (a rescue of a restored claim, docs/spec.md#rule-restored-data-time).
	RestoredDataTime *time.Time `json:"restoredDataTime,omitempty"`
	// Claim is the rescue's claim template (pvc-janitor.io/claim), nil
	// for a snapshot without one; ClaimDropped its
	// pvc-janitor.io/claim-dropped.
	Claim        *restore.Template `json:"claim,omitempty"`
	ClaimDropped string            `json:"claimDropped,omitempty"`
}

// Key is the copy's namespace/snapshot in the source cluster.
func (c *Copy) Key() string { return c.Namespace + "/" + c.Snapshot }

// Error is a bundle that cannot be read: wrong version or kind, a checksum
// that does not match, a copy that is not valid. Import refuses it whole
// (exit 2, nothing written).
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

func refuse(format string, a ...any) error { return &Error{Reason: fmt.Sprintf(format, a...)} }

// New assembles the bundle of copies, sorted by namespace, workspace and
// snapshot, with its checksum.
func New(src Source, exportedAt time.Time, copies []Copy) (*Bundle, error) {
	b := &Bundle{APIVersion: APIVersion, Kind: Kind, ExportedAt: exportedAt.UTC().Truncate(time.Second), Source: src,
		Copies: append([]Copy{}, copies...)}
	sort.SliceStable(b.Copies, func(i, j int) bool {
		a, c := &b.Copies[i], &b.Copies[j]
		if a.Namespace != c.Namespace {
			return a.Namespace < c.Namespace
		}
		if a.Workspace != c.Workspace {
			return a.Workspace < c.Workspace
		}
		return a.Snapshot < c.Snapshot
	})
	sum, err := b.Sum()
	if err != nil {
		return nil, err
	}
	b.Checksum = sum
	return b, nil
}

// Sum is the checksum of b's content (its Checksum field aside): see
// Checksum.
func (b *Bundle) Sum() (string, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return "", err
	}
	doc, err := generic(raw)
	if err != nil {
		return "", err
	}
	return Checksum(doc)
}

// Checksum is the checksum of a decoded document (JSON objects as maps):
// ChecksumPrefix and the hex SHA-256 of its canonical JSON without the
// top-level "checksum" key. Canonical: object keys in byte order, no
// whitespace, numbers as written, strings escaped as Go's encoding/json
// does without HTML escaping (", \ and control characters; U+2028 and
// U+2029 as \u2028, \u2029). For a document of plain strings it is
// `jq -cS 'del(.checksum)'` of the YAML read as JSON, without the newline.
func Checksum(doc map[string]any) (string, error) {
	rest := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != "checksum" {
			rest[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rest); err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return ChecksumPrefix + hex.EncodeToString(sum[:]), nil
}

// generic decodes JSON into maps, keeping numbers as written.
func generic(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// header is the comment above the document: not part of the checksum.
const header = "# pvc-janitor bundle (docs/spec.md#export-and-import): import with `janitor import FILE`.\n" +
	"# Edited by hand, it is refused: the checksum covers every field but itself.\n"

// Encode writes b as YAML, under a comment.
func Encode(b *Bundle) ([]byte, error) {
	y, err := yaml.Marshal(b)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), y...), nil
}

// Decode reads a bundle (YAML or JSON) and verifies it: its apiVersion and
// kind, then its checksum, then every copy. Any failure is an *Error
// naming it; a bundle is taken whole or not at all.
func Decode(data []byte) (*Bundle, error) {
	raw, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, refuse("bundle is not YAML: %v", err)
	}
	doc, err := generic(raw)
	if err != nil || doc == nil {
		return nil, refuse("bundle is not a YAML mapping")
	}
	av, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if av != APIVersion || kind != Kind {
		return nil, refuse("bundle is apiVersion %q kind %q: this janitor reads apiVersion %s kind %s", av, kind, APIVersion, Kind)
	}
	want, _ := doc["checksum"].(string)
	got, err := Checksum(doc)
	if err != nil {
		return nil, refuse("bundle checksum: %v", err)
	}
	if want != got {
		if want == "" {
			return nil, refuse("bundle has no checksum: it must be as export wrote it")
		}
		return nil, refuse("bundle checksum %s does not match its content (%s): edited or damaged", want, got)
	}
	var b Bundle
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		// "error unmarshaling JSON: while decoding JSON: json: unknown
		// field …": the last part says it.
		msg := err.Error()
		if i := strings.LastIndex(msg, "json: "); i >= 0 {
			msg = msg[i+len("json: "):]
		}
		return nil, refuse("bundle: %s", msg)
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	return &b, nil
}

// validate checks what an import relies on in every copy.
func (b *Bundle) validate() error {
	seen := map[string]bool{}
	for i := range b.Copies {
		c := &b.Copies[i]
		bad := func(format string, a ...any) error {
			return refuse("bundle copy %d (%s): %s", i+1, c.Key(), fmt.Sprintf(format, a...))
		}
		switch {
		case len(validation.IsDNS1123Label(c.Namespace)) > 0:
			return bad("namespace %q is not a namespace name", c.Namespace)
		case len(validation.IsDNS1123Subdomain(c.Snapshot)) > 0:
			return bad("snapshot %q is not an object name", c.Snapshot)
		case c.Driver == "" || c.SnapshotHandle == "":
			return bad("no driver or snapshotHandle")
		case c.Origin != OriginRescue && c.Origin != OriginArchive && c.Origin != OriginForeign:
			return bad("origin %q is not %s, %s or %s", c.Origin, OriginRescue, OriginArchive, OriginForeign)
		case c.DataTime.IsZero():
			return bad("no dataTime")
		case c.RestoreSize < 0:
			return bad("negative restoreSize")
		case seen[c.Key()]:
			return bad("listed twice")
		}
		if c.Claim != nil && c.Claim.Storage != "" {
			if _, err := resource.ParseQuantity(c.Claim.Storage); err != nil {
				return bad("claim storage %q: %v", c.Claim.Storage, err)
			}
		}
		seen[c.Key()] = true
	}
	return nil
}

// WorkspaceKey is the copy's workspace as a report names it:
// namespace/workspace, or namespace/claim for a copy without a workspace.
func (c *Copy) WorkspaceKey() string {
	w := c.Workspace
	if w == "" {
		w = c.SourceClaim
	}
	return c.Namespace + "/" + w
}
