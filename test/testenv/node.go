//go:build integration

package testenv

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pvc-janitor/pvc-janitor/test/csidriver"
)

// The opt-in node (docs/node.md): JANITOR_CLUSTER_NODE=1 adds a kubelet of
// the control plane's version, containerd and runc, the CNI bridge and the
// CSI driver's node service, so that pods really run: the chart's CronJob,
// and workspaces that write to their claims.
const (
	// NodeEnv is the environment variable that asks for the node
	// (Options.Node): make cluster-up, make demo NODE=1, make test.
	NodeEnv = "JANITOR_CLUSTER_NODE"
	// NodeName is the node's name.
	NodeName = "pvcj-node"
	// JanitorImageRepository and JanitorImageTag name the janitor's image
	// the node holds: built from this checkout by scripts/image/build.sh
	// (make image's recipe) and imported, never pulled.
	JanitorImageRepository = "ghcr.io/pvc-janitor/pvc-janitor"
	JanitorImageTag        = "0.0.0-local"
	// WorkspaceImage runs test/cmd/workspace; PauseImage is the sandbox.
	WorkspaceImage = "pvc-janitor.local/workspace:1"
	PauseImage     = "pvc-janitor.local/pause:1"
	// serviceIP is the kubernetes Service's ClusterIP (the first address
	// of --service-cluster-ip-range), which pods are told to use.
	serviceIP = "10.0.0.1"
	podSubnet = "10.244.0.0/24"
)

// NodeFromEnv reports whether $JANITOR_CLUSTER_NODE asks for the node.
func NodeFromEnv() bool { return os.Getenv(NodeEnv) == "1" }

// nodeLayout is where one cluster's node lives on this machine. Every name
// derives from the cluster folder, so that a second cluster never shares a
// namespace, a cgroup or a socket with the first, and so that `down` finds
// everything again from the folder alone.
type nodeLayout struct {
	ID             string // 6 hex digits of the cluster folder's hash
	Dir            string // /tmp/pvcj-<id>: short, unix sockets live here
	NetNS          string // the network namespace, pvcj-<id>
	HostIf, NodeIf string // the veth pair: host end, node end
	HostIP, NodeIP string // their addresses, one /30 of 10.201.0.0/16
	CgroupRoot     string // kubelet's cgroupRoot, /pvcj-<id>
}

func layoutFor(clusterDir string) nodeLayout {
	h := fnv.New32a()
	_, _ = h.Write([]byte(clusterDir))
	sum := h.Sum32()
	l := layoutOf(fmt.Sprintf("%06x", sum&0xffffff))
	third, fourth := byte(sum>>8), byte(sum)&0xfc
	l.HostIP, l.NodeIP = fmt.Sprintf("10.201.%d.%d", third, fourth+1), fmt.Sprintf("10.201.%d.%d", third, fourth+2)
	return l
}

// layoutOf is the layout of node id but its addresses, which only the
// cluster folder gives (teardown does not need them).
func layoutOf(id string) nodeLayout {
	return nodeLayout{
		ID: id, Dir: filepath.Join(os.TempDir(), "pvcj-"+id), NetNS: "pvcj-" + id,
		HostIf: "pvcj" + id + "h", NodeIf: "pvcj" + id + "n", CgroupRoot: "/pvcj-" + id,
	}
}

// sweepStaleNodes tears down the nodes of other clusters that nothing runs
// any more: a test binary killed by go test's timeout leaves its node's
// containers, mounts, cgroups and namespace behind, in a folder of its
// own. A node is stale when neither its kubelet nor its containerd runs
// (the shims outlive them) and the folder is older than two minutes (a
// node being started has neither for a few seconds).
func sweepStaleNodes(progress io.Writer) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pvcj-*"))
	for _, d := range dirs {
		id := strings.TrimPrefix(filepath.Base(d), "pvcj-")
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() || len(id) != 6 || time.Since(st.ModTime()) < 2*time.Minute ||
			len(processesNaming(d+"/kubelet.yaml")) > 0 || len(processesNaming(d+"/containerd.toml")) > 0 {
			continue
		}
		fmt.Fprintf(progress, "node: removing the stale node in %s\n", d)
		_ = layoutOf(id).teardown(progress)
	}
}

func (l nodeLayout) nsPath() string          { return filepath.Join("/run/netns", l.NetNS) }
func (l nodeLayout) path(p ...string) string { return filepath.Join(append([]string{l.Dir}, p...)...) }
func (l nodeLayout) containerdSock() string  { return l.path("containerd.sock") }

