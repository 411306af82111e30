package platforms_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/config"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/kube/wire"
	"github.com/pvc-janitor/pvc-janitor/internal/mark"
	"github.com/pvc-janitor/pvc-janitor/internal/reap"
	"github.com/pvc-janitor/pvc-janitor/internal/rescue"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
	"github.com/pvc-janitor/pvc-janitor/internal/retention"
)

// The world is a cluster as the janitor reads it, without a cluster: the
// platforms' own objects (examples/platforms/<platform>/*.yaml), what the
// API server adds to them (UIDs, creation times, Bound), and the janitor's
// steps as its commands take them, each through the project's own pure
// decisions:
//
//   - the read: kube.Claim and kube.Snapshot reduce claims and snapshots,
//     wire.WalkPod reduces pods (from their protobuf bytes, as the scan
//     does), pod templates and owners as kube's reader records them;
//   - scan: classify.Classify, and the marks through mark.Patch;
//   - snapshot: rescue.Targets, a rescue shaped as the rescuer makes it
//     (rescue.Name, restore.NewTemplate), made intact at once;
//   - reap: classify.Classify again, reap.Reapable;
//   - prune: retention.Decide, with the claims as prune lists them;
//   - restore: restore.Plan, with the claims as restore classifies them;
//   - the judge: classify.BuildLineage and Lineage.HeldBy.
//
// The clock is the test's: every step happens at w.now, which only moves
// forward.
type world struct {
	t   *testing.T
	cfg *config.Config
	now time.Time

	claims   []*corev1.PersistentVolumeClaim
	pods     []*corev1.Pod
	deploys  []*appsv1.Deployment
	snaps    []*snapv1.VolumeSnapshot
	contents map[string]inventory.Content
	// owners are the live objects of kinds the janitor does not list (a
	// DevWorkspace): the scan fetches such an owner by its metadata.
	owners map[types.UID]string
	seq    int
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func newWorld(t *testing.T, configFile string) *world {
	t.Helper()
	return &world{t: t, cfg: loadConfig(t, configFile), now: t0,
		contents: map[string]inventory.Content{}, owners: map[types.UID]string{}}
}

// platformFile is a file of examples/platforms.
func platformFile(t testing.TB, parts ...string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Join(append([]string{filepath.Dir(self), "..", "..", "examples", "platforms"}, parts...)...)
}

// loadConfig loads a platform's janitor configuration with the janitor's
// own loader, as `janitor scan --config FILE` would.
func loadConfig(t *testing.T, file string) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
	config.Register(fs)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fs, config.CommandRun, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("janitor run --config %s: %v", file, err)
	}
	return cfg
}

// objects are the documents of a platform's YAML file, by kind.
type objects struct {
	claims  []*corev1.PersistentVolumeClaim
	pods    []*corev1.Pod
	deploys []*appsv1.Deployment
	snaps   []*snapv1.VolumeSnapshot
	other   []*unstructured.Unstructured
}

