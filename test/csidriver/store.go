package csidriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// snapshotRecord is the durable form of a snapshot. CreatedAt is the wall
// clock time of the first successful CreateSnapshot; ReadyAfter faults are
// measured from it, so it must survive restarts unchanged.
type snapshotRecord struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	SourceVolumeID string    `json:"sourceVolumeId"`
	CreatedAt      time.Time `json:"createdAt"`
	// CutAt, when set, is the creation_time reported instead of
	// CreatedAt: CreatedAt moved by the fault's CutOffset (a storage clock
	// ahead or behind).
	CutAt time.Time `json:"cutAt,omitzero"`
	// ReadyToUse latches once the snapshot has been reported ready, because
	// the snapshotter treats readiness as one-way and a later, longer
	// ReadyAfter fault must not take it back.
	ReadyToUse bool `json:"readyToUse"`
	// SizeBytes is the source volume's capacity when the driver created
	// that volume, 0 ("unknown") for a volume it does not know.
	SizeBytes int64 `json:"sizeBytes,omitempty"`
}

// volumeRecord is the durable form of a volume made by CreateVolume. Its
// content lives in the volume's data folder (see data.go); the record's
// existence is what makes the volume exist for the controller RPCs.
type volumeRecord struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	CapacityBytes int64  `json:"capacityBytes"`
	// SourceSnapshotID is the snapshot the volume was restored from.
	SourceSnapshotID string            `json:"sourceSnapshotId,omitempty"`
	Parameters       map[string]string `json:"parameters,omitempty"`
	CreatedAt        time.Time         `json:"createdAt"`
}

func (d *Driver) volumeRecordDir() string { return filepath.Join(d.stateDir, "volume-records") }

func (d *Driver) volumeRecordPath(id string) string {
	return filepath.Join(d.volumeRecordDir(), id+".json")
}

func loadVolumes(dir string) (map[string]*volumeRecord, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("csidriver: read volume records: %w", err)
	}
	vols := make(map[string]*volumeRecord, len(entries))
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var rec volumeRecord
		if err := readJSON(filepath.Join(dir, e.Name()), &rec); err != nil {
			return nil, err
		}
		if rec.ID == "" {
			return nil, fmt.Errorf("csidriver: volume record %s has no id", e.Name())
		}
		vols[rec.ID] = &rec
	}
	return vols, nil
}

func (d *Driver) snapshotDir() string { return filepath.Join(d.stateDir, "snapshots") }

func (d *Driver) snapshotPath(id string) string {
	return filepath.Join(d.snapshotDir(), id+".json")
}

func loadSnapshots(dir string) (map[string]*snapshotRecord, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("csidriver: read snapshot records: %w", err)
	}
	snaps := make(map[string]*snapshotRecord, len(entries))
	for _, e := range entries {
		// Leftover temp files from an interrupted write start with a dot and
		// are ignored: the rename never happened, so the write never counted.
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var rec snapshotRecord
		if err := readJSON(filepath.Join(dir, e.Name()), &rec); err != nil {
			return nil, err
		}
		if rec.ID == "" {
			return nil, fmt.Errorf("csidriver: snapshot record %s has no id", e.Name())
		}
		snaps[rec.ID] = &rec
	}
	return snaps, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("csidriver: parse %s: %w", path, err)
	}
	return nil
}

// writeJSONAtomic writes through a temp file and a rename so that readers in
// other processes, and the driver after a crash, see either the old or the
// new content and never a torn file.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	// CreateTemp uses 0600; the files are meant to be readable by test
	// processes that may run as another user against a hostPath.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes the rename itself durable. Failure is ignored because some
// filesystems do not support syncing a directory and the data is already safe.
func syncDir(dir string) {
	f, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = f.Sync()
	_ = f.Close()
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
