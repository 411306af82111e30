// Package csidriver is a deliberately tiny CSI plugin for the project's local
// test cluster. It exists so that the real external-snapshotter
// (snapshot-controller + csi-snapshotter) has something to talk to that
// produces genuine readyToUse and status.error outcomes, without needing a
// real storage backend.
//
// The identity service, the controller service's volume and snapshot calls
// and a node service are implemented: on a node, a volume is staged and
// published as bind mounts of its folder (node.go), so that a pod writes the
// bytes a snapshot copies.
// Volumes and snapshots hold real bytes, kept as plain files in the state
// folder: CreateSnapshot copies the volume's files, CreateVolume from a
// snapshot copies them back (see data.go; tests write and read them with
// WriteVolumeFile and ReadVolumeFile). Everything the driver knows lives in
// that state folder so that it survives restarts of the driver container, and
// tests running in other processes steer its snapshot behaviour per source
// volume through fault files in that same folder (see SetFault).
package csidriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// DefaultDriverName is the CSI driver name used when Options.DriverName is
// empty; it must match the driver field of the test cluster's
// VolumeSnapshotClass and PersistentVolumes.
const DefaultDriverName = "hostpath.pvc-janitor.io"

// VendorVersion is reported by GetPluginInfo. It is fixed because the test
// cluster never needs to tell two builds of this driver apart.
const VendorVersion = "v0.1.0"

// gracePeriod bounds how long Serve waits for in-flight RPCs after its
// context ends, so that a sidecar holding a connection open cannot keep the
// driver from exiting on SIGTERM.
const gracePeriod = 5 * time.Second

// Options configures a Driver.
type Options struct {
	// DriverName is reported to the sidecars; empty means DefaultDriverName.
	DriverName string
	// StateDir holds snapshot records, fault files and fault counters. It is
	// required because durability across restarts is the point of the driver.
	StateDir string
	// Logger, when non-nil, receives one line per RPC so that test failures
	// in the cluster can be traced back to what the sidecar actually asked.
	Logger *log.Logger
	// NodeID is what NodeGetInfo answers; empty means the host name.
	NodeID string
}

// Driver serves the CSI identity and controller services over a state
// folder. One Driver must own a state folder at a time: the snapshot records
// are cached in memory and only re-read by New.
type Driver struct {
	name     string
	stateDir string
	logger   *log.Logger
	nodeID   string

	// mu serialises every RPC that reads or writes state, which keeps the
	// read-modify-write of fault counters and snapshot records trivially
	// correct; throughput does not matter for a test driver.
	mu        sync.Mutex
	snapshots map[string]*snapshotRecord
	volumes   map[string]*volumeRecord
}

// New prepares the state folder and loads the snapshots recorded by earlier
// runs, so that a restarted driver answers exactly as the previous one would.
func New(opts Options) (*Driver, error) {
	if opts.StateDir == "" {
		return nil, errors.New("csidriver: state dir is required")
	}
	name := opts.DriverName
	if name == "" {
		name = DefaultDriverName
	}
	d := &Driver{
		name:     name,
		stateDir: opts.StateDir,
		logger:   opts.Logger,
		nodeID:   opts.NodeID,
	}
	for _, dir := range []string{d.snapshotDir(), d.volumeRecordDir(), faultDir(d.stateDir), counterDir(d.stateDir),
		volumeDataRoot(d.stateDir), snapshotDataRoot(d.stateDir)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("csidriver: create state folder: %w", err)
		}
	}
	snaps, err := loadSnapshots(d.snapshotDir())
	if err != nil {
		return nil, err
	}
	d.snapshots = snaps
	if d.volumes, err = loadVolumes(d.volumeRecordDir()); err != nil {
		return nil, err
	}
	return d, nil
}

// SnapshotID derives the snapshot id from the CSI snapshot name. Making it a
// pure function of the name gives idempotent CreateSnapshot for free and lets
// tests predict the snapshotHandle that will appear on VolumeSnapshotContents.
func SnapshotID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "snap-" + hex.EncodeToString(sum[:16])
}

// VolumeID derives the volume id from the CSI volume name, for the same
// reasons as SnapshotID: idempotent CreateVolume, predictable handles.
func VolumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:16])
}

