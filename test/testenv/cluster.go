//go:build integration

// Package testenv runs the project's local Kubernetes control plane: etcd,
// kube-apiserver, kube-controller-manager, the VolumeSnapshot CRDs,
// snapshot-controller, csi-snapshotter, csi-provisioner and the project's own
// CSI driver (test/csidriver). Tests, `make cluster-up`, `make demo` and the
// benchmarks all start the same stack through this package, so that what the
// janitor is tested against is real Kubernetes behaviour, not a fake.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DriverName is the CSI driver name of the project's test driver.
const DriverName = "hostpath.pvc-janitor.io"

// Controllers are the kube-controller-manager controllers the stack runs. The
// workload controllers (deployment, statefulset, job, …) are left out on
// purpose: fixtures create workloads only for their pod templates, and pods
// appearing on their own would make tests nondeterministic.
var Controllers = []string{
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
	"garbage-collector-controller",
	"ephemeral-volume-controller",
	"serviceaccount-controller",
	"namespace-controller",
	"root-ca-certificate-publisher-controller",
}

// Options configure a cluster.
type Options struct {
	// Dir is the cluster folder: keys, etcd data, logs, the kubeconfig.
	Dir string
	// Detach starts the components in their own sessions so that they
	// outlive this process (make cluster-up); Stop is then done by PID.
	Detach bool
	// Minimal starts only etcd and kube-apiserver, with the snapshot CRDs
	// and classes but no controllers (benchmarks seed status themselves).
	Minimal bool
	// Progress receives one line per step; nil discards.
	Progress io.Writer
	// FeatureGates, when set, is passed as --feature-gates to kube-apiserver
	// and kube-controller-manager, e.g.
	// "PersistentVolumeClaimUnusedSinceTime=false" for a control plane that
	// does not maintain the Unused condition. It is recorded in the cluster
	// folder (see RecordedFeatureGates) so that a running cluster is never
	// reused with other gates.
	FeatureGates string
	// Node adds the opt-in node (node.go, docs/node.md): kubelet,
	// containerd, runc, CNI, kube-scheduler and the job and cronjob
	// controllers, so that pods run. Needs root.
	Node bool
	// StorageDir, when set, is the CSI driver's state folder (its volumes
	// and snapshots, with their bytes) outside the cluster folder: it
	// outlives the cluster (StopDir removes only the link to it), and a
	// later cluster started on the same folder sees the same storage, as
	// a cloud's disks outlive a cluster. One cluster at a time may run on
	// it (test/csidriver: one driver owns a state folder).
	StorageDir string
}

// StorageEnv is the environment variable that `make cluster-up` reads for
// Options.StorageDir.
const StorageEnv = "JANITOR_CLUSTER_STORAGE"

// FeatureGatesEnv is the environment variable that `make cluster-up` and
// RunMain read for Options.FeatureGates.
const FeatureGatesEnv = "JANITOR_CLUSTER_FEATURE_GATES"

// UnusedSinceGate is the feature gate of KEP-5541 (beta and on by default in
// Kubernetes v1.37) under which kube-controller-manager maintains the
// Unused condition of PersistentVolumeClaims.
const UnusedSinceGate = "PersistentVolumeClaimUnusedSinceTime"

// FeatureGatesFromEnv returns $JANITOR_CLUSTER_FEATURE_GATES, trimmed.
func FeatureGatesFromEnv() string { return strings.TrimSpace(os.Getenv(FeatureGatesEnv)) }

// Cluster is a running local control plane.
type Cluster struct {
	Dir        string
	Kubeconfig string
	Config     *rest.Config
	Bin        *Binaries
	// DriverStateDir is the CSI driver's state folder; test/csidriver's
	// SetFault writes fault files there, and the volumes' files live there
	// (Fixtures.WriteVolume, ReadVolume).
	DriverStateDir string
	// FeatureGates are the --feature-gates the control plane runs with
	// ("" for the defaults).
	FeatureGates string
	// KubeVersion is the Kubernetes version of its binaries (v1.37.2).
	KubeVersion string

	opts  Options
	mu    sync.Mutex
	procs []*proc
	node  *nodeLayout
}

