package csidriver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestNodeStagesAndPublishesBindMounts: a volume staged and published is
// its folder at the target, so a file written there is in the volume (and
// in a snapshot of it); a read-only publish refuses writes; each call again
// is a no-op; unpublish and unstage undo the mounts; an unknown volume is
// NotFound. Real bind mounts: root only, as for any CSI node plugin.
func TestNodeStagesAndPublishesBindMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root (CAP_SYS_ADMIN)")
	}
	h := start(t, t.TempDir())
	ctx := rpcCtx(t)
	vol := h.mustCreateVolume("v1", "", 0)
	work := t.TempDir()
	staging, target, ro := filepath.Join(work, "staging"), filepath.Join(work, "pod", "mount"), filepath.Join(work, "pod", "ro")
	capability := mountCap()[0]
	for i := 0; i < 2; i++ { // twice: idempotent
		if _, err := h.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, VolumeCapability: capability}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, TargetPath: ro, VolumeCapability: capability, Readonly: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "notes.md"), []byte("my work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadVolumeFile(h.stateDir, vol.VolumeId, "notes.md"); err != nil || string(got) != "my work" {
		t.Errorf("the volume holds %q (%v), want what the pod wrote", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(ro, "notes.md")); err != nil || string(got) != "my work" {
		t.Errorf("the read-only target reads %q (%v)", got, err)
	}
	if err := os.WriteFile(filepath.Join(ro, "x"), nil, 0o644); err == nil {
		t.Error("a write through the read-only target succeeded")
	}
	for _, p := range []string{target, ro} {
		for i := 0; i < 2; i++ {
			if _, err := h.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.VolumeId, TargetPath: p}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there after unpublish: %v", p, err)
		}
	}
	if _, err := h.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if mounted, err := isMountPoint(staging); err != nil || mounted {
		t.Errorf("staging path still mounted (%v)", err)
	}
	_, err := h.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "no-such-volume", StagingTargetPath: staging, VolumeCapability: capability})
	wantCode(t, err, codes.NotFound)
	_, err = h.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability})
	wantCode(t, err, codes.FailedPrecondition) // not staged any more
	_, err = h.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.VolumeId, StagingTargetPath: staging,
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}})
	wantCode(t, err, codes.InvalidArgument)
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/tab\011x`: "/tab\tx", `/end\04`: `/end\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
