package csidriver

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultCapacityBytes is the capacity recorded for a volume whose request
// names none. The volumes are folders with no real limit; the capacity is
// only what the driver reports back.
const DefaultCapacityBytes int64 = 1 << 30

// validateCapabilities checks volume capabilities against what a volume of
// this driver is: a folder, so only the mount access type, with any access
// mode (there is no node to enforce one on). It returns a reason when a
// capability is not supported.
func validateCapabilities(caps []*csi.VolumeCapability) string {
	for _, c := range caps {
		if c == nil {
			return "empty volume capability"
		}
		if c.GetBlock() != nil {
			return "block access is not supported: the volumes are folders"
		}
		if c.GetMount() == nil {
			return "an access type (mount) is required"
		}
		if c.GetAccessMode() == nil || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_UNKNOWN {
			return "an access mode is required"
		}
	}
	return ""
}

// capacityFor returns the capacity a new volume gets for the range, or an
// error when the range is invalid or below minBytes (the size of the
// snapshot it is restored from).
func capacityFor(r *csi.CapacityRange, minBytes int64) (int64, error) {
	req, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if req < 0 || limit < 0 {
		return 0, status.Error(codes.InvalidArgument, "capacity range must not be negative")
	}
	if limit > 0 && req > limit {
		return 0, status.Errorf(codes.InvalidArgument, "required_bytes %d exceed limit_bytes %d", req, limit)
	}
	// A volume is never smaller than the snapshot it is restored from; a
	// request for less is out of range (CSI's own example of OUT_OF_RANGE).
	if req > 0 && req < minBytes || limit > 0 && limit < minBytes {
		return 0, status.Errorf(codes.OutOfRange, "the source snapshot needs %d bytes, more than the range [%d, %d]", minBytes, req, limit)
	}
	capacity := req
	if capacity == 0 {
		capacity = max(DefaultCapacityBytes, minBytes)
		if limit > 0 {
			capacity = min(capacity, limit)
		}
	}
	return capacity, nil
}

// fits reports whether an existing volume satisfies a repeated request.
func (v *volumeRecord) fits(r *csi.CapacityRange) bool {
	if req := r.GetRequiredBytes(); req > 0 && v.CapacityBytes < req {
		return false
	}
	if limit := r.GetLimitBytes(); limit > 0 && v.CapacityBytes > limit {
		return false
	}
	return true
}

func (v *volumeRecord) proto() *csi.Volume {
	vol := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.CapacityBytes}
	if v.SourceSnapshotID != "" {
		vol.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID}}}
	}
	return vol
}

// CreateVolume makes an empty volume, or one holding a copy of a snapshot's
// files. The id is a function of the name, so a retry finds the volume made
// by the first call; a retry asking for something else is AlreadyExists.
func (s *controllerServer) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume name is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	if why := validateCapabilities(req.GetVolumeCapabilities()); why != "" {
		return nil, status.Error(codes.InvalidArgument, why)
	}
	var snapshotID string
	if src := req.GetVolumeContentSource(); src != nil {
		switch {
		case src.GetSnapshot() != nil:
			snapshotID = src.GetSnapshot().GetSnapshotId()
			if snapshotID == "" {
				return nil, status.Error(codes.InvalidArgument, "volume content source snapshot has no id")
			}
		case src.GetVolume() != nil:
			return nil, status.Error(codes.InvalidArgument, "cloning volumes is not supported")
		default:
			return nil, status.Error(codes.InvalidArgument, "unknown volume content source")
		}
	}

	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()

	id := VolumeID(req.GetName())
	if rec, ok := d.volumes[id]; ok {
		if rec.Name != req.GetName() || rec.SourceSnapshotID != snapshotID || !rec.fits(req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q already exists with capacity %d and source snapshot %q",
				req.GetName(), rec.CapacityBytes, rec.SourceSnapshotID)
		}
		return &csi.CreateVolumeResponse{Volume: rec.proto()}, nil
	}

	var minBytes int64
	if snapshotID != "" {
		snap, ok := d.snapshots[snapshotID]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "snapshot %q not found", snapshotID)
		}
		f, _, err := d.loadFault(snap.SourceVolumeID)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "read fault for %q: %v", snap.SourceVolumeID, err)
		}
		p, err := d.snapshotProto(snap, f)
		if err != nil {
			return nil, err
		}
		if !p.GetReadyToUse() {
			return nil, status.Errorf(codes.Unavailable, "snapshot %q is not ready to use yet", snapshotID)
		}
		minBytes = snap.SizeBytes
	}
	capacity, err := capacityFor(req.GetCapacityRange(), minBytes)
	if err != nil {
		return nil, err
	}

	// The content first, then the record: a volume that is recorded always
	// has its content complete. A crash in between leaves a folder that the
	// retry replaces.
	dir, err := VolumeDir(d.stateDir, id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	src := "" // no folder: an empty volume
	if snapshotID != "" {
		src = snapshotDataDir(d.stateDir, snapshotID)
	}
	if _, err := copyDirAtomic(src, dir); err != nil {
		return nil, status.Errorf(codes.Internal, "create volume content: %v", err)
	}
	rec := &volumeRecord{
		ID:               id,
		Name:             req.GetName(),
		CapacityBytes:    capacity,
		SourceSnapshotID: snapshotID,
		Parameters:       maps.Clone(req.GetParameters()),
		CreatedAt:        time.Now().UTC().Round(time.Microsecond),
	}
	if err := writeJSONAtomic(d.volumeRecordPath(id), rec); err != nil {
		return nil, status.Errorf(codes.Internal, "persist volume: %v", err)
	}
	d.volumes[id] = rec
	return &csi.CreateVolumeResponse{Volume: rec.proto()}, nil
}

// DeleteVolume removes a volume's record and content. Its snapshots keep
// their own copies. An unknown id succeeds, as the spec requires; it removes
// nothing, because a handle the driver did not create belongs to a volume
// made by hand, whose files are not the driver's to delete.
func (s *controllerServer) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.volumes[id]; !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	// The record first: once it is gone the volume no longer exists, and a
	// crash before the content is removed leaves only an orphaned folder.
	if err := removeIfExists(d.volumeRecordPath(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "delete volume record: %v", err)
	}
	delete(d.volumes, id)
	dir, err := VolumeDir(d.stateDir, id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := removeAll(dir); err != nil {
		return nil, status.Errorf(codes.Internal, "delete volume content: %v", err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms the capabilities a volume made by
// CreateVolume supports (see validateCapabilities).
func (s *controllerServer) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	d := s.d
	d.mu.Lock()
	_, ok := d.volumes[req.GetVolumeId()]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q not found", req.GetVolumeId())
	}
	if why := validateCapabilities(req.GetVolumeCapabilities()); why != "" {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: why}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	syncDir(filepath.Dir(dir))
	return nil
}