// registrationSocket is where the CSI driver serves kubelet's plugin
// registration API.
func (l nodeLayout) registrationSocket() string {
	return l.path("kubelet", "plugins_registry", DriverName+"-reg.sock")
}

// nodeMarker records in the cluster folder that it has a node.
func nodeMarker(clusterDir string) string { return filepath.Join(clusterDir, "node") }

// prepareNode clears what a killed earlier node of the same folder left and
// creates the node's folders, before the driver starts (it serves the
// registration socket inside them).
func prepareNode(clusterDir string, progress io.Writer) (nodeLayout, error) {
	sweepStaleNodes(progress)
	l := layoutFor(clusterDir)
	if err := l.teardown(io.Discard); err != nil {
		return l, fmt.Errorf("clear an earlier node: %w", err)
	}
	for _, d := range []string{"kubelet/plugins_registry", "containerd/root", "containerd/state", "cni/net.d", "cni/ipam", "pod-logs", "images"} {
		if err := os.MkdirAll(l.path(d), 0o700); err != nil {
			return l, err
		}
	}
	return l, os.WriteFile(nodeMarker(clusterDir), []byte(l.Dir+"\n"), 0o600)
}

// startNode brings the node up once the control plane and the driver are:
// network namespace, API relay, containerd with the images, kubelet,
// kube-scheduler, the CSIDriver object; it returns once the node is Ready
// and the driver registered on it.
func (c *Cluster) startNode(ctx context.Context, l nodeLayout, server string, p *pki, step func(string, ...any)) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	nb, err := FindNodeBinaries(root)
	if err != nil {
		return err
	}
	if err := l.network(); err != nil {
		return fmt.Errorf("node network: %w", err)
	}
	proxy := filepath.Join(c.Dir, "bin", "nodeproxy")
	if err := goBuild(root, proxy, "./test/cmd/nodeproxy"); err != nil {
		return err
	}
	if err := c.run("nodeproxy", proxy, "--netns", l.nsPath(), "--to", strings.TrimPrefix(server, "https://"),
		"--listen", serviceIP+":443", "--listen", "127.0.0.1:6443"); err != nil {
		return err
	}
	step("node network namespace %s (%s), API relay on %s:443", l.NetNS, l.NodeIP, serviceIP)
	if err := l.cgroups(); err != nil {
		return err
	}
	if err := c.startContainerd(ctx, l, nb); err != nil {
		return err
	}
	if err := c.importImages(ctx, root, l, nb); err != nil {
		return err
	}
	step("containerd up, images imported (%s:%s, %s, %s)", JanitorImageRepository, JanitorImageTag, WorkspaceImage, PauseImage)
	if err := c.startKubelet(l, nb, p); err != nil {
		return err
	}
	if err := c.run("kube-scheduler", nb.Scheduler, "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--secure-port=0", "--v=1"); err != nil {
		return err
	}
	if err := createCSIDriver(ctx, c); err != nil {
		return err
	}
	if err := waitNodeReady(ctx, c); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(c.Dir, "logs"))
	}
	step("node %s Ready: kubelet, containerd, runc, CNI bridge %s, kube-scheduler, driver registered", NodeName, podSubnet)
	return nil
}

// network creates the node's namespace and its veth pair. Nothing routes
// out of the namespace: it has no default route, so a pod reaches only
// addresses inside it (the relay on the Service IP) and the API server
// reaches the kubelet at NodeIP. docs/node.md#network.
func (l nodeLayout) network() error {
	out, err := exec.Command("ip", "-o", "addr", "show", "to", l.HostIP+"/30").Output()
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("%s/30 is already in use on this machine: %s", l.HostIP, strings.TrimSpace(string(out)))
	}
	ns := []string{"-n", l.NetNS}
	steps := [][]string{
		{"netns", "add", l.NetNS},
		{"link", "add", l.HostIf, "type", "veth", "peer", "name", l.NodeIf, "netns", l.NetNS},
		{"addr", "add", l.HostIP + "/30", "dev", l.HostIf},
		{"link", "set", l.HostIf, "up"},
		append(ns, "addr", "add", l.NodeIP+"/30", "dev", l.NodeIf),
		append(ns, "link", "set", l.NodeIf, "up"),
		append(ns, "link", "set", "lo", "up"),
		append(ns, "addr", "add", serviceIP+"/32", "dev", "lo"),
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the v2
// one beside them) under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return dirs
}

