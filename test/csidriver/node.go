package csidriver

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeServer is the node service: a volume is its folder in the state
// folder (data.go), staged as a bind mount of that folder at the staging
// path and published as a bind mount of the staging path at the target
// (read-only when asked), so that a pod on a node with this driver writes
// the bytes a snapshot then copies. Filesystem volumes only. Every call is
// idempotent: a path already mounted is left as it is. Mounting needs root
// (CAP_SYS_ADMIN), as any CSI node plugin does.
type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	stage := &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{Type: stage}}}, nil
}

// NodeGetInfo names the node: Options.NodeID, else the host name.
func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	id := s.d.nodeID
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, status.Errorf(codes.Internal, "host name: %v", err)
		}
		id = h
	}
	return &csi.NodeGetInfoResponse{NodeId: id}, nil
}

// NodeStageVolume bind-mounts the volume's folder at the staging path.
func (s *nodeServer) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := mountRequest(req.GetVolumeId(), req.GetStagingTargetPath(), "staging target path", req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	src, err := s.volumeDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := bindMount(src, req.GetStagingTargetPath(), false); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (s *nodeServer) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	}
	if err := unmount(req.GetStagingTargetPath(), false); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staging path at the target path.
func (s *nodeServer) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := mountRequest(req.GetVolumeId(), req.GetTargetPath(), "target path", req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if req.GetStagingTargetPath() == "" {
		return nil, status.Error(codes.FailedPrecondition, "staging target path is required: the volume is staged first")
	}
	if _, err := s.volumeDir(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if ok, err := isMountPoint(req.GetStagingTargetPath()); err != nil || !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is not staged at %s", req.GetVolumeId(), req.GetStagingTargetPath())
	}
	if err := bindMount(req.GetStagingTargetPath(), req.GetTargetPath(), req.GetReadonly()); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes it (the plugin made
// it).
func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	if _, err := s.volumeDir(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := unmount(req.GetTargetPath(), true); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// volumeDir is the folder of a volume the driver knows (created by it, or
// pre-provisioned with a folder of its own), created when missing.
func (s *nodeServer) volumeDir(id string) (string, error) {
	dir, err := VolumeDir(s.d.stateDir, id)
	if err != nil {
		return "", status.Error(codes.InvalidArgument, err.Error())
	}
	s.d.mu.Lock()
	_, known := s.d.volumes[id]
	s.d.mu.Unlock()
	if _, err := os.Stat(dir); !known && err != nil {
		return "", status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", status.Errorf(codes.Internal, "volume folder: %v", err)
	}
	return dir, nil
}

// mountRequest checks what stage and publish both need.
func mountRequest(id, path, what string, c *csi.VolumeCapability) error {
	switch {
	case id == "":
		return status.Error(codes.InvalidArgument, "volume id is required")
	case path == "":
		return status.Error(codes.InvalidArgument, what+" is required")
	case c == nil:
		return status.Error(codes.InvalidArgument, "volume capability is required")
	case c.GetBlock() != nil:
		return status.Error(codes.InvalidArgument, "block volumes are not supported: filesystem only")
	}
	return nil
}

// bindMount mounts src at target (made when missing), read-only when ro;
// a target already mounted is left alone.
func bindMount(src, target string, ro bool) error {
	if err := os.MkdirAll(target, 0o750); err != nil {
		return status.Errorf(codes.Internal, "create %s: %v", target, err)
	}
	if ok, err := isMountPoint(target); err != nil {
		return status.Errorf(codes.Internal, "read mounts: %v", err)
	} else if ok {
		return nil
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return status.Errorf(codes.Internal, "bind %s at %s: %v", src, target, err)
	}
	if ro {
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			_ = syscall.Unmount(target, 0)
			return status.Errorf(codes.Internal, "remount %s read-only: %v", target, err)
		}
	}
	return nil
}

// unmount unmounts path when it is a mount point and, with remove, removes
// the folder; a path that does not exist is already done.
func unmount(path string, remove bool) error {
	ok, err := isMountPoint(path)
	if err != nil {
		return status.Errorf(codes.Internal, "read mounts: %v", err)
	}
	if ok {
		if err := syscall.Unmount(path, 0); err != nil {
			return status.Errorf(codes.Internal, "unmount %s: %v", path, err)
		}
	}
	if remove {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return status.Errorf(codes.Internal, "remove %s: %v", path, err)
		}
	}
	return nil
}

// isMountPoint reports whether path is the mount point of a mount of this
// process's mount namespace.
func isMountPoint(path string) (bool, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	mounts, err := MountPoints()
	return slices.Contains(mounts, abs), err
}

// MountPoints lists the mount points of this process's mount namespace
// (/proc/self/mountinfo's fifth field, unescaped). The local node's
// teardown (test/testenv) uses it too.
func MountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