func loadObjects(t *testing.T, file string) objects {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out objects
	for _, doc := range strings.Split(string(data), "\n---\n") {
		js, err := sigsyaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var head struct{ Kind string }
		if err := json.Unmarshal(js, &head); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		decode := func(into any) {
			dec := json.NewDecoder(strings.NewReader(string(js)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(into); err != nil {
				t.Fatalf("%s: %s: %v", file, head.Kind, err)
			}
		}
		switch head.Kind {
		case "":
			continue // a document of comments only
		case "PersistentVolumeClaim":
			var o corev1.PersistentVolumeClaim
			decode(&o)
			out.claims = append(out.claims, &o)
		case "Pod":
			var o corev1.Pod
			decode(&o)
			out.pods = append(out.pods, &o)
		case "Deployment":
			var o appsv1.Deployment
			decode(&o)
			out.deploys = append(out.deploys, &o)
		case "VolumeSnapshot":
			var o snapv1.VolumeSnapshot
			decode(&o)
			out.snaps = append(out.snaps, &o)
		default:
			var o unstructured.Unstructured
			if err := o.UnmarshalJSON(js); err != nil {
				t.Fatalf("%s: %s: %v", file, head.Kind, err)
			}
			out.other = append(out.other, &o)
		}
	}
	return out
}

func (o objects) claim(t *testing.T, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	for _, c := range o.claims {
		if c.Name == name {
			return c.DeepCopy()
		}
	}
	t.Fatalf("no claim %s", name)
	return nil
}

func (o objects) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	for _, p := range o.pods {
		if p.Name == name {
			return p.DeepCopy()
		}
	}
	t.Fatalf("no pod %s", name)
	return nil
}

func (o objects) deploy(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range o.deploys {
		if d.Name == name {
			return d.DeepCopy()
		}
	}
	t.Fatalf("no deployment %s", name)
	return nil
}

// --- The API server's part ---------------------------------------------------

func (w *world) advance(d time.Duration) { w.now = w.now.Add(d) }

func (w *world) uid(kind, name string) types.UID {
	w.seq++
	return types.UID(fmt.Sprintf("%s-%s-%d", kind, name, w.seq))
}

// createClaim creates a claim as the API server and a provisioner would:
// a UID, the creation time, Bound to a new volume of the requested size.
func (w *world) createClaim(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	w.t.Helper()
	if w.claim(c.Namespace, c.Name) != nil {
		w.t.Fatalf("claim %s/%s exists", c.Namespace, c.Name)
	}
	c = c.DeepCopy()
	c.UID = w.uid("claim", c.Name)
	c.ResourceVersion = "1"
	c.CreationTimestamp = metav1.NewTime(w.now)
	c.Spec.VolumeName = "pv-" + string(c.UID)
	c.Status.Phase = corev1.ClaimBound
	c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]}
	w.claims = append(w.claims, c)
	return c
}

func (w *world) claim(ns, name string) *corev1.PersistentVolumeClaim {
	for _, c := range w.claims {
		if c.Namespace == ns && c.Name == name {
			return c
		}
	}
	return nil
}

func (w *world) deleteClaim(ns, name string) {
	w.claims = slices.DeleteFunc(w.claims, func(c *corev1.PersistentVolumeClaim) bool { return c.Namespace == ns && c.Name == name })
}

func (w *world) startPod(p *corev1.Pod) {
	p = p.DeepCopy()
	p.UID = w.uid("pod", p.Name)
	p.CreationTimestamp = metav1.NewTime(w.now)
	p.Status.Phase = corev1.PodRunning
	w.pods = append(w.pods, p)
}

func (w *world) deletePod(ns, name string) {
	w.pods = slices.DeleteFunc(w.pods, func(p *corev1.Pod) bool { return p.Namespace == ns && p.Name == name })
}

func (w *world) applyDeployment(d *appsv1.Deployment) {
	d = d.DeepCopy()
	w.deleteDeployment(d.Namespace, d.Name)
	d.UID = w.uid("deployment", d.Name)
	d.CreationTimestamp = metav1.NewTime(w.now)
	w.deploys = append(w.deploys, d)
}

func (w *world) deleteDeployment(ns, name string) {
	w.deploys = slices.DeleteFunc(w.deploys, func(d *appsv1.Deployment) bool { return d.Namespace == ns && d.Name == name })
}

// addSnapshot makes a VolumeSnapshot as the snapshot controller finishes
// it: created now, cut at cut, ready, bound to a content with a handle of
// the source claim's volume and the given deletion policy.
func (w *world) addSnapshot(vs *snapv1.VolumeSnapshot, cut time.Time, policy string) *snapv1.VolumeSnapshot {
	vs = vs.DeepCopy()
	vs.UID = w.uid("snapshot", vs.Name)
	vs.CreationTimestamp = metav1.NewTime(w.now)
	content := "snapcontent-" + string(vs.UID)
	ready := true
	size := resource.MustParse("10Gi")
	source := ""
	if n := vs.Spec.Source.PersistentVolumeClaimName; n != nil {
		if c := w.claim(vs.Namespace, *n); c != nil {
			size = c.Spec.Resources.Requests[corev1.ResourceStorage]
			source = "handle-" + c.Spec.VolumeName
		}
	}
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content,
		CreationTime: &metav1.Time{Time: cut}, ReadyToUse: &ready, RestoreSize: &size}
	w.snaps = append(w.snaps, vs)
	w.contents[content] = inventory.Content{Name: content, DeletionPolicy: policy,
		Snapshot: inventory.Key{Namespace: vs.Namespace, Name: vs.Name}, SnapshotUID: vs.UID, HasHandle: true, SourceVolume: source}
	return vs
}

