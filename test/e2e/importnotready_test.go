//go:build integration

package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/bundle"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestImportOfAMissingStorageSnapshotExitsFour (docs/spec.md#import): a
// bundle whose storage snapshot this cluster's storage does not hold (a
// cluster on another storage, a snapshot deleted since the export) is
// imported as objects, but its snapshot never becomes ready. Import waits
// --api-timeout, reports the copy not ready with the reason and exits 4, so
// that a pipeline does not go on to tear down or restore as if the copy
// were there; a second import creates nothing and exits 4 again.
func TestImportOfAMissingStorageSnapshotExitsFour(t *testing.T) {
	ctx := context.Background()
	f := fixtures(t)
	ns := env.Namespace(t)
	ensureCSIDriver(t)
	handle := "no-such-storage-snapshot-" + ns
	b, err := bundle.New(bundle.Source{Cluster: "a-cluster-on-other-storage", WorkspaceLabel: "workspace"}, time.Now(),
		[]bundle.Copy{{Workspace: "lost", Namespace: ns, Snapshot: "ws-lost-rescue", Origin: bundle.OriginRescue,
			SourceClaim: "ws-lost", SourceUID: "6f1c0000-0000-4000-8000-000000000001", Driver: testenv.DriverName,
			SnapshotHandle: handle, DataTime: time.Now().Add(-time.Hour).UTC().Truncate(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	data, err := bundle.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bundle.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	content := bundle.ContentName(testenv.DriverName, handle)
	t.Cleanup(func() { _ = f.Snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, content, metav1.DeleteOptions{}) })

	for i, want := range []string{"imported", "already-imported"} {
		code, out, stderr := run(t, "import", file, "-n", ns, "-o", "json", "--api-timeout", "10s")
		if code != 4 {
			t.Fatalf("import %d of a snapshot the storage does not hold: exit %d, want 4\n%s\n%s", i+1, code, out, stderr)
		}
		if !strings.Contains(stderr, "not ready within --api-timeout (10s)") {
			t.Errorf("import %d: the error does not say the copy was not ready:\n%s", i+1, stderr)
		}
		r := parse(t, out)
		if len(r.Snapshots) != 1 {
			t.Fatalf("import %d: %d entries, want 1\n%s", i+1, len(r.Snapshots), out)
		}
		s := r.Snapshots[0]
		if s.Action != want || s.ReadyToUse || !strings.Contains(s.Reason, "this cluster's storage may not hold the snapshot") {
			t.Errorf("import %d: action %q, ready %v, reason %q; want %q, not ready, and why", i+1, s.Action, s.ReadyToUse, s.Reason, want)
		}
	}
	if got := snapshots(t, f, ns); len(got) != 1 || got[0].Name != "ws-lost-rescue" {
		t.Errorf("after two imports the namespace holds %d snapshots, want the one imported", len(got))
	}
}
