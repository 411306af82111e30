package csidriver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// The bytes of volumes and snapshots live in the state folder as plain files:
//
//	<state-dir>/volumes/<escaped volume handle>/...   a volume's content
//	<state-dir>/snapshot-data/<snapshot id>/...       a snapshot's copy of it
//
// Any volume handle has a content folder, also one the driver never created
// (the test cluster's hand-made PersistentVolumes): it appears when something
// is written to the volume, and a snapshot of a volume without one is empty.
// CreateSnapshot copies the source's folder, CreateVolume from a snapshot
// copies the snapshot's folder back, and the Delete calls remove them. Tests
// stand in for a pod (there is no kubelet) with WriteVolumeFile and
// ReadVolumeFile.

func volumeDataRoot(stateDir string) string   { return filepath.Join(stateDir, "volumes") }
func snapshotDataRoot(stateDir string) string { return filepath.Join(stateDir, "snapshot-data") }

// dataDirName escapes a handle into one path element. A leading dot is
// escaped too, so that "." and ".." never name a folder and no handle can
// collide with the hidden temp folders of an unfinished copy.
func dataDirName(handle string) string {
	name := url.PathEscape(handle)
	if strings.HasPrefix(name, ".") {
		name = "%2E" + name[1:]
	}
	return name
}

// VolumeDir returns the folder that holds the content of the volume with
// this CSI volume handle, in the state folder of a driver (which may run in
// another process). The folder may not exist yet.
func VolumeDir(stateDir, volumeHandle string) (string, error) {
	if volumeHandle == "" {
		return "", errors.New("csidriver: empty volume handle")
	}
	return filepath.Join(volumeDataRoot(stateDir), dataDirName(volumeHandle)), nil
}

func snapshotDataDir(stateDir, id string) string {
	return filepath.Join(snapshotDataRoot(stateDir), dataDirName(id))
}

// volumeFilePath resolves a slash-separated path inside a volume, refusing
// one that would leave it.
func volumeFilePath(stateDir, volumeHandle, path string) (string, error) {
	dir, err := VolumeDir(stateDir, volumeHandle)
	if err != nil {
		return "", err
	}
	rel := filepath.Clean(filepath.FromSlash(strings.TrimLeft(path, "/")))
	if rel == "." || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("csidriver: %q is not a file path inside the volume", path)
	}
	return filepath.Join(dir, rel), nil
}

// WriteVolumeFile writes data to path (slash-separated, relative to the
// volume's root) in the volume with this handle, as a pod mounting it would.
// Parent folders are created; the file is replaced atomically.
func WriteVolumeFile(stateDir, volumeHandle, path string, data []byte) error {
	p, err := volumeFilePath(stateDir, volumeHandle, path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("csidriver: write volume file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("csidriver: write volume file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("csidriver: write volume file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("csidriver: write volume file: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("csidriver: write volume file: %w", err)
	}
	return nil
}

// ReadVolumeFile reads path (slash-separated, relative to the volume's root)
// from the volume with this handle. A missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadVolumeFile(stateDir, volumeHandle, path string) ([]byte, error) {
	p, err := volumeFilePath(stateDir, volumeHandle, path)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// copyDirAtomic makes dst a copy of the folder src (an empty folder when src
// does not exist) and returns the number of bytes in its regular files. The
// copy is made in a hidden temp folder beside dst and renamed into place, so
// dst is either absent or complete, also after a crash; a dst left by an
// earlier, unrecorded attempt is replaced.
func copyDirAtomic(src, dst string) (int64, error) {
	parent := filepath.Dir(dst)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp) // no-op after the rename
	size, err := copyTree(src, tmp)
	if err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, err
	}
	if err := os.RemoveAll(dst); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, err
	}
	syncDir(parent)
	return size, nil
}

// copyTree copies the regular files, folders and symlinks under src into the
// existing folder dst. A missing src copies nothing.
func copyTree(src, dst string) (int64, error) {
	var size int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == src && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		// Temp files of a WriteVolumeFile in flight are not content yet.
		if strings.HasPrefix(d.Name(), ".tmp-") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			n, err := copyFile(p, target, info.Mode().Perm())
			size += n
			return err
		default:
			return nil // sockets, devices, pipes: not volume content here
		}
	})
	return size, err
}

func copyFile(src, dst string, perm fs.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