func (w *world) snapshot(ns, name string) *snapv1.VolumeSnapshot {
	for _, s := range w.snaps {
		if s.Namespace == ns && s.Name == name {
			return s
		}
	}
	return nil
}

// --- The janitor's read ------------------------------------------------------

// inScope: the configuration's namespaces and selector.
func (w *world) inScope(c *corev1.PersistentVolumeClaim) bool {
	if slices.Contains(w.cfg.ExcludeNamespaces, c.Namespace) {
		return false
	}
	if !w.cfg.AllNamespaces && !slices.Contains(w.cfg.Namespaces, c.Namespace) {
		return false
	}
	return w.cfg.Selector.Matches(labels.Set(c.Labels))
}

// read is what `janitor scan` reads, reduced as kube's reader reduces it.
// selected false reads every claim of the scope's namespaces (as restore
// does).
func (w *world) read(selected bool) *inventory.Inventory {
	w.t.Helper()
	wl := w.cfg.WorkspaceLabel
	inv := &inventory.Inventory{Referrers: map[inventory.Key][]inventory.Referrer{}, LiveOwners: map[types.UID]string{},
		PVs: map[string]inventory.PV{}, Snapshots: map[string][]inventory.Snapshot{}, Contents: map[string]inventory.Content{},
		ServerTime: w.now, ServerVersion: "v1.35.4"}
	inScope := map[inventory.Key]bool{}
	for _, c := range w.claims {
		if selected && !w.inScope(c) || !selected && !w.nsInScope(c.Namespace) {
			continue
		}
		inv.Claims = append(inv.Claims, kube.Claim(c, wl))
		inScope[inventory.Key{Namespace: c.Namespace, Name: c.Name}] = true
		inv.PVs[c.Spec.VolumeName] = inventory.PV{Name: c.Spec.VolumeName, CSIDriver: "hostpath.csi.k8s.io",
			VolumeHandle: "handle-" + c.Spec.VolumeName, ReclaimPolicy: "Delete"}
	}
	ref := func(ns, claim string, r inventory.Referrer) {
		k := inventory.Key{Namespace: ns, Name: claim}
		if inScope[k] {
			r.Namespace = ns
			inv.Referrers[k] = append(inv.Referrers[k], r)
		}
	}
	// Pods, from their bytes, as kube's reader walks them (podRefs).
	var p wire.Pod
	for _, pod := range w.pods {
		b, err := pod.Marshal()
		if err != nil {
			w.t.Fatal(err)
		}
		if err := wire.WalkPod(b, &p); err != nil {
			w.t.Fatal(err)
		}
		inv.LiveOwners[types.UID(p.UID)] = "Pod/" + string(p.Name)
		for _, v := range p.Volumes {
			claim, detail := string(v.Claim), "volume "+string(v.Name)
			if v.Ephemeral {
				claim, detail = string(p.Name)+"-"+string(v.Name), "ephemeral volume "+string(v.Name)
			}
			ph := string(p.Phase)
			ref(string(p.Namespace), claim, inventory.Referrer{Kind: "Pod", Name: string(p.Name), Detail: detail,
				Created: time.Unix(p.Created, 0).UTC(), Terminal: ph == "Succeeded" || ph == "Failed"})
		}
	}
	// Workloads: an owner, and the claims their pod templates name
	// (kube's reader: workload, templateRefs).
	for _, d := range w.deploys {
		inv.LiveOwners[d.UID] = "Deployment/" + d.Name
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				ref(d.Namespace, v.PersistentVolumeClaim.ClaimName, inventory.Referrer{Kind: "Deployment", Name: d.Name,
					Detail: "pod template volume " + v.Name})
			}
		}
	}
	for uid, what := range w.owners {
		inv.LiveOwners[uid] = what
	}
	for _, vs := range w.snaps {
		if w.nsInScope(vs.Namespace) {
			inv.Snapshots[vs.Namespace] = append(inv.Snapshots[vs.Namespace], kube.Snapshot(vs, wl))
		}
	}
	for k, c := range w.contents {
		inv.Contents[k] = c
	}
	return inv
}

