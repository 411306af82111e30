package csidriver

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func mountCap() []*csi.VolumeCapability {
	return []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
}

func (h *harness) createVolume(name, fromSnapshot string, required int64) (*csi.Volume, error) {
	req := &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mountCap()}
	if required > 0 {
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: required}
	}
	if fromSnapshot != "" {
		req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: fromSnapshot}}}
	}
	resp, err := h.ctl.CreateVolume(rpcCtx(h.t), req)
	return resp.GetVolume(), err
}

func (h *harness) mustCreateVolume(name, fromSnapshot string, required int64) *csi.Volume {
	h.t.Helper()
	v, err := h.createVolume(name, fromSnapshot, required)
	if err != nil {
		h.t.Fatalf("CreateVolume(%q, snapshot %q): %v", name, fromSnapshot, err)
	}
	return v
}

func (h *harness) write(handle, path, data string) {
	h.t.Helper()
	if err := WriteVolumeFile(h.stateDir, handle, path, []byte(data)); err != nil {
		h.t.Fatalf("WriteVolumeFile(%s, %s): %v", handle, path, err)
	}
}

func (h *harness) wantFile(handle, path, want string) {
	h.t.Helper()
	got, err := ReadVolumeFile(h.stateDir, handle, path)
	if err != nil {
		h.t.Fatalf("ReadVolumeFile(%s, %s): %v", handle, path, err)
	}
	if string(got) != want {
		h.t.Errorf("%s:%s = %q, want %q", handle, path, got, want)
	}
}

func (h *harness) wantNoFile(handle, path string) {
	h.t.Helper()
	if _, err := ReadVolumeFile(h.stateDir, handle, path); !errors.Is(err, fs.ErrNotExist) {
		h.t.Errorf("%s:%s: got %v, want a missing file", handle, path, err)
	}
}

// TestSnapshotAndRestoreCopyBytes: a snapshot copies the volume's files as
// they are when it is cut; a volume restored from it gets exactly those
// bytes, whatever happens to the source afterwards.
func TestSnapshotAndRestoreCopyBytes(t *testing.T) {
	h := start(t, t.TempDir())
	src := h.mustCreateVolume("pvc-src", "", 2<<30)
	if src.GetVolumeId() != VolumeID("pvc-src") || src.GetCapacityBytes() != 2<<30 || src.GetContentSource() != nil {
		t.Fatalf("CreateVolume = %v", src)
	}
	id := src.GetVolumeId()
	dir, _ := VolumeDir(h.stateDir, id)
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("a new volume is an empty folder: %v %v", entries, err)
	}
	binary := bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10) // 256 KiB, not text
	h.write(id, "notes.txt", "hello")
	h.write(id, "deep/er/data.bin", string(binary))
	if err := os.Symlink("notes.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}

	snap := h.mustCreate("snapshot-1", id)
	if snap.GetSizeBytes() != 2<<30 {
		t.Errorf("snapshot size %d, want the source's capacity", snap.GetSizeBytes())
	}
	// The source changes after the cut: the snapshot must not.
	h.write(id, "notes.txt", "changed")
	h.write(id, "later.txt", "after the cut")
	if err := os.RemoveAll(filepath.Join(dir, "deep")); err != nil {
		t.Fatal(err)
	}

	restored := h.mustCreateVolume("pvc-restored", snap.GetSnapshotId(), 0)
	if restored.GetContentSource().GetSnapshot().GetSnapshotId() != snap.GetSnapshotId() {
		t.Errorf("restored volume's content source = %v", restored.GetContentSource())
	}
	if restored.GetCapacityBytes() < snap.GetSizeBytes() {
		t.Errorf("restored capacity %d below the snapshot's size %d", restored.GetCapacityBytes(), snap.GetSizeBytes())
	}
	rid := restored.GetVolumeId()
	h.wantFile(rid, "notes.txt", "hello")
	h.wantFile(rid, "deep/er/data.bin", string(binary))
	h.wantNoFile(rid, "later.txt")
	if l, err := os.Readlink(filepath.Join(mustDir(t, h.stateDir, rid), "link")); err != nil || l != "notes.txt" {
		t.Errorf("symlink not copied: %q %v", l, err)
	}
	h.wantFile(id, "notes.txt", "changed")

	// The restored volume is a copy: writing to it changes neither the
	// snapshot nor another restore.
	h.write(rid, "notes.txt", "edited in the restore")
	again := h.mustCreateVolume("pvc-restored-2", snap.GetSnapshotId(), 0)
	h.wantFile(again.GetVolumeId(), "notes.txt", "hello")

	// A restore asking for less than the snapshot's size is refused.
	_, err := h.createVolume("pvc-too-small", snap.GetSnapshotId(), 1<<30)
	wantCode(t, err, codes.OutOfRange)
}