type proc struct {
	name string
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
}

// Start brings the stack up and returns once every component is serving:
// the API server is ready, the CRDs are established, the controller manager
// has created the default ServiceAccount and the snapshot classes exist. On
// error, whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	if opts.Dir, err = filepath.Abs(opts.Dir); err != nil {
		return nil, err
	}
	opts.FeatureGates = strings.TrimSpace(opts.FeatureGates)
	c = &Cluster{Dir: opts.Dir, opts: opts, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig"),
		DriverStateDir: filepath.Join(opts.Dir, "csi-state"), FeatureGates: opts.FeatureGates}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	for _, d := range []string{"logs", "pki", "bin", "etcd"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o700); err != nil {
			return c, err
		}
	}
	if err := storageFolder(c.DriverStateDir, opts.StorageDir); err != nil {
		return c, err
	}
	// Written before anything starts: a folder whose etcd holds state made
	// under some gates always says which.
	if err := os.WriteFile(featureGatesFile(opts.Dir), []byte(opts.FeatureGates+"\n"), 0o600); err != nil {
		return c, err
	}
	var gateFlags []string
	if opts.FeatureGates != "" {
		gateFlags = []string{"--feature-gates=" + opts.FeatureGates}
	}
	start := time.Now()
	step := func(format string, a ...any) {
		fmt.Fprintf(opts.Progress, "[cluster %5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	if c.Bin, err = FindBinaries(root, filepath.Join(opts.Dir, "bin", "hostpath-csi")); err != nil {
		return c, err
	}
	c.KubeVersion = c.Bin.KubeVersion
	if err := os.WriteFile(kubeVersionFile(opts.Dir), []byte(c.KubeVersion+"\n"), 0o600); err != nil {
		return c, err
	}
	step("Kubernetes %s (%s)", c.KubeVersion, unusedNote(c.UnusedCondition()))
	p, err := writePKI(filepath.Join(opts.Dir, "pki"))
	if err != nil {
		return c, fmt.Errorf("generate certificates: %w", err)
	}
	ports, release, err := freePorts(3)
	if err != nil {
		return c, err
	}
	defer release() // on every return; the ports are bound once the server is ready
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := c.run("etcd", c.Bin.Etcd,
		"--name=default", "--data-dir="+filepath.Join(opts.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// A throwaway cluster: durability is not worth the fsyncs.
		"--unsafe-no-fsync", "--quota-backend-bytes=8589934592", "--log-level=warn"); err != nil {
		return c, err
	}
	step("etcd started on %s", etcdURL)
	server := fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	if err := c.run("kube-apiserver", c.Bin.APIServer, append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--tls-cert-file=" + p.ServingCert, "--tls-private-key-file=" + p.ServingKey,
		"--client-ca-file=" + p.CAFile,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// There is no Service network to reconcile: envtest does the same.
		"--endpoint-reconciler-type=none",
		// The opt-in node's kubelet is reached at its InternalIP, an
		// address in the node's namespace; never by its name (no DNS).
		"--kubelet-preferred-address-types=InternalIP",
		"--cert-dir=" + filepath.Join(opts.Dir, "pki", "apiserver-generated"),
		"--v=1"}, gateFlags...)...); err != nil {
		return c, err
	}
	if err := writeKubeconfig(c.Kubeconfig, server, p); err != nil {
		return c, err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return c, err
	}
	c.Config.QPS, c.Config.Burst = 500, 1000
	if err := c.waitReady(ctx); err != nil {
		return c, err
	}
	step("kube-apiserver ready at %s", server)
	release()
	if opts.Minimal {
		// The APIs (snapshot CRDs, classes) without the controllers.
		if err := applyCRDs(ctx, c.Config, c.Bin.CRDDir); err != nil {
			return c, err
		}
		if err := createStorageObjects(ctx, c.Config); err != nil {
			return c, err
		}
		step("snapshot CRDs established; minimal stack ready (no controllers)")
		return c, c.writePIDs()
	}
	controllers := Controllers
	if opts.Node {
		// With a node, pods run: the chart's CronJob needs its Jobs, and
		// the node lifecycle controller lifts the not-ready taint kubelet
		// registers the node with.
		controllers = append(slices.Clone(Controllers), "job-controller", "cronjob-controller", "node-lifecycle-controller")
		l, err := prepareNode(opts.Dir, opts.Progress)
		if err != nil {
			return c, err
		}
		c.node = &l
	}
	if err := c.run("kube-controller-manager", c.Bin.ControllerManager, append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--root-ca-file=" + p.CAFile,
		"--service-account-private-key-file=" + p.SAKey,
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--v=1"}, append(binderFlags(c.KubeVersion), gateFlags...)...)...); err != nil {
		return c, err
	}
	sock := filepath.Join(opts.Dir, "csi.sock")
	if len(sock) > 100 {
		// Unix socket paths are limited to 108 bytes.
		sock = filepath.Join(os.TempDir(), fmt.Sprintf("pvc-janitor-csi-%d.sock", ports[2]))
	}
	driverArgs := []string{"--endpoint=unix://" + sock, "--state-dir=" + c.DriverStateDir, "--driver-name=" + DriverName}
	if c.node != nil {
		driverArgs = append(driverArgs, "--node-id="+NodeName, "--registration-socket="+c.node.registrationSocket())
	}
	if err := c.run("hostpath-csi", c.Bin.Driver, driverArgs...); err != nil {
		return c, err
	}
	if err := applyCRDs(ctx, c.Config, c.Bin.CRDDir); err != nil {
		return c, err
	}
	step("snapshot CRDs established")
	// The VolumeGroupSnapshot gate is off, as it was by default up to v8.5:
	// from v8.6 on it is on by default, and without the group snapshot CRDs
	// (which the stack does not install) snapshot-controller waits 30 s
	// (--retry-crd-interval-max) for them before it starts its controller.
	snapFlags := []string{"--kubeconfig=" + c.Kubeconfig, "--leader-election=false",
		"--kube-api-qps=200", "--kube-api-burst=400",
		"--retry-interval-start=500ms", "--retry-interval-max=5s",
		"--feature-gates=CSIVolumeGroupSnapshot=false", "--v=2"}
	if err := c.run("snapshot-controller", c.Bin.SnapshotController, snapFlags...); err != nil {
		return c, err
	}
	if err := c.run("csi-snapshotter", c.Bin.CSISnapshotter,
		append(snapFlags, "--csi-address="+sock, "--timeout=30s", "--http-endpoint=", "--metrics-address=")...); err != nil {
		return c, err
	}
	// external-provisioner: a pending claim of a class whose provisioner is
	// the driver gets a volume from CreateVolume, restored from a
	// VolumeSnapshot when the claim's dataSourceRef names one. That is
	// ProvisionedStorageClassName, and also StorageClassName for a claim
	// that is not pre-bound (a generic ephemeral volume's claim); the
	// pre-bound claims of Fixtures.BoundClaim are never provisioned.
	if err := c.run("csi-provisioner", c.Bin.CSIProvisioner, "--kubeconfig="+c.Kubeconfig, "--leader-election=false",
		"--csi-address="+sock, "--timeout=30s", "--kube-api-qps=200", "--kube-api-burst=400",
		"--retry-interval-start=500ms", "--retry-interval-max=5s", "--http-endpoint=", "--metrics-address=", "--v=2"); err != nil {
		return c, err
	}
	if err := createStorageObjects(ctx, c.Config); err != nil {
		return c, err
	}
	if err := waitDefaultServiceAccount(ctx, c.Config); err != nil {
		return c, err
	}
	if c.node != nil {
		if err := c.startNode(ctx, *c.node, server, p, step); err != nil {
			return c, err
		}
	}
	step("controller manager, snapshot-controller, csi-snapshotter %s, csi-provisioner and driver up; stack ready", c.Bin.SnapshotterVersion)
	return c, c.writePIDs()
}