func (w *world) nsInScope(ns string) bool {
	return !slices.Contains(w.cfg.ExcludeNamespaces, ns) && (w.cfg.AllNamespaces || slices.Contains(w.cfg.Namespaces, ns))
}

func (w *world) policy() classify.Policy {
	c := w.cfg
	return classify.Policy{WorkspaceLabel: c.WorkspaceLabel, MinAge: c.MinAge, GracePeriod: c.GracePeriod,
		TrustExistingSnapshots: c.TrustExistingSnapshots, ClockSkew: c.ClockSkew, NoticePeriod: c.NoticePeriod,
		MaxSnooze: c.MaxSnooze, SessionsCarryData: c.SessionsCarryData}
}

// classify reads and classifies the scope now.
func (w *world) classify() (*inventory.Inventory, []classify.Decision) {
	inv := w.read(true)
	return inv, classify.Classify(inv, w.policy(), w.now)
}

// --- The janitor's commands --------------------------------------------------

// run is `janitor run` at w.now: scan (classify, write the marks),
// snapshot (rescue every target, intact at once), reap (classify again,
// delete what is reapable). It returns what it did, claim by claim.
func (w *world) run() map[string]string {
	w.t.Helper()
	did := map[string]string{}
	// scan
	_, ds := w.classify()
	for i := range ds {
		d := &ds[i]
		did[d.Claim.Name] = string(d.State)
		if d.Marks.Changed() {
			w.applyMarks(d)
		}
	}
	// snapshot
	_, ds = w.classify()
	for _, i := range rescue.Targets(ds, w.cfg.Superseded) {
		d := &ds[i]
		if d.State != classify.Orphaned && d.State != classify.Superseded {
			continue // a retry of a failed rescue: none fail here
		}
		w.rescue(d)
		did[d.Claim.Name] += " rescued"
	}
	// reap
	_, ds = w.classify()
	discard := w.cfg.Superseded == classify.SupersededDiscard
	for i := range ds {
		d := &ds[i]
		if d.Marks.Changed() {
			w.applyMarks(d)
		}
		if reap.Reapable(d, discard, w.cfg.GracePeriod, w.now) {
			w.deleteClaim(d.Claim.Namespace, d.Claim.Name)
			did[d.Claim.Name] += " reaped"
		}
	}
	return did
}

// applyMarks writes a decision's marks as the scan's merge patch would.
func (w *world) applyMarks(d *classify.Decision) {
	w.t.Helper()
	c := w.claim(d.Claim.Namespace, d.Claim.Name)
	if c == nil || c.UID != d.Claim.UID {
		w.t.Fatalf("marks for %s: the claim is gone", d.Claim.Name)
	}
	patch, err := mark.Patch(d.Marks, c.UID, c.ResourceVersion)
	if err != nil {
		w.t.Fatal(err)
	}
	var p struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
			Labels      map[string]*string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		w.t.Fatal(err)
	}
	merge := func(m map[string]string, patch map[string]*string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		for k, v := range patch {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = *v
			}
		}
		return m
	}
	c.Annotations = merge(c.Annotations, p.Metadata.Annotations)
	c.Labels = merge(c.Labels, p.Metadata.Labels)
	c.ResourceVersion += "+"
}