// cgroups creates kubelet's cgroup root in every hierarchy (kubelet wants
// it to exist); a new cpuset group starts with no CPUs or memory nodes, so
// it gets its parent's.
func (l nodeLayout) cgroups() error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, l.CgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		if filepath.Base(h) != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
				return fmt.Errorf("cgroup %s/%s: %w", d, f, err)
			}
		}
	}
	return nil
}

// inNode runs a program inside the node's network namespace only: the
// mount namespace stays the host's, so that the mounts kubelet, the CSI
// driver and containerd make are the same mounts for all three (ip netns
// exec would give each its own).
func (c *Cluster) inNode(l nodeLayout, name string, env []string, bin string, args ...string) error {
	return c.runEnv(name, env, "nsenter", append([]string{"--net=" + l.nsPath(), bin}, args...)...)
}

func (c *Cluster) startContainerd(ctx context.Context, l nodeLayout, nb *NodeBinaries) error {
	cfg := l.path("containerd.toml")
	if err := os.WriteFile(cfg, []byte(containerdConfig(l, nb)), 0o600); err != nil {
		return err
	}
	cni := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"pvcj","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}},{"type":"loopback"}]}`,
		l.path("cni", "ipam"), podSubnet)
	if err := os.WriteFile(l.path("cni", "net.d", "10-pvcj.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}
	env := []string{"PATH=" + nb.ContainerdDir + ":" + os.Getenv("PATH")}
	if err := c.inNode(l, "containerd", env, filepath.Join(nb.ContainerdDir, "containerd"), "--config", cfg); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := exec.CommandContext(ctx, filepath.Join(nb.ContainerdDir, "ctr"), "-a", l.containerdSock(), "version").Run()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s within 30s: %w", l.containerdSock(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// containerdConfig: CRI with runc (cgroupfs), the CNI bridge, the pause
// image pinned (it is imported, never pulled), every path in the node's
// folder (no NRI socket in /var/run, no /opt/containerd), so that two
// nodes on one machine share nothing. restrict_oom_score_adj:
// this machine's root lacks CAP_SYS_RESOURCE, so runc may not lower a
// sandbox's oom_score_adj below containerd's own (docs/node.md).
func containerdConfig(l nodeLayout, nb *NodeBinaries) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = %[8]q
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[4]q
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[5]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q
`, l.path("containerd", "root"), l.path("containerd", "state"), l.containerdSock(), PauseImage,
		nb.Runc, nb.CNIDir, l.path("cni", "net.d"), l.path("containerd", "opt"))
}

// importImages builds the three images with scripts/image (the janitor's
// by scripts/image/build.sh, exactly as make image does) and imports them
// into containerd's k8s.io namespace.
func (c *Cluster) importImages(ctx context.Context, root string, l nodeLayout, nb *NodeBinaries) error {
	janitor := l.path("images", "janitor.oci.tar")
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "image", "build.sh"),
		"--version", JanitorImageTag, "--out", janitor)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make image: %w: %s", err, out)
	}
	archives := []string{janitor}
	for name, ref := range map[string]string{"pause": PauseImage, "workspace": WorkspaceImage} {
		bin := filepath.Join(c.Dir, "bin", name)
		if err := goBuild(root, bin, "./test/cmd/"+name); err != nil {
			return err
		}
		out := l.path("images", name+".oci.tar")
		cmd := exec.CommandContext(ctx, "go", "-C", filepath.Join(root, "scripts", "image"), "run", ".", "build",
			"-name", name, "-binary", bin, "-ref", ref, "-out", out)
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("image %s: %w: %s", name, err, b)
		}
		archives = append(archives, out)
	}
	for _, a := range archives {
		out, err := exec.CommandContext(ctx, filepath.Join(nb.ContainerdDir, "ctr"), "-a", l.containerdSock(),
			"-n", "k8s.io", "images", "import", a).CombinedOutput()
		if err != nil {
			return fmt.Errorf("import %s: %w: %s", a, err, out)
		}
	}
	return nil
}

// startKubelet writes kubelet's configuration and starts it in the node's
// namespace, talking to the API server through the relay on the
// namespace's loopback.
func (c *Cluster) startKubelet(l nodeLayout, nb *NodeBinaries, p *pki) error {
	kubeconfig := l.path("kubelet.kubeconfig")
	if err := writeKubeconfig(kubeconfig, "https://127.0.0.1:6443", p); err != nil {
		return err
	}
	cfg := l.path("kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(kubeletConfig(l)), 0o600); err != nil {
		return err
	}
	return c.inNode(l, "kubelet", nil, nb.Kubelet, "--config="+cfg, "--kubeconfig="+kubeconfig,
		"--root-dir="+l.path("kubelet"), "--cert-dir="+l.path("kubelet", "pki"),
		"--hostname-override="+NodeName, "--node-ip="+l.NodeIP, "--v=1")
}

// kubeletConfig: cgroup v1 allowed (this machine has no pure cgroup v2),
// anonymous read access for the API server's log requests (only the API
// server can reach NodeIP), no eviction on a nearly full disk, no cluster
// DNS (pods use the Service IP, never a name).
func kubeletConfig(l nodeLayout) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
address: %s
port: 10250
readOnlyPort: 0
healthzPort: 0
podLogsDir: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
enableControllerAttachDetach: false
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
localStorageCapacityIsolation: false
`, l.CgroupRoot, l.containerdSock(), l.NodeIP, l.path("pod-logs"))
}

