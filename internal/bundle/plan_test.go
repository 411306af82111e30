package bundle

import (
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/restore"
)

const driver = "hostpath.pvc-janitor.io"

// applied is the cluster once the steps' objects exist and the snapshot
// controller bound them.
func applied(t *testing.T, c Cluster, steps []Step) Cluster {
	t.Helper()
	for i, st := range steps {
		if st.NewContent != nil {
			vc := st.NewContent
			c.Contents = append(c.Contents, Content{Name: vc.Name, Driver: vc.Spec.Driver, Handle: *vc.Spec.Source.SnapshotHandle,
				Ref: inventory.Key{Namespace: vc.Spec.VolumeSnapshotRef.Namespace, Name: vc.Spec.VolumeSnapshotRef.Name}})
		}
		if st.NewSnapshot != nil {
			uid := types.UID("new-" + string(rune('a'+i)))
			c.Snapshots[st.Target] = Snapshot{UID: uid, Content: *st.NewSnapshot.Spec.Source.VolumeSnapshotContentName}
			for j := range c.Contents {
				if c.Contents[j].Name == *st.NewSnapshot.Spec.Source.VolumeSnapshotContentName {
					c.Contents[j].RefUID = uid
				}
			}
		}
	}
	return c
}

func emptyCluster(drivers ...string) Cluster {
	return ClusterOf(drivers, nil, nil)
}

// TestPlanImportsOnceThenNothing: into a cluster with the driver, each copy
// gets a Retain content of its handle and a snapshot bound to it, labelled
// as the janitor's rescue; planned again on the result, nothing changes.
func TestPlanImportsOnceThenNothing(t *testing.T) {
	archive := copyOf("ws", "ws-b-archive", "b", "snap-b")
	archive.Origin = OriginArchive
	foreign := copyOf("ws", "backup-c", "", "snap-c")
	foreign.Origin, foreign.Claim = OriginForeign, nil
	restored := t0.Add(-time.Hour)
	a := copyOf("ws", "ws-a-rescue-1", "a", "snap-a")
	a.RestoredDataTime = &restored
	b := testBundle(t, a, archive, foreign)
	cluster := emptyCluster(driver)
	steps := Plan(b, cluster, Options{})
	for _, st := range steps {
		if st.Refused != "" || st.NewContent == nil || st.NewSnapshot == nil {
			t.Fatalf("%s: %+v, want a content and a snapshot", st.Copy.Key(), st)
		}
		vc, vs := st.NewContent, st.NewSnapshot
		if vc.Spec.DeletionPolicy != snapv1.VolumeSnapshotContentRetain || vc.Spec.Driver != driver ||
			*vc.Spec.Source.SnapshotHandle != st.Copy.SnapshotHandle || vc.Name != ContentName(driver, st.Copy.SnapshotHandle) ||
			vc.Spec.VolumeSnapshotRef.Namespace != "ws" || vc.Spec.VolumeSnapshotRef.Name != st.Copy.Snapshot {
			t.Errorf("content %+v", vc)
		}
		if vs.Namespace != "ws" || vs.Name != st.Copy.Snapshot || *vs.Spec.Source.VolumeSnapshotContentName != vc.Name ||
			vs.Spec.Source.PersistentVolumeClaimName != nil {
			t.Errorf("snapshot %+v", vs)
		}
		if vs.Annotations[inventory.AnnotationSourceName] != st.Copy.SourceClaim || vs.Annotations[inventory.AnnotationSourceUID] != st.Copy.SourceUID ||
			vs.Annotations[AnnotationImportedFrom] != "west/ws/"+st.Copy.Snapshot {
			t.Errorf("%s annotations %v", vs.Name, vs.Annotations)
		}
	}
	// The rescue: the janitor's, its workspace, its data time, its template.
	vs := stepOf(t, steps, "ws-a-rescue-1").NewSnapshot
	if vs.Name != "ws-a-rescue-1" || vs.Labels[inventory.LabelManagedBy] != inventory.ManagedByValue || vs.Labels["workspace"] != "a" ||
		vs.Annotations[inventory.AnnotationOrphanedSince] != "2026-12-02T06:18:32Z" ||
		vs.Annotations[inventory.AnnotationRestoredDataTime] != "2026-12-02T05:18:32Z" || vs.Labels[inventory.LabelSuperseded] != "" {
		t.Errorf("rescue %v %v", vs.Labels, vs.Annotations)
	}
	tmpl, err := restore.ParseTemplate(vs.Annotations[restore.AnnotationTemplate])
	if err != nil || tmpl.Name != "ws-a" || tmpl.Storage != "1Gi" || *tmpl.StorageClassName != class || tmpl.Labels["role"] != "home" {
		t.Errorf("template %+v %v", tmpl, err)
	}
	// As the inventory reads it: the janitor's rescue of workspace a, data
	// time its orphaned-since.
	s := kubeSnapshot(vs)
	if !s.ManagedByJanitor || s.Workspace != "a" || s.SourceUID != "uid-a" || !classify.DataTime(&s, nil).Equal(t0) {
		t.Errorf("read back: %+v", s)
	}
	if vs := stepOf(t, steps, "ws-b-archive").NewSnapshot; vs.Labels[inventory.LabelSuperseded] != "true" || vs.Labels[inventory.LabelManagedBy] == "" {
		t.Errorf("archive %v", vs.Labels)
	}
	if vs := stepOf(t, steps, "backup-c").NewSnapshot; vs.Labels[inventory.LabelManagedBy] != "" || vs.Annotations[inventory.AnnotationOrphanedSince] != "" ||
		vs.Annotations[restore.AnnotationTemplate] != "" {
		t.Errorf("someone else's snapshot imported as the janitor's: %v %v", vs.Labels, vs.Annotations)
	}

	// Idempotent: planned on what it created, nothing to do; also when
	// the controller has not bound the contents yet.
	for _, st := range Plan(b, applied(t, cluster, steps), Options{}) {
		if !st.Unchanged() {
			t.Errorf("second import of %s: %+v, want nothing", st.Copy.Key(), st)
		}
	}
	// Half done (the content created, the snapshot not): the snapshot only.
	half := emptyCluster(driver)
	half.Contents = append(half.Contents, Content{Name: stepOf(t, steps, "ws-a-rescue-1").NewContent.Name, Driver: driver, Handle: "snap-a",
		Ref: inventory.Key{Namespace: "ws", Name: "ws-a-rescue-1"}})
	if st := stepOf(t, Plan(b, half, Options{}), "ws-a-rescue-1"); st.Refused != "" || st.NewContent != nil || st.NewSnapshot == nil {
		t.Errorf("after a half import: %+v, want the snapshot only", st)
	}
}

