package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the paths of the programs a local cluster runs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Kubectl string
	SnapshotController, CSISnapshotter          string
	CSIProvisioner                              string
	Driver                                      string
	// CRDDir holds the VolumeSnapshot CRDs of the snapshot-controller's version.
	CRDDir string
	// SnapshotterVersion is the external-snapshotter release of
	// SnapshotController, CSISnapshotter and CRDDir ($SNAPSHOTTER_VERSION
	// picks another, see scripts/cluster/versions.sh).
	SnapshotterVersion string
	// KubeVersion is the Kubernetes release of APIServer, ControllerManager
	// and Kubectl ($JANITOR_KUBE_VERSION picks another supported minor).
	KubeVersion string
}

// RepoRoot walks up from the working directory to the folder holding
// scripts/cluster/versions.sh, so tests of any package find the scripts.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "cluster", "versions.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/cluster/versions.sh not found above the working directory")
		}
		dir = parent
	}
}

// cacheDirs evaluates versions.sh with bash so that the shell scripts and
// this package can never disagree about where a version lives.
func cacheDirs(root string) (map[string]string, error) {
	cmd := exec.Command("bash", "-c", `. scripts/cluster/versions.sh && printf 'KUBE_VERSION=%s\nKUBE_BIN=%s\nETCD_BIN=%s\nSNAPSHOTTER_BIN=%s\nSNAPSHOTTER_VERSION=%s\nPROVISIONER_BIN=%s\nCACHE_ROOT=%s\nACTIONLINT_BIN=%s\nNODE_BIN=%s\nCONTAINERD_BIN=%s\nRUNC_BIN=%s\nCNI_BIN=%s\n' "$KUBE_VERSION" "$KUBE_BIN" "$ETCD_BIN" "$SNAPSHOTTER_BIN" "$SNAPSHOTTER_VERSION" "$PROVISIONER_BIN" "$CACHE_ROOT" "$ACTIONLINT_BIN" "$NODE_BIN" "$CONTAINERD_BIN" "$RUNC_BIN" "$CNI_BIN"`)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("read scripts/cluster/versions.sh: %w", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

// FindBinaries returns the cached binaries, building whatever is missing with
// scripts/cluster/build.sh all (a cold build takes about 20 minutes on 2 cores;
// its progress goes to stderr). KUBEBUILDER_ASSETS, when it holds etcd and
// kube-apiserver, provides those two. The CSI driver is built from this
// repository every time (Go's build cache makes that a second).
func FindBinaries(root, driverOut string) (*Binaries, error) {
	dirs, err := cacheDirs(root)
	if err != nil {
		return nil, err
	}
	b := &Binaries{
		Etcd:               filepath.Join(dirs["ETCD_BIN"], "etcd"),
		APIServer:          filepath.Join(dirs["KUBE_BIN"], "kube-apiserver"),
		ControllerManager:  filepath.Join(dirs["KUBE_BIN"], "kube-controller-manager"),
		Kubectl:            filepath.Join(dirs["KUBE_BIN"], "kubectl"),
		SnapshotController: filepath.Join(dirs["SNAPSHOTTER_BIN"], "snapshot-controller"),
		CSISnapshotter:     filepath.Join(dirs["SNAPSHOTTER_BIN"], "csi-snapshotter"),
		CSIProvisioner:     filepath.Join(dirs["PROVISIONER_BIN"], "csi-provisioner"),
		CRDDir:             filepath.Join(dirs["SNAPSHOTTER_BIN"], "crd"),
		SnapshotterVersion: dirs["SNAPSHOTTER_VERSION"],
		KubeVersion:        dirs["KUBE_VERSION"],
		Driver:             driverOut,
	}
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" {
		if isExec(filepath.Join(assets, "etcd")) && isExec(filepath.Join(assets, "kube-apiserver")) {
			b.Etcd = filepath.Join(assets, "etcd")
			b.APIServer = filepath.Join(assets, "kube-apiserver")
		}
	}
	missing := false
	for _, p := range []string{b.Etcd, b.APIServer, b.ControllerManager, b.Kubectl, b.SnapshotController, b.CSISnapshotter, b.CSIProvisioner, filepath.Join(b.CRDDir, "snapshot.storage.k8s.io_volumesnapshots.yaml")} {
		if !isExec(p) && !isFile(p) {
			missing = true
		}
	}
	if missing {
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "cluster", "build.sh"), "all")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build control-plane binaries: %w", err)
		}
	}
	if driverOut != "" {
		if err := goBuild(root, driverOut, "./test/cmd/hostpath-csi"); err != nil {
			return nil, fmt.Errorf("build the CSI driver: %w", err)
		}
	}
	return b, nil
}

// goBuild builds one of this repository's commands (static, local
// toolchain) into out.
func goBuild(root, out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// NodeBinaries are the programs of the opt-in node (docs/node.md).
type NodeBinaries struct {
	Kubelet, Scheduler string
	// ContainerdDir holds containerd, containerd-shim-runc-v2 and ctr.
	ContainerdDir, Runc string
	// CNIDir holds the bridge, loopback and host-local plugins.
	CNIDir string
}

// FindNodeBinaries returns the node's cached binaries, building whatever is
// missing with scripts/cluster/build.sh node (about 3 minutes cold; it
// installs Debian's libseccomp-dev for runc when that is missing).
func FindNodeBinaries(root string) (*NodeBinaries, error) {
	dirs, err := cacheDirs(root)
	if err != nil {
		return nil, err
	}
	b := &NodeBinaries{
		Kubelet:       filepath.Join(dirs["NODE_BIN"], "kubelet"),
		Scheduler:     filepath.Join(dirs["NODE_BIN"], "kube-scheduler"),
		ContainerdDir: dirs["CONTAINERD_BIN"],
		Runc:          filepath.Join(dirs["RUNC_BIN"], "runc"),
		CNIDir:        dirs["CNI_BIN"],
	}
	for _, p := range []string{b.Kubelet, b.Scheduler, filepath.Join(b.ContainerdDir, "containerd-shim-runc-v2"), filepath.Join(b.ContainerdDir, "ctr"), b.Runc, filepath.Join(b.CNIDir, "host-local")} {
		if isExec(p) {
			continue
		}
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "cluster", "build.sh"), "node")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build the node's binaries: %w", err)
		}
		break
	}
	return b, nil
}

// LintTool returns the path of a linter the tests run: actionlint from the
// cache (scripts/cluster/lint-tools.sh builds the pinned version there) or
// else from PATH; shellcheck (a Debian package) from PATH. A missing tool is
// an error that says how to install it: tests fail on it rather than skip.
func LintTool(name string) (string, error) {
	if name == "actionlint" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dirs, err := cacheDirs(root)
		if err != nil {
			return "", err
		}
		if p := filepath.Join(dirs["ACTIONLINT_BIN"], name); isExec(p) {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not installed: run `make tools` (scripts/cluster/lint-tools.sh): %w", name, err)
	}
	return p, nil
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