// rescue creates the janitor's snapshot of the claim decided by d as the
// rescuer does (internal/rescue: ensure, rescueAnnotations, template),
// and the snapshot controller finishes it at once: cut now, intact,
// content Retain.
func (w *world) rescue(d *classify.Decision) *snapv1.VolumeSnapshot {
	w.t.Helper()
	c := w.claim(d.Claim.Namespace, d.Claim.Name)
	tmpl, _, err := restore.NewTemplate(c)
	if err != nil {
		w.t.Fatal(err)
	}
	ann := map[string]string{
		inventory.AnnotationSourceUID:     string(c.UID),
		inventory.AnnotationSourceName:    c.Name,
		inventory.AnnotationOrphanedSince: d.OrphanedSince.UTC().Format(time.RFC3339),
		inventory.Prefix + "attempt":      "1",
		restore.AnnotationTemplate:        tmpl,
	}
	if rt, ok := classify.RestoredDataTime(d.Claim); ok {
		ann[inventory.AnnotationRestoredDataTime] = rt.UTC().Format(time.RFC3339)
	}
	lab := map[string]string{inventory.LabelManagedBy: inventory.ManagedByValue}
	if w.cfg.WorkspaceLabel != "" && d.Workspace != "" {
		lab[w.cfg.WorkspaceLabel] = d.Workspace
	}
	if d.State == classify.Superseded {
		lab[inventory.LabelSuperseded] = "true"
	}
	class := "csi-hostpath-snapclass"
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: rescue.Name(c.Name, c.UID, *d.OrphanedSince),
			Labels: lab, Annotations: ann},
		Spec: snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &c.Name},
			VolumeSnapshotClassName: &class},
	}
	return w.addSnapshot(vs, w.now, "Retain")
}

// rescuesOf are the names of the janitor's snapshots of a claim name.
func (w *world) rescuesOf(claim string) []string {
	var out []string
	for _, s := range w.snaps {
		if s.Labels[inventory.LabelManagedBy] == inventory.ManagedByValue && s.Annotations[inventory.AnnotationSourceName] == claim {
			out = append(out, s.Name)
		}
	}
	return out
}

// state is a claim's state now.
func (w *world) state(ns, name string) (classify.State, string) {
	w.t.Helper()
	_, ds := w.classify()
	for i := range ds {
		if ds[i].Claim.Namespace == ns && ds[i].Claim.Name == name {
			return ds[i].State, ds[i].Reason
		}
	}
	w.t.Fatalf("claim %s/%s is not in scope", ns, name)
	return "", ""
}

// heldBy asks the judge which copy holds snapshot ns/name's data: the
// copy's name, "" when the snapshot is the last copy of it.
func (w *world) heldBy(ns, name string) string {
	w.t.Helper()
	inv, ds := w.classify()
	l := classify.BuildLineage(inv, ds, w.now)
	l.Carry = w.cfg.SessionsCarryData
	for i := range l.Copies {
		c := &l.Copies[i]
		if c.Snapshot != nil && c.Snapshot.Namespace == ns && c.Snapshot.Name == name {
			if j := l.HeldBy(i); j >= 0 {
				return l.Copies[j].Name
			}
			return ""
		}
	}
	w.t.Fatalf("no copy %s/%s in the lineage", ns, name)
	return ""
}

