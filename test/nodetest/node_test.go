//go:build integration && node

// Package nodetest runs the janitor the way users run it, on the local
// cluster's opt-in node (test/testenv/node.go, docs/node.md): the chart
// installed with the image built from this checkout, a Job created from its
// CronJob, workspace pods that write to their claims through the CSI
// driver, and a restored claim read back by a new pod. make test runs it
// (make node-test); it needs root.
package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/pvc-janitor/pvc-janitor/internal/report"
	"github.com/pvc-janitor/pvc-janitor/test/testenv"
)

var (
	cluster *testenv.Cluster
	kube    kubernetes.Interface
	root    string
	// noNode says why the node cannot start here (not root); every test
	// then skips with it, and make test's summary lists the reason.
	noNode string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Geteuid() != 0 {
		noNode = "the node needs root (mounts, cgroups, network namespaces); running as uid " + fmt.Sprint(os.Geteuid())
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "pvcj-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := testenv.Start(ctx, testenv.Options{Dir: dir, Node: true, Progress: os.Stderr,
		FeatureGates: testenv.FeatureGatesFromEnv()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the node cluster: %v (logs in %s)\n", err, filepath.Join(dir, "logs"))
		if c != nil {
			_ = c.Stop()
		}
		return 1
	}
	cluster = c
	if kube, err = kubernetes.NewForConfig(c.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "cluster folder kept:", dir)
	}
	return code
}

const release = "jan"

// TestCronJobRescuesAndReapsRealWorkspaces is the byte round trip through
// real pods: alice's workspace writes a file and stops, the chart's
// CronJob's Job (the locally built image, the chart's securityContext,
// in-cluster configuration) rescues and reaps her claim, and a restored
// claim mounted by a new pod reads the file back. Bob's workspace still
// runs, and the same Job leaves his claim alone.
func TestCronJobRescuesAndReapsRealWorkspaces(t *testing.T) {
	needNode(t)
	ctx := context.Background()
	ns := namespace(t, "team")
	text := fmt.Sprintf("alice's last work, %d", time.Now().UnixNano())
	for _, who := range []string{"alice", "bob"} {
		claim(t, ns, who)
		startWorkspace(t, ns, who, text)
	}
	// Alice stops: the controller manager sees the pod go (the Unused
	// condition moves by the pod's real lifecycle, when it is maintained).
	stopPod(t, ns, "alice")
	if cluster.UnusedCondition() {
		waitUnused(t, ns, "alice")
	}
	helmInstall(t)

	rep := runJob(t, "run-1")
	checkSecurityContext(t, jobPod(t, "run-1"))
	if want := "https://10.0.0.1:443"; rep.Cluster != want {
		t.Errorf("the Job's report names cluster %q, want %q (in-cluster configuration)", rep.Cluster, want)
	}
	alice, bob := entry(rep, ns, "alice"), entry(rep, ns, "bob")
	if alice == nil || bob == nil {
		t.Fatalf("the report lacks alice or bob: %+v", rep.Claims)
	}
	if bob.State != "InUse" || bob.Action != "" {
		t.Errorf("bob, whose workspace runs: state %s, action %q; want InUse and nothing done", bob.State, bob.Action)
	}
	// Without the Unused condition (before v1.37) the first run only marks
	// the orphan; a rescue not yet ready is reaped by the next run. The
	// next scheduled runs finish it: at most two more here.
	for i := 2; i <= 3 && alice != nil && alice.Action != "deleted"; i++ {
		rep = runJob(t, fmt.Sprintf("run-%d", i))
		alice = entry(rep, ns, "alice")
	}
	if alice == nil || alice.Action != "deleted" {
		t.Fatalf("alice after the CronJob's runs: %+v; want her claim rescued and deleted", alice)
	}
	waitClaimDeleted(t, ns, "alice")
	if c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "bob", metav1.GetOptions{}); err != nil || c.DeletionTimestamp != nil {
		t.Fatalf("bob's claim: %v, deleting %v; want it untouched", err, c != nil && c.DeletionTimestamp != nil)
	}

	// The way back: restore alice's claim and read her file in a new pod.
	waitClaimGone(t, ns, "alice")
	janitor(t, "restore", ns+"/alice", "--restore-timeout", "2m")
	got := readBack(t, ns, "alice")
	if got != text {
		t.Fatalf("the restored claim holds %q, want %q", got, text)
	}
}

