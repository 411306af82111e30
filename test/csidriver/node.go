package csidriver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeServer is the node service of a driver that has no node side: the
// test cluster has no kubelet, so no volume is ever staged or published
// (tests read and write a volume's files directly, see WriteVolumeFile). It
// answers only what such a driver can answer truthfully: it has no node
// capabilities, and unpublishing a volume that exists is a no-op because it
// was never published. Everything else is Unimplemented. csi-sanity needs
// exactly these two calls to clean up after its controller specs.
type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (s *nodeServer) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if req.GetTargetPath() == "" {
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	s.d.mu.Lock()
	_, ok := s.d.volumes[req.GetVolumeId()]
	s.d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