// storageFolder makes the driver's state folder: a folder of the cluster,
// or a link to storage (Options.StorageDir), made if missing, so that every
// reader of <cluster>/csi-state finds the storage.
func storageFolder(state, storage string) error {
	if storage == "" {
		return os.MkdirAll(state, 0o700)
	}
	abs, err := filepath.Abs(storage)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return fmt.Errorf("storage folder: %w", err)
	}
	if err := os.Remove(state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("storage folder: %s is in the way: %w", state, err)
	}
	return os.Symlink(abs, state)
}

// run starts one component with its output in logs/<name>.log.
func (c *Cluster) run(name, bin string, args ...string) error {
	return c.runEnv(name, nil, bin, args...)
}

// runEnv is run with env added to the component's environment.
func (c *Cluster) runEnv(name string, env []string, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.Dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if c.opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// Pdeathsig kills the component if the test binary dies without
		// running Stop (a panic, a SIGKILL from go test -timeout).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pr := &proc{name: name, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(pr.done) }()
	c.mu.Lock()
	c.procs = append(c.procs, pr)
	c.mu.Unlock()
	return nil
}

// Stop stops the components in reverse order (the API server takes ~25 s to
// exit when etcd goes first) and waits for each to exit.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := stopPID(procs[i].pid, procs[i].done); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", procs[i].name, err))
		}
	}
	if c.node != nil {
		if err := c.node.teardown(io.Discard); err != nil {
			errs = append(errs, fmt.Errorf("node: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stopPID sends SIGTERM, then SIGKILL after 10 s. done, when non-nil, closes
// when the process has been reaped; otherwise liveness is polled.
func stopPID(pid int, done <-chan struct{}) error {
	alive := func() bool {
		if done != nil {
			select {
			case <-done:
				return false
			default:
				return true
			}
		}
		return syscall.Kill(pid, 0) == nil && !isZombie(pid)
	}
	if !alive() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(10 * time.Second)
	for alive() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; alive() && i < 100; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if alive() {
		return fmt.Errorf("pid %d did not exit", pid)
	}
	return nil
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

// UnusedCondition reports whether this control plane's controller manager
// maintains the Unused condition of claims (KEP-5541).
func (c *Cluster) UnusedCondition() bool {
	return UnusedConditionEnabled(c.KubeVersion, c.FeatureGates)
}

// binderFlags are kube-controller-manager flags by version. Before v1.37
// the PV binder finishes a pre-bound pair (a PV whose claimRef names the
// claim, a claim whose volumeName names the PV) only at its periodic resync,
// every 15 s by default, so a fixture's claim took up to 30 s to be Bound;
// the test stack resyncs every second there. (Not on v1.37, whose binder
// does not wait for it, and where benchmarks run with 100k claims.)
func binderFlags(version string) []string {
	if m := Minor(version); m != 0 && m < 37 {
		return []string{"--pvclaimbinder-sync-period=1s"}
	}
	return nil
}

func unusedNote(on bool) string {
	if on {
		return "the Unused condition is maintained"
	}
	return "no Unused condition"
}

func featureGatesFile(dir string) string { return filepath.Join(dir, "feature-gates") }

// RecordedFeatureGates returns the --feature-gates a cluster folder was
// started with ("" for the defaults); ok is false when the folder records
// none (no cluster was ever started in it).
func RecordedFeatureGates(dir string) (gates string, ok bool) {
	return readRecord(featureGatesFile(dir))
}

// pidFile lists "name pid" per line, in start order.
func (c *Cluster) pidFile() string { return filepath.Join(c.Dir, "pids") }

func (c *Cluster) writePIDs() error {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "%s %d\n", p.name, p.pid)
	}
	return os.WriteFile(c.pidFile(), []byte(b.String()), 0o600)
}

// StopDir stops a detached cluster by the PIDs recorded in its folder, in
// reverse start order, then removes the folder. A folder without a pid file
// is simply removed.
func StopDir(dir string, progress io.Writer) error {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var errs []error
	for i := len(lines) - 1; i >= 0; i-- {
		name, pidStr, ok := strings.Cut(lines[i], " ")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil {
			continue
		}
		if !isOurs(pid, dir) {
			continue // the PID was reused by something else: never kill it
		}
		if progress != nil {
			fmt.Fprintf(progress, "stopping %s (pid %d)\n", name, pid)
		}
		if err := stopPID(pid, nil); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if _, err := os.Stat(nodeMarker(dir)); err == nil {
		if err := layoutFor(dir).teardown(progress); err != nil {
			return fmt.Errorf("node: %w", err)
		}
	}
	return os.RemoveAll(dir)
}

// isOurs checks that pid still runs in the cluster folder (the components'
// working directory), so that a stale pid file never kills a stranger.
func isOurs(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	abs, _ := filepath.Abs(dir)
	return cwd == abs
}

// Running reports whether a detached cluster in dir is up: every recorded
// process is alive and the API server answers /readyz.
func Running(ctx context.Context, dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		_, pidStr, _ := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || !isOurs(pid, dir) || isZombie(pid) {
			return false
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return readyz(ctx, cfg) == nil
}

// freePorts returns n distinct ports for the control plane's listeners,
// each reserved until release is called (once etcd and kube-apiserver have
// bound them). They are closed again before those bind them, so they are
// taken below the kernel's ephemeral range (ip_local_port_range, from 32768
// by default): a port another process asks the kernel for (a listen on
// port 0, the source port of an outgoing connection) is never one of them.
// Control planes starting at once (other test packages, a second make
// test) pick at random among the ports from 20000 up to that range, each
// checked free by binding it, and each held by an exclusive lock on a file
// named after it (reservePort) until release: two stacks never pick the
// same port between one closing its check and its component binding it.
func freePorts(n int) (ports []int, release func(), err error) {
	low := ephemeralLow()
	if low-portsFrom < 100*n {
		ports, err := kernelPorts(n) // an unusual range: the kernel's choice
		return ports, func() {}, err
	}
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close() // drops the lock
		}
		held = nil
	}
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			release()
			return nil, nil, fmt.Errorf("no %d free ports in %d-%d", n, portsFrom, low-1)
		}
		port := portsFrom + rand.IntN(low-portsFrom)
		if slices.Contains(ports, port) {
			continue
		}
		f, ok := reservePort(port)
		if !ok {
			continue // another stack is starting on it
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close()
			continue // taken
		}
		l.Close()
		held = append(held, f)
		ports = append(ports, port)
	}
	return ports, release, nil
}

// reservePort takes an exclusive, non-blocking lock on a file named after
// port in the host's temporary directory; the lock goes with the file's
// last descriptor (and with the process). It reports false when another
// process holds it.
func reservePort(port int) (*os.File, bool) {
	dir := filepath.Join(os.TempDir(), "pvc-janitor-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// portsFrom is the lowest port freePorts picks: above the well-known
// Kubernetes ports (10250-10259 and the like) a host may be serving.
const portsFrom = 20000

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// kernelPorts asks the kernel for n free ports (port 0).
func kernelPorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeKubeconfig(path, server string, p *pki) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: p.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: p.adminPEM, ClientKeyData: p.adminKey}
	cfg.Contexts["pvc-janitor-local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "pvc-janitor-local"
	return clientcmd.WriteToFile(*cfg, path)
}
