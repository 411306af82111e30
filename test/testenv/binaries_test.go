//go:build integration

package testenv_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

// TestKubebuilderAssetsAreHonoured: envtest's etcd and kube-apiserver, when
// a user has them, replace the built ones.
func TestKubebuilderAssetsAreHonoured(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets := t.TempDir()
	for name, src := range map[string]string{"etcd": env.Bin.Etcd, "kube-apiserver": env.Bin.APIServer} {
		if err := os.Symlink(src, filepath.Join(assets, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	b, err := testenv.FindBinaries(root, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Etcd != filepath.Join(assets, "etcd") || b.APIServer != filepath.Join(assets, "kube-apiserver") {
		t.Fatalf("KUBEBUILDER_ASSETS ignored: etcd %s, apiserver %s", b.Etcd, b.APIServer)
	}
	if b.ControllerManager == "" || filepath.Dir(b.ControllerManager) == assets {
		t.Fatalf("kube-controller-manager must still come from the cache: %s", b.ControllerManager)
	}
}
