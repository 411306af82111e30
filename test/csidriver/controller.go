package csidriver

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// controllerServer embeds UnimplementedControllerServer so that the calls
// the driver does not advertise (publish, list volumes, capacity, expand,
// clone, …) answer Unimplemented. The volume calls are in volume.go.
type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	}
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, c := range caps {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

func (s *controllerServer) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot name is required")
	}
	source := req.GetSourceVolumeId()
	if source == "" {
		return nil, status.Error(codes.InvalidArgument, "source volume id is required")
	}

	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()

	// Faults come before the idempotency check on purpose: they model a
	// broken backend for the volume, which would fail a retry of an already
	// created snapshot just as well.
	fault, revision, err := d.loadFault(source)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read fault for %q: %v", source, err)
	}
	if fault.PermanentError != "" {
		return nil, status.Error(codes.InvalidArgument, fault.PermanentError)
	}
	fail, err := d.takeTransientFailure(source, fault, revision)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "record transient failure for %q: %v", source, err)
	}
	if fail {
		code, _ := fault.transientCode() // validated by loadFault
		return nil, status.Errorf(code, "injected transient failure for source volume %q", source)
	}

	id := SnapshotID(req.GetName())
	rec, ok := d.snapshots[id]
	if ok && (rec.Name != req.GetName() || rec.SourceVolumeID != source) {
		return nil, status.Errorf(codes.AlreadyExists, "snapshot %q already exists for source volume %q", req.GetName(), rec.SourceVolumeID)
	}
	if !ok {
		rec = &snapshotRecord{
			ID:             id,
			Name:           req.GetName(),
			SourceVolumeID: source,
			// Rounded so that the in-memory and reloaded values compare
			// equal and creation_time never changes across a restart.
			CreatedAt: time.Now().UTC().Round(time.Microsecond),
		}
		if fault.CutOffset != 0 {
			rec.CutAt = rec.CreatedAt.Add(fault.CutOffset)
		}
		if vol, ok := d.volumes[source]; ok {
			rec.SizeBytes = vol.CapacityBytes
		}
		// The copy of the volume's files first, then the record: a recorded
		// snapshot always has its copy complete. A volume the driver did
		// not create and nobody wrote to has no folder: its copy is empty.
		src, err := VolumeDir(d.stateDir, source)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if _, err := copyDirAtomic(src, snapshotDataDir(d.stateDir, id)); err != nil {
			return nil, status.Errorf(codes.Internal, "copy volume %q: %v", source, err)
		}
		if err := writeJSONAtomic(d.snapshotPath(id), rec); err != nil {
			return nil, status.Errorf(codes.Internal, "persist snapshot: %v", err)
		}
		d.snapshots[id] = rec
	}
	snap, err := d.snapshotProto(rec, fault)
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: snap}, nil
}

func (s *controllerServer) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot id is required")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	// Unknown ids succeed as the spec requires, so a retried delete after a
	// lost response does not leave the VolumeSnapshotContent stuck.
	if _, ok := d.snapshots[id]; !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	// The record first, then the copy (as DeleteVolume does).
	if err := removeIfExists(d.snapshotPath(id)); err != nil {
		return nil, status.Errorf(codes.Internal, "delete snapshot record: %v", err)
	}
	delete(d.snapshots, id)
	if err := removeAll(snapshotDataDir(d.stateDir, id)); err != nil {
		return nil, status.Errorf(codes.Internal, "delete snapshot content: %v", err)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (s *controllerServer) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries must not be negative")
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()

	var matches []*snapshotRecord
	for _, rec := range d.snapshots {
		if req.GetSnapshotId() != "" && rec.ID != req.GetSnapshotId() {
			continue
		}
		if req.GetSourceVolumeId() != "" && rec.SourceVolumeID != req.GetSourceVolumeId() {
			continue
		}
		matches = append(matches, rec)
	}
	// The token is an offset into this order, so it must be stable between
	// pages; ids are unique, which makes the order total.
	sort.Slice(matches, func(i, j int) bool { return matches[i].ID < matches[j].ID })

	start := 0
	if tok := req.GetStartingToken(); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(matches) {
			return nil, status.Errorf(codes.Aborted, "invalid starting_token %q", tok)
		}
		start = n
	}
	end := len(matches)
	if max := int(req.GetMaxEntries()); max > 0 && start+max < end {
		end = start + max
	}

	resp := &csi.ListSnapshotsResponse{}
	faults := map[string]Fault{}
	for _, rec := range matches[start:end] {
		f, ok := faults[rec.SourceVolumeID]
		if !ok {
			var err error
			f, _, err = d.loadFault(rec.SourceVolumeID)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "read fault for %q: %v", rec.SourceVolumeID, err)
			}
			faults[rec.SourceVolumeID] = f
		}
		snap, err := d.snapshotProto(rec, f)
		if err != nil {
			return nil, err
		}
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snap})
	}
	if end < len(matches) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

// snapshotProto evaluates readiness against the fault in force now rather
// than the one at creation time, so a test can hold a snapshot not-ready with
// a long ReadyAfter and release it by clearing the fault. The caller holds
// d.mu.
func (d *Driver) snapshotProto(rec *snapshotRecord, f Fault) (*csi.Snapshot, error) {
	if !rec.ReadyToUse && !time.Now().Before(rec.CreatedAt.Add(f.ReadyAfter)) {
		latched := *rec
		latched.ReadyToUse = true
		if err := writeJSONAtomic(d.snapshotPath(rec.ID), &latched); err != nil {
			return nil, status.Errorf(codes.Internal, "persist snapshot readiness: %v", err)
		}
		*rec = latched
	}
	cut := rec.CreatedAt
	if !rec.CutAt.IsZero() {
		cut = rec.CutAt
	}
	return &csi.Snapshot{
		SnapshotId:     rec.ID,
		SourceVolumeId: rec.SourceVolumeID,
		CreationTime:   timestamppb.New(cut),
		ReadyToUse:     rec.ReadyToUse,
		SizeBytes:      rec.SizeBytes,
	}, nil
}
