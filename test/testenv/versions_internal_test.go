package testenv

import (
	"path/filepath"
	"testing"
)

// TestSnapshotterVersionSelectsCacheFolder: SNAPSHOTTER_VERSION in the
// environment picks the external-snapshotter build that versions.sh, build.sh
// and FindBinaries use (v8.7.0 by default, v8.4.0 kept buildable).
func TestSnapshotterVersionSelectsCacheFolder(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]string{"": "v8.7.0", "v8.4.0": "v8.4.0"} {
		t.Setenv("SNAPSHOTTER_VERSION", env)
		dirs, err := cacheDirs(root)
		if err != nil {
			t.Fatal(err)
		}
		if dirs["SNAPSHOTTER_VERSION"] != want || filepath.Base(dirs["SNAPSHOTTER_BIN"]) != "snapshotter-"+want {
			t.Errorf("SNAPSHOTTER_VERSION=%q: version %q, folder %s; want %s", env, dirs["SNAPSHOTTER_VERSION"], dirs["SNAPSHOTTER_BIN"], want)
		}
		if filepath.Base(dirs["PROVISIONER_BIN"]) != "provisioner-v6.4.0" {
			t.Errorf("provisioner folder %s", dirs["PROVISIONER_BIN"])
		}
	}
}