// TestHelmTest runs the chart's own test (a read-only scan with the
// release's ServiceAccount) on the node.
func TestHelmTest(t *testing.T) {
	needNode(t)
	helmInstall(t)
	if out, err := helm(t, "test", release, "-n", "pvc-janitor", "--timeout", "3m"); err != nil {
		t.Fatalf("helm test: %v\n%s", err, out)
	} else if !strings.Contains(out, "Phase:          Succeeded") {
		t.Fatalf("helm test did not report success:\n%s", out)
	}
}

// --- helpers -----------------------------------------------------------

func needNode(t *testing.T) {
	t.Helper()
	if noNode != "" {
		t.Skip(noNode)
	}
}

// checkSecurityContext checks the Job's pod as it ran: non-root,
// read-only root filesystem, no capabilities, RuntimeDefault seccomp, the
// locally built image, and Succeeded under them.
func checkSecurityContext(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	psc, c := pod.Spec.SecurityContext, pod.Spec.Containers[0]
	csc := c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Errorf("pod securityContext %+v: want runAsNonRoot", psc)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("pod seccomp %+v: want RuntimeDefault", psc.SeccompProfile)
	case csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem:
		t.Errorf("container securityContext %+v: want readOnlyRootFilesystem", csc)
	case csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" || len(csc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v: want drop ALL, add none", csc.Capabilities)
	case csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation:
		t.Errorf("allowPrivilegeEscalation %v: want false", csc.AllowPrivilegeEscalation)
	}
	if want := testenv.JanitorImageRepository + ":" + testenv.JanitorImageTag; c.Image != want {
		t.Errorf("image %s, want %s", c.Image, want)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("pod %s: phase %s, want Succeeded", pod.Name, pod.Status.Phase)
	}
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

// claim creates a workspace claim (app=ide, workspace=<name>) and waits
// for it to be Bound: a pod created before its claim is bound waits in the
// scheduler's backoff.
func claim(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	sc := testenv.ProvisionedStorageClassName
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "ide", "workspace": name}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "claim "+name+" Bound", func() (bool, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
}

// workspacePod is testenv.WorkspacePod of the workspace image.
func workspacePod(ns, name, claim string, args ...string) *corev1.Pod {
	return testenv.WorkspacePod(ns, name, claim, testenv.WorkspaceImage, args...)
}

// startWorkspace runs the workspace's pod, which writes text to
// /data/notes.md on the claim and stays up; it returns once the pod said so.
func startWorkspace(t *testing.T, ns, name, text string) {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, workspacePod(ns, name, name, "write", "/data/notes.md", text), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "workspace "+name+" wrote its file", func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, final{fmt.Errorf("workspace pod failed: %s", podLog(ctx, ns, name))}
		}
		return p.Status.Phase == corev1.PodRunning && strings.Contains(podLog(ctx, ns, name), "wrote /data/notes.md"), nil
	})
}

func stopPod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if err := kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "pod "+name+" gone", func() (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func waitUnused(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, 2*time.Minute, "claim "+name+" Unused=True", func() (bool, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Unused" && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func waitClaimDeleted(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, time.Minute, "claim "+name+" deleted", func() (bool, error) {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && c.DeletionTimestamp != nil, nil
	})
}

// waitClaimGone waits for the deleted claim to go: the snapshot
// controller holds a claim being snapshotted with its
// pvc-as-source-protection finalizer for a while.
func waitClaimGone(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, 2*time.Minute, "claim "+name+" gone", func() (bool, error) {
		_, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// readBack mounts the claim in a new pod that prints /data/notes.md.
func readBack(t *testing.T, ns, claim string) string {
	t.Helper()
	ctx := context.Background()
	name := claim + "-read"
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, workspacePod(ns, name, claim, "cat", "/data/notes.md"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, "pod "+name+" Succeeded", func() (bool, error) {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, final{fmt.Errorf("pod %s failed: %s", name, podLog(ctx, ns, name))}
		}
		return p.Status.Phase == corev1.PodSucceeded, nil
	})
	return podLog(ctx, ns, name)
}

// podLog is the pod's log, read the way kubectl logs reads it: from the
// API server, which asks the kubelet.
func podLog(ctx context.Context, ns, name string) string {
	b, err := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "(log: " + err.Error() + ")"
	}
	return string(b)
}

// final is an error after which waiting is pointless (a pod failed).
type final struct{ error }

func waitFor(t *testing.T, timeout time.Duration, what string, done func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := done()
		if ok {
			return
		}
		if f, isFinal := err.(final); isFinal {
			t.Fatalf("%s: %v", what, f.error)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v; logs in %s)", what, timeout, last, filepath.Join(cluster.Dir, "logs"))
}