// prune is `janitor prune` with the configuration's retention, at w.now:
// the verdict (pruned or not, and why) on each of the janitor's rescues of
// namespace ns. A pruned rescue is deleted.
func (w *world) prune(ns string) map[string]retention.Verdict {
	w.t.Helper()
	_, ds := w.classify()
	byUID := map[types.UID]*classify.Decision{}
	for i := range ds {
		byUID[ds[i].Claim.UID] = &ds[i]
	}
	// Every claim of the namespace, as prune lists them
	// (prune.namespaceClaims): one outside the selector counts as in use.
	var claims []retention.Claim
	for _, p := range w.claims {
		if p.Namespace != ns {
			continue
		}
		rc := retention.Claim{UID: p.UID, Name: p.Name, Bound: p.Status.Phase == corev1.ClaimBound,
			RestoresFrom: kube.Claim(p, "").DataSource, Created: p.CreationTimestamp.Time,
			RestoredDataTime: p.Annotations[classify.AnnotationRestoredDataTime], RestoredFrom: p.Annotations[classify.AnnotationRestoredFrom]}
		if w.cfg.WorkspaceLabel != "" {
			rc.Workspace = p.Labels[w.cfg.WorkspaceLabel]
		}
		if d, ok := byUID[p.UID]; ok {
			rc.State, rc.OrphanedSince = d.State, d.OrphanedSince
			if d.State == classify.Rescued {
				rc.Rescue = d.Snapshot
			}
		} else {
			rc.State, rc.Workspace = classify.InUse, ""
		}
		claims = append(claims, rc)
	}
	var rescues []retention.Rescue
	for _, vs := range w.snaps {
		if vs.Namespace == ns && vs.Labels[inventory.LabelManagedBy] == inventory.ManagedByValue {
			rescues = append(rescues, retention.Rescue{Snapshot: kube.Snapshot(vs, w.cfg.WorkspaceLabel),
				Hold: inventory.HeldBy(vs.Labels, vs.Annotations)})
		}
	}
	pol := retention.Policy{KeepFor: w.cfg.KeepFor, KeepLast: w.cfg.KeepLast, DeleteContents: true,
		SessionsCarryData: w.cfg.SessionsCarryData}
	out := map[string]retention.Verdict{}
	for _, v := range retention.Decide(pol, rescues, w.contents, claims, w.now) {
		out[v.Snapshot.Name] = v
		if v.Prune {
			w.snaps = slices.DeleteFunc(w.snaps, func(s *snapv1.VolumeSnapshot) bool {
				return s.Namespace == ns && s.Name == v.Snapshot.Name
			})
		}
	}
	return out
}

// restore is `janitor restore` at w.now: restore.Plan on the namespace's
// claims (every one, as restore reads them) and snapshots. It creates the
// planned claim and returns it, or returns the refusal.
func (w *world) restore(req restore.Request) (*corev1.PersistentVolumeClaim, error) {
	w.t.Helper()
	req.WorkspaceLabel = w.cfg.WorkspaceLabel
	inv := w.read(false)
	ds := classify.Classify(inv, w.policy(), w.now)
	var claims []restore.Claim
	for i := range ds {
		if ds[i].Claim.Namespace == req.Namespace {
			claims = append(claims, restore.ClaimOf(&ds[i], w.now))
		}
	}
	var snaps []restore.Snapshot
	for _, vs := range w.snaps {
		if vs.Namespace != req.Namespace {
			continue
		}
		s := restore.Snapshot{Snapshot: kube.Snapshot(vs, w.cfg.WorkspaceLabel), Template: vs.Annotations[restore.AnnotationTemplate]}
		if vs.Status != nil && vs.Status.RestoreSize != nil {
			q := vs.Status.RestoreSize.DeepCopy()
			s.RestoreSize = &q
		}
		snaps = append(snaps, s)
	}
	plan, err := restore.Plan(req, snaps, w.contents, claims)
	if err != nil {
		return nil, err
	}
	return w.createClaim(plan.Claim), nil
}

// TestPlatformConfigsLoad loads every platform's janitor configuration for
// every command that reads one, as `janitor <command> --config FILE` would:
// a key the janitor does not know, or a value it refuses, fails here.
func TestPlatformConfigsLoad(t *testing.T) {
	for _, p := range []string{"jupyterhub", "coder", "devworkspace", "gitpod"} {
		file := platformFile(t, p, "janitor.yaml")
		for _, cmd := range []string{config.CommandScan, config.CommandSnapshot, config.CommandReap, config.CommandRun,
			config.CommandGuard, config.CommandPrune, config.CommandRestore, config.CommandExplain} {
			fs := pflag.NewFlagSet("janitor", pflag.ContinueOnError)
			config.Register(fs)
			if err := fs.Parse([]string{"--config", file}); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(fs, cmd, func(string) (string, bool) { return "", false })
			if err != nil {
				t.Errorf("janitor %s --config %s: %v", cmd, file, err)
				continue
			}
			if cfg.SelectorString == "" {
				t.Errorf("%s: %s has no selector", cmd, file)
			}
		}
	}
}