// createCSIDriver tells kubelet how to treat the driver's volumes: no
// attach step (there is no external-attacher), fsGroup applied to every
// volume (a pod's non-root user can write its claim).
func createCSIDriver(ctx context.Context, c *Cluster) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	no, file := false, storagev1.FileFSGroupPolicy
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: DriverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: &no, PodInfoOnMount: &no, FSGroupPolicy: &file,
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}}}
	if _, err := cs.StorageV1().CSIDrivers().Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CSIDriver %s: %w", DriverName, err)
	}
	return nil
}

// waitNodeReady waits (at most 2 minutes) for the node to be Ready with the
// driver registered on it.
func waitNodeReady(ctx context.Context, c *Cluster) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	why := "node not registered"
	for {
		if n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{}); err == nil {
			why = "node not Ready"
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					why = "node still tainted " + taints(n)
					if len(n.Spec.Taints) > 0 {
						break
					}
					why = "CSI driver not registered with kubelet"
					if csiNodeHasDriver(ctx, cs) {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %s after 2m", NodeName, why)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func taints(n *corev1.Node) string {
	var s []string
	for _, t := range n.Spec.Taints {
		s = append(s, t.ToString())
	}
	return strings.Join(s, ", ")
}

func csiNodeHasDriver(ctx context.Context, cs kubernetes.Interface) bool {
	n, err := cs.StorageV1().CSINodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, d := range n.Spec.Drivers {
		if d.Name == DriverName {
			return true
		}
	}
	return false
}

// teardown removes everything of the node that outlives its processes,
// after they were stopped: the containers (their processes, then the
// shims), the mounts under the node's folder, the cgroups, the network
// namespace and the folder. It is idempotent: a node that never started
// has nothing to remove.
func (l nodeLayout) teardown(progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	var errs []error
	if n := l.killContainers(); n > 0 {
		fmt.Fprintf(progress, "node: killed %d container processes\n", n)
	}
	if n := killMatching("-address " + l.containerdSock()); n > 0 {
		fmt.Fprintf(progress, "node: killed %d containerd shims\n", n)
	}
	if err := unmountUnder(l.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := l.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(l.nsPath()); err == nil {
		if out, err := exec.Command("ip", "netns", "del", l.NetNS).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", l.NetNS, err, out))
		}
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// killContainers kills every process in the node's cgroups (the pids
// hierarchy lists them all), until none is left or 10 s have passed.
func (l nodeLayout) killContainers() int {
	killed := 0
	for i := 0; i < 100; i++ {
		pids := cgroupPIDs(filepath.Join("/sys/fs/cgroup/pids", l.CgroupRoot))
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil && i == 0 {
				killed++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return killed
}

func cgroupPIDs(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killMatching kills the processes whose command line contains s.
func killMatching(s string) int {
	n := 0
	for _, pid := range processesNaming(s) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// processesNaming lists the processes (but this one) whose command line
// contains s.
func processesNaming(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	all, err := csidriver.MountPoints()
	if err != nil {
		return err
	}
	var mounts []string
	for _, mp := range all {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the node's cgroup tree in every hierarchy,
// deepest first (a cgroup folder is removed with rmdir, once empty).
func (l nodeLayout) removeCgroups() error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, l.CgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