func helmInstall(t *testing.T) {
	t.Helper()
	if _, err := helm(t, "status", release, "-n", "pvc-janitor"); err == nil {
		return
	}
	out, err := helm(t, "install", release, filepath.Join(root, "charts", "pvc-janitor"), "-n", "pvc-janitor", "--create-namespace",
		"--set", "image.repository="+testenv.JanitorImageRepository, "--set", "image.tag="+testenv.JanitorImageTag,
		"--set", "image.pullPolicy=Never", "--set", "dryRun=false",
		// Runs come only from the test's Jobs: a scheduled one at :00 or
		// :30 would hold the Lease while the test's runs.
		"--set", "suspend=true",
		"--set", "config.selector=app=ide", "--set", "config.workspace-label=workspace",
		"--set", "config.min-age=0s", "--set", "config.grace-period=0s",
		// Two claims in scope, one to reap: 50% of the scope.
		"--set", "config.max-deletion-percent=100")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
}

// helmPath is the pinned Helm, built into the cache on first use.
var helmPath string

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if helmPath == "" {
		out, err := exec.Command("bash", filepath.Join(root, "scripts", "chart", "build-helm.sh")).Output()
		if err != nil {
			t.Fatalf("build helm: %v", err)
		}
		helmPath = strings.TrimSpace(string(out))
	}
	cmd := exec.Command(helmPath, args...)
	home := filepath.Join(cluster.Dir, "helm")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "KUBECONFIG=" + cluster.Kubeconfig,
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data")}
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// runJob creates a Job from the chart's CronJob the way an operator does
// (kubectl create job --from=cronjob/…), waits for it to complete, and
// returns the report its pod logged.
func runJob(t *testing.T, name string) *report.Report {
	t.Helper()
	ctx := context.Background()
	kubectl(t, "-n", "pvc-janitor", "create", "job", name, "--from=cronjob/"+release+"-pvc-janitor")
	waitFor(t, 3*time.Minute, "Job "+name+" complete", func() (bool, error) {
		j, err := kube.BatchV1().Jobs("pvc-janitor").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case "Complete":
				return true, nil
			case "Failed":
				return false, final{fmt.Errorf("job failed: %s; log:\n%s", c.Message, podLog(ctx, "pvc-janitor", jobPodName(ctx, name)))}
			}
		}
		return false, nil
	})
	log := podLog(ctx, "pvc-janitor", jobPod(t, name).Name)
	return parseReport(t, log)
}

// jobPods lists a Job's pods, the last created last.
func jobPods(ctx context.Context, job string) ([]corev1.Pod, error) {
	pods, err := kube.CoreV1().Pods("pvc-janitor").List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
	if err != nil {
		return nil, err
	}
	return pods.Items, nil
}

func jobPodName(ctx context.Context, job string) string {
	pods, err := jobPods(ctx, job)
	if err != nil || len(pods) == 0 {
		return ""
	}
	return pods[len(pods)-1].Name
}

func jobPod(t *testing.T, job string) *corev1.Pod {
	t.Helper()
	pods, err := jobPods(context.Background(), job)
	if err != nil {
		t.Fatalf("pods of Job %s: %v", job, err)
	}
	if len(pods) != 1 {
		t.Fatalf("Job %s has %d pods, want 1 (a retried run)", job, len(pods))
	}
	return &pods[0]
}

// parseReport finds the run's report in the pod's log: the log lines
// (zerolog, one JSON object per line) come first, then the report, an
// indented JSON document.
func parseReport(t *testing.T, log string) *report.Report {
	t.Helper()
	i := strings.Index(log, "{\n")
	if i < 0 {
		t.Fatalf("no report in the Job's log:\n%s", log)
	}
	var r report.Report
	if err := json.NewDecoder(strings.NewReader(log[i:])).Decode(&r); err != nil {
		t.Fatalf("the Job's report: %v\n%s", err, log)
	}
	return &r
}

func entry(r *report.Report, ns, name string) *report.ClaimEntry {
	for _, c := range r.Claims {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(cluster.Bin.Kubectl, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// janitor runs this checkout's janitor on the host against the cluster.
func janitor(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(cluster.Dir, "bin", "janitor")
	if _, err := os.Stat(bin); err != nil {
		build := exec.Command("go", "build", "-o", bin, "./cmd/janitor")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build janitor: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, append(args, "--kubeconfig", cluster.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("janitor %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