// TestPlanRefusals: per copy, with the reason; the other copies go on.
func TestPlanRefusals(t *testing.T) {
	b := testBundle(t, copyOf("ws", "ws-a-rescue-1", "a", "snap-a"), copyOf("other", "ws-a-rescue-1", "a2", "snap-a2"))
	target := inventory.Key{Namespace: "ws", Name: "ws-a-rescue-1"}
	for _, tc := range []struct {
		name    string
		cluster Cluster
		o       Options
		want    string // the first copy's refusal
	}{
		{"no driver", emptyCluster("ebs.csi.aws.com"), Options{},
			"this cluster has no CSIDriver hostpath.pvc-janitor.io"},
		{"handle bound elsewhere", Cluster{Drivers: map[string]bool{driver: true}, Snapshots: map[inventory.Key]Snapshot{},
			Contents: []Content{{Name: "snapcontent-1", Driver: driver, Handle: "snap-a", Ref: inventory.Key{Namespace: "x", Name: "y"}, RefUID: "u"}}},
			Options{}, "storage snapshot snap-a is already in this cluster as VolumeSnapshotContent snapcontent-1 of snapshot x/y"},
		{"content name taken", Cluster{Drivers: map[string]bool{driver: true}, Snapshots: map[inventory.Key]Snapshot{},
			Contents: []Content{{Name: ContentName(driver, "snap-a"), Driver: driver, Handle: "other"}}},
			Options{}, "holds another storage snapshot"},
		{"snapshot name taken", Cluster{Drivers: map[string]bool{driver: true},
			Snapshots: map[inventory.Key]Snapshot{target: {UID: "u", Content: "snapcontent-9"}}},
			Options{}, `VolumeSnapshot ws/ws-a-rescue-1 exists and is not this copy's (its content is "snapcontent-9")`},
		{"content of an earlier import", Cluster{Drivers: map[string]bool{driver: true}, Snapshots: map[inventory.Key]Snapshot{},
			Contents: []Content{{Name: ContentName(driver, "snap-a"), Driver: driver, Handle: "snap-a", Ref: target, RefUID: "gone"}}},
			Options{}, "is bound to an earlier snapshot ws/ws-a-rescue-1 (UID gone)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps := Plan(b, tc.cluster, tc.o)
			if st := stepIn(t, steps, "ws"); !strings.Contains(st.Refused, tc.want) || st.NewContent != nil || st.NewSnapshot != nil {
				t.Errorf("refused %q (creates %v %v), want %q", st.Refused, st.NewContent != nil, st.NewSnapshot != nil, tc.want)
			}
		})
	}
	// Into one namespace (-n): two copies of one name cannot both go.
	steps := Plan(b, emptyCluster(driver), Options{Namespace: "new", WorkspaceLabel: "ws-id"})
	// The bundle's order: namespace other first.
	if st := stepIn(t, steps, "ws"); !strings.Contains(st.Refused, "another copy of the bundle is imported as new/ws-a-rescue-1") {
		t.Errorf("second copy of a name: %+v", st)
	}
	if st := stepIn(t, steps, "other"); st.Refused != "" || st.Target.Namespace != "new" || st.NewSnapshot.Namespace != "new" ||
		st.NewContent.Spec.VolumeSnapshotRef.Namespace != "new" || st.NewSnapshot.Labels["ws-id"] != "a2" {
		t.Errorf("into namespace new with label ws-id: %+v", st)
	}
}