func mustDir(t *testing.T, stateDir, handle string) string {
	t.Helper()
	d, err := VolumeDir(stateDir, handle)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHandMadeVolumes: a handle the driver never created (the test
// cluster's hand-made PVs) has content once written; its snapshot copies it,
// and a snapshot of one never written to restores an empty volume.
func TestHandMadeVolumes(t *testing.T) {
	h := start(t, t.TempDir())
	h.write("ns-ws-a", "home/user/.bashrc", "export PS1=x")
	snap := h.mustCreate("snapshot-ws-a", "ns-ws-a")
	if snap.GetSizeBytes() != 0 {
		t.Errorf("size of a snapshot of an unknown volume = %d, want 0 (unknown)", snap.GetSizeBytes())
	}
	v := h.mustCreateVolume("pvc-from-ws-a", snap.GetSnapshotId(), 0)
	h.wantFile(v.GetVolumeId(), "home/user/.bashrc", "export PS1=x")

	empty := h.mustCreate("snapshot-never-written", "ns-ws-b")
	e := h.mustCreateVolume("pvc-from-ws-b", empty.GetSnapshotId(), 0)
	if entries, err := os.ReadDir(mustDir(t, h.stateDir, e.GetVolumeId())); err != nil || len(entries) != 0 {
		t.Errorf("restore of an empty snapshot: %v %v", entries, err)
	}

	// DeleteVolume of a hand-made handle removes nothing: the files are not
	// the driver's.
	if _, err := h.ctl.DeleteVolume(rpcCtx(t), &csi.DeleteVolumeRequest{VolumeId: "ns-ws-a"}); err != nil {
		t.Fatal(err)
	}
	h.wantFile("ns-ws-a", "home/user/.bashrc", "export PS1=x")
}

// TestDeleteRemovesBytes: DeleteVolume removes the volume's files,
// DeleteSnapshot the snapshot's copy; a snapshot outlives its source.
func TestDeleteRemovesBytes(t *testing.T) {
	h := start(t, t.TempDir())
	ctx := rpcCtx(t)
	id := h.mustCreateVolume("pvc-a", "", 0).GetVolumeId()
	h.write(id, "f", "data")
	snap := h.mustCreate("snapshot-a", id)
	snapDir := filepath.Join(h.stateDir, "snapshot-data", snap.GetSnapshotId())
	if _, err := os.Stat(filepath.Join(snapDir, "f")); err != nil {
		t.Fatalf("snapshot copy not at %s: %v", snapDir, err)
	}

	for range 2 {
		if _, err := h.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(mustDir(t, h.stateDir, id)); !os.IsNotExist(err) {
		t.Errorf("volume folder still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.stateDir, "volume-records", id+".json")); !os.IsNotExist(err) {
		t.Errorf("volume record still there: %v", err)
	}
	restored := h.mustCreateVolume("pvc-b", snap.GetSnapshotId(), 0)
	h.wantFile(restored.GetVolumeId(), "f", "data")

	if _, err := h.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snapDir); !os.IsNotExist(err) {
		t.Errorf("snapshot copy still there: %v", err)
	}
	_, err := h.createVolume("pvc-c", snap.GetSnapshotId(), 0)
	wantCode(t, err, codes.NotFound)
	h.wantFile(restored.GetVolumeId(), "f", "data")
}

func TestCreateVolumeValidationAndIdempotency(t *testing.T) {
	h := start(t, t.TempDir())
	ctx := rpcCtx(t)
	v := h.mustCreateVolume("pvc-x", "", 0)
	if v.GetCapacityBytes() != DefaultCapacityBytes {
		t.Errorf("capacity without a request = %d", v.GetCapacityBytes())
	}
	h.write(v.GetVolumeId(), "keep", "me")
	again := h.mustCreateVolume("pvc-x", "", 0)
	if again.GetVolumeId() != v.GetVolumeId() {
		t.Errorf("retry made %s, want %s", again.GetVolumeId(), v.GetVolumeId())
	}
	h.wantFile(v.GetVolumeId(), "keep", "me") // a retry does not wipe the content

	_, err := h.createVolume("pvc-x", "", 2*DefaultCapacityBytes)
	wantCode(t, err, codes.AlreadyExists)
	snap := h.mustCreate("snapshot-x", v.GetVolumeId())
	_, err = h.createVolume("pvc-x", snap.GetSnapshotId(), 0)
	wantCode(t, err, codes.AlreadyExists)

	_, err = h.createVolume("pvc-y", "snap-missing", 0)
	wantCode(t, err, codes.NotFound)
	for name, req := range map[string]*csi.CreateVolumeRequest{
		"no name": {VolumeCapabilities: mountCap()},
		"no caps": {Name: "pvc-z"},
		"block": {Name: "pvc-z", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}},
		"limit below required": {Name: "pvc-z", VolumeCapabilities: mountCap(), CapacityRange: &csi.CapacityRange{RequiredBytes: 10, LimitBytes: 5}},
		"clone": {Name: "pvc-z", VolumeCapabilities: mountCap(), VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.GetVolumeId()}}}},
	} {
		_, err := h.ctl.CreateVolume(ctx, req)
		t.Run(name, func(t *testing.T) { wantCode(t, err, codes.InvalidArgument) })
	}

	// ValidateVolumeCapabilities knows the volumes it made.
	resp, err := h.ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(), VolumeCapabilities: mountCap()})
	if err != nil || resp.GetConfirmed() == nil {
		t.Errorf("ValidateVolumeCapabilities(mount) = %v, %v", resp, err)
	}
	_, err = h.ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-missing", VolumeCapabilities: mountCap()})
	wantCode(t, err, codes.NotFound)
	_, err = h.ctl.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.InvalidArgument)
}