// Listen opens the unix socket named by endpoint ("unix:///path", "unix:/path"
// or a plain path). It is separate from Serve so that callers, tests in
// particular, know the socket accepts connections before they dial.
func Listen(endpoint string) (net.Listener, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("csidriver: create socket folder: %w", err)
	}
	// A socket left behind by a killed driver would make bind fail with
	// "address already in use"; anything that is not a socket is left alone
	// because deleting it would be a surprise.
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("csidriver: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("csidriver: remove stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("csidriver: stat socket: %w", err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("csidriver: listen: %w", err)
	}
	return lis, nil
}

func socketPath(endpoint string) (string, error) {
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		endpoint = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		endpoint = strings.TrimPrefix(endpoint, "unix:")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("csidriver: unsupported endpoint %q: only unix sockets are served", endpoint)
	}
	if endpoint == "" {
		return "", errors.New("csidriver: empty endpoint")
	}
	return endpoint, nil
}

// Serve listens on endpoint and serves until ctx is done, then stops
// gracefully. It returns nil after a clean shutdown.
func (d *Driver) Serve(ctx context.Context, endpoint string) error {
	lis, err := Listen(endpoint)
	if err != nil {
		return err
	}
	return d.ServeListener(ctx, lis)
}

// ServeListener serves on an already open listener until ctx is done, then
// stops gracefully (falling back to a hard stop after a grace period). The
// listener is closed on return, which also unlinks a unix socket file.
func (d *Driver) ServeListener(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logUnary))
	csi.RegisterIdentityServer(srv, &identityServer{d: d})
	csi.RegisterControllerServer(srv, &controllerServer{d: d})
	csi.RegisterNodeServer(srv, &nodeServer{d: d})

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()

	select {
	case err := <-errc:
		return fmt.Errorf("csidriver: serve: %w", err)
	case <-ctx.Done():
	}

	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(gracePeriod)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		srv.Stop()
		<-stopped
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("csidriver: serve: %w", err)
	}
	return nil
}

// logUnary writes one line per RPC. Requests are summarised by hand rather
// than printed whole because CSI requests may carry secrets.
func (d *Driver) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if d.logger == nil {
		return handler(ctx, req)
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	st := status.Convert(err)
	line := fmt.Sprintf("%s%s code=%s took=%s", info.FullMethod, summarize(req), st.Code(), time.Since(start).Round(time.Microsecond))
	if err != nil {
		line += fmt.Sprintf(" err=%q", st.Message())
	}
	if r, ok := resp.(*csi.CreateSnapshotResponse); ok && r.GetSnapshot() != nil {
		line += fmt.Sprintf(" id=%s ready=%t", r.GetSnapshot().GetSnapshotId(), r.GetSnapshot().GetReadyToUse())
	}
	if r, ok := resp.(*csi.CreateVolumeResponse); ok && r.GetVolume() != nil {
		line += fmt.Sprintf(" id=%s", r.GetVolume().GetVolumeId())
	}
	d.logger.Print(line)
	return resp, err
}

func summarize(req any) string {
	switch r := req.(type) {
	case *csi.CreateSnapshotRequest:
		return fmt.Sprintf(" name=%q source=%q", r.GetName(), r.GetSourceVolumeId())
	case *csi.DeleteSnapshotRequest:
		return fmt.Sprintf(" id=%q", r.GetSnapshotId())
	case *csi.CreateVolumeRequest:
		return fmt.Sprintf(" name=%q snapshot=%q required=%d", r.GetName(),
			r.GetVolumeContentSource().GetSnapshot().GetSnapshotId(), r.GetCapacityRange().GetRequiredBytes())
	case *csi.DeleteVolumeRequest:
		return fmt.Sprintf(" id=%q", r.GetVolumeId())
	case *csi.ValidateVolumeCapabilitiesRequest:
		return fmt.Sprintf(" id=%q", r.GetVolumeId())
	case *csi.ListSnapshotsRequest:
		return fmt.Sprintf(" id=%q source=%q max=%d token=%q", r.GetSnapshotId(), r.GetSourceVolumeId(), r.GetMaxEntries(), r.GetStartingToken())
	default:
		return ""
	}
}