// TestSelect: per Rescued claim its rescue, per gone claim its only copy,
// each once.
func TestSelect(t *testing.T) {
	snap := func(name, src string) *inventory.Snapshot {
		return &inventory.Snapshot{Namespace: "ws", Name: name, SourceClaim: src, ManagedByJanitor: true}
	}
	r1, gone, both := snap("ws-a-rescue", "ws-a"), snap("ws-b-rescue", "ws-b"), snap("ws-c-rescue", "ws-c")
	ds := []classify.Decision{
		{Claim: &inventory.Claim{Namespace: "ws", Name: "ws-a"}, State: classify.Rescued, Snapshot: r1},
		{Claim: &inventory.Claim{Namespace: "ws", Name: "ws-c"}, State: classify.Rescued, Snapshot: both},
		{Claim: &inventory.Claim{Namespace: "ws", Name: "ws-d"}, State: classify.Orphaned},
		{Claim: &inventory.Claim{Namespace: "ws", Name: "ws-e"}, State: classify.Superseded, Snapshot: snap("newer", "ws-f")},
	}
	got := Select(ds, []*inventory.Snapshot{gone, both})
	var names []string
	for _, c := range got {
		names = append(names, c.Snapshot.Name+": "+c.Why())
	}
	want := []string{"ws-a-rescue: the rescue of Rescued claim ws-a", "ws-b-rescue: the only copy of claim ws-b (gone)",
		"ws-c-rescue: the rescue of Rescued claim ws-c"}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("Select:\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

// TestNewCopy: the handle from the content's status (else its source), the
// restore size, the template; a content not bound to the snapshot, or
// without a handle, is no copy.
func TestNewCopy(t *testing.T) {
	cut, orphaned := t0.Add(3*time.Second), t0
	s := &inventory.Snapshot{Namespace: "ws", Name: "ws-a-rescue", UID: "s1", SourceClaim: "ws-a", SourceUID: "c1", Workspace: "a",
		ManagedByJanitor: true, OrphanedSince: &orphaned, CutTime: &cut, ReadyToUse: true, ContentName: "snapcontent-1"}
	size := resource.MustParse("2Gi")
	vs := &snapv1.VolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "ws-a-rescue", UID: "s1",
		Annotations: map[string]string{restore.AnnotationTemplate: `{"name":"ws-a","storage":"2Gi","accessModes":["ReadWriteOnce"]}`}},
		Status: &snapv1.VolumeSnapshotStatus{RestoreSize: &size}}
	handle, specHandle, mode := "snap-1", "pre-1", corev1.PersistentVolumeFilesystem
	vc := &snapv1.VolumeSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "snapcontent-1"},
		Spec:   snapv1.VolumeSnapshotContentSpec{Driver: driver, VolumeSnapshotRef: corev1.ObjectReference{UID: "s1"}, SourceVolumeMode: &mode},
		Status: &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle}}
	c, err := NewCopy(s, vs, vc)
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotHandle != "snap-1" || c.Driver != driver || c.RestoreSize != 2<<30 || !c.DataTime.Equal(t0) || !c.CutTime.Equal(cut) ||
		c.Origin != OriginRescue || c.Workspace != "a" || c.SourceUID != "c1" || c.Claim == nil || c.Claim.Name != "ws-a" || c.SourceVolumeMode != "Filesystem" {
		t.Errorf("copy %+v", c)
	}
	pre := vc.DeepCopy()
	pre.Status.SnapshotHandle, pre.Spec.Source.SnapshotHandle = nil, &specHandle
	if c, err := NewCopy(s, vs, pre); err != nil || c.SnapshotHandle != "pre-1" {
		t.Errorf("pre-provisioned content: %+v %v", c, err)
	}
	other := vc.DeepCopy()
	other.Spec.VolumeSnapshotRef.UID = "s2"
	none := vc.DeepCopy()
	none.Status = nil
	for name, bad := range map[string]*snapv1.VolumeSnapshotContent{"bound elsewhere": other, "no handle": none} {
		if _, err := NewCopy(s, vs, bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// kubeSnapshot is vs as a run reads it once the snapshot controller has
// bound it and the driver reported the original cut.
func kubeSnapshot(vs *snapv1.VolumeSnapshot) inventory.Snapshot {
	vs = vs.DeepCopy()
	cut := metav1.NewTime(t0.Add(5 * time.Second))
	ready := true
	vs.Status = &snapv1.VolumeSnapshotStatus{CreationTime: &cut, ReadyToUse: &ready}
	return kube.Snapshot(vs, "workspace")
}

func stepOf(t *testing.T, steps []Step, snapshot string) *Step {
	t.Helper()
	for i := range steps {
		if steps[i].Copy.Snapshot == snapshot {
			return &steps[i]
		}
	}
	t.Fatalf("no step of %s", snapshot)
	return nil
}

func stepIn(t *testing.T, steps []Step, ns string) *Step {
	t.Helper()
	for i := range steps {
		if steps[i].Copy.Namespace == ns {
			return &steps[i]
		}
	}
	t.Fatalf("no step of namespace %s", ns)
	return nil
}