// TestFaultsGuardTheCopy: a failed CreateSnapshot copies nothing; a
// restore waits for the snapshot to be ready.
func TestFaultsGuardTheCopy(t *testing.T) {
	h := start(t, t.TempDir())
	h.write("vol-f", "f", "v1")
	if err := SetFault(h.stateDir, "vol-f", Fault{PermanentError: "broken"}); err != nil {
		t.Fatal(err)
	}
	_, err := h.create("snapshot-f", "vol-f")
	wantCode(t, err, codes.InvalidArgument)
	if _, err := os.Stat(filepath.Join(h.stateDir, "snapshot-data", SnapshotID("snapshot-f"))); !os.IsNotExist(err) {
		t.Errorf("a failed snapshot left a copy: %v", err)
	}

	if err := SetFault(h.stateDir, "vol-f", Fault{ReadyAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	snap := h.mustCreate("snapshot-f", "vol-f")
	_, err = h.createVolume("pvc-f", snap.GetSnapshotId(), 0)
	wantCode(t, err, codes.Unavailable)
	if err := ClearFault(h.stateDir, "vol-f"); err != nil {
		t.Fatal(err)
	}
	h.write("vol-f", "f", "v2") // after the cut
	v := h.mustCreateVolume("pvc-f", snap.GetSnapshotId(), 0)
	h.wantFile(v.GetVolumeId(), "f", "v1")
}

func TestVolumesSurviveRestart(t *testing.T) {
	stateDir := t.TempDir()
	h := start(t, stateDir)
	v := h.mustCreateVolume("pvc-durable", "", 5<<30)
	h.write(v.GetVolumeId(), "f", "kept")
	snap := h.mustCreate("snapshot-durable", v.GetVolumeId())
	h.stop()

	h = start(t, stateDir)
	again := h.mustCreateVolume("pvc-durable", "", 5<<30)
	if again.GetCapacityBytes() != 5<<30 {
		t.Errorf("capacity after restart %d", again.GetCapacityBytes())
	}
	h.wantFile(v.GetVolumeId(), "f", "kept")
	if s := h.listOne(snap.GetSnapshotId()); s.GetSizeBytes() != 5<<30 {
		t.Errorf("snapshot size after restart %d", s.GetSizeBytes())
	}
	r := h.mustCreateVolume("pvc-restored", snap.GetSnapshotId(), 0)
	h.wantFile(r.GetVolumeId(), "f", "kept")
}

func TestVolumeFilePathsStayInside(t *testing.T) {
	stateDir := t.TempDir()
	for _, p := range []string{"", "/", "../escape", "a/../../escape", "."} {
		if err := WriteVolumeFile(stateDir, "v", p, []byte("x")); err == nil {
			t.Errorf("WriteVolumeFile accepted %q", p)
		}
	}
	if err := WriteVolumeFile(stateDir, "v", "/abs/ok", []byte("x")); err != nil {
		t.Errorf("a path with a leading slash is relative to the volume's root: %v", err)
	}
	for _, handle := range []string{"..", ".", ".tmp-x", "a/b"} {
		dir, err := VolumeDir(stateDir, handle)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != filepath.Join(stateDir, "volumes") || filepath.Base(dir)[0] == '.' {
			t.Errorf("handle %q: folder %s", handle, dir)
		}
	}
	if _, err := VolumeDir(stateDir, ""); err == nil {
		t.Error("VolumeDir accepted an empty handle")
	}
}

// TestNodeServiceArguments: the node stages (STAGE_UNSTAGE_VOLUME) and
// names itself; unpublishing a target never published is a no-op, an
// unknown volume NotFound, a request without its paths or capability
// InvalidArgument (node_test.go mounts for real).
func TestNodeServiceArguments(t *testing.T) {
	h := start(t, t.TempDir())
	ctx := rpcCtx(t)
	caps, err := h.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 || caps.GetCapabilities()[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
		t.Errorf("NodeGetCapabilities = %v, %v", caps, err)
	}
	if info, err := h.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil || info.GetNodeId() == "" {
		t.Errorf("NodeGetInfo = %v, %v", info, err)
	}
	v := h.mustCreateVolume("pvc-n", "", 0)
	never := filepath.Join(t.TempDir(), "never-published")
	if _, err := h.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: never}); err != nil {
		t.Errorf("NodeUnpublishVolume(never published) = %v", err)
	}
	_, err = h.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-missing", TargetPath: never})
	wantCode(t, err, codes.NotFound)
	_, err = h.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId()})
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: never})
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(), VolumeCapability: mountCap()[0]})
	wantCode(t, err, codes.InvalidArgument)
}
