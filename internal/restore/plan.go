package restore

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
)

// Request is what the user asked to restore (docs/spec.md#restore). Exactly one of
// Claim, Workspace and From is set.
type Request struct {
	Namespace      string
	Claim          string // by claim name: the newest intact rescue of that name
	Workspace      string // --workspace: the rescue of the workspace with the newest data
	From           string // --from: a named snapshot of the namespace
	As             string // --as: the new claim's name
	AllowOlder     bool   // --allow-older
	StorageClass   string // --storage-class: overrides the template's
	Size           string // --size: the least size, over the template's
	WorkspaceLabel string // --workspace-label, to label a restore without a template
	// VolumeLabel is --volume-label: the label whose value names a claim's
	// role in its workspace (docs/spec.md#restore-roles); "": one role.
	VolumeLabel string
	// ClockSkew is --clock-skew: a cut is on the storage system's clock,
	// a claim's last use on the API server's (docs/spec.md#rule-clock-skew).
	ClockSkew time.Duration

	// role narrows --workspace to one role (PlanAll sets it per role).
	role   string
	byRole bool
}

// Snapshot is a VolumeSnapshot of the namespace as Plan reads it.
type Snapshot struct {
	inventory.Snapshot
	// Template is the pvc-janitor.io/claim annotation, raw ("" if none).
	Template string
	// RestoreSize is status.restoreSize, nil until known.
	RestoreSize *resource.Quantity
	// Dropped is the pvc-janitor.io/claim-dropped annotation: the claim's
	// annotations the template could not keep.
	Dropped string
	// Role is the value of Request.VolumeLabel in the claim template's
	// labels; RoleKnown: the snapshot has a template and the request a
	// volume label (set by Plan; someone else's snapshot has no role).
	Role      string
	RoleKnown bool
}

// Claim is an existing claim of the namespace and its state this run.
type Claim struct {
	Name              string
	Workspace         string
	State             classify.State
	Created           time.Time
	DeletionTimestamp *time.Time
	// DataTime is the newest moment whose writes the claim can hold, as
	// the lineage judges it (classify.ClaimDataTime): its last use the
	// janitor dated, a restored claim's source data time, or, while
	// nothing dates it (a claim no run has marked yet, a held one), the
	// time of the read: it may be in use until then. Zero for an undated
	// claim that is not Bound or is being deleted.
	DataTime time.Time
	// Undated: nothing dated DataTime; it is the read's time.
	Undated bool
	// InUse: seen in use by this run, whatever its state (a Held claim a
	// pod mounts is in use too: classify.Decision.UsedNow).
	InUse bool
	// From is the snapshot it was created from (spec.dataSource, or the
	// janitor's restored-from): a claim created from the snapshot to
	// restore descends from its data, whatever its workspace
	// (docs/spec.md#rule-descent).
	From string
	// Role is the value of Request.VolumeLabel on the claim ("" without
	// it, or without the label): its role in its workspace.
	Role string
}

// ClaimOf is the claim of decision d as Plan weighs it, read at now (the
// API server's clock of the classification).
func ClaimOf(d *classify.Decision, now time.Time) Claim {
	dt := classify.ClaimDataTime(d.Claim, d, now)
	// ClaimDataTime answers now itself exactly when no evidence dates the
	// claim (or it is in use, which conflicts refuses first).
	undated := dt.Equal(now)
	if undated && (d.Claim.Phase != "Bound" || d.Claim.DeletionTimestamp != nil) {
		// Not Bound, it holds no data; being deleted, whoever deleted it
		// gave its data up. Either is weighed by its creation alone.
		dt, undated = time.Time{}, false
	}
	inUse := d.UsedNow()
	if inUse {
		undated = false
	}
	from := d.Claim.DataSource
	if from == "" {
		from = d.Claim.Annotations[classify.AnnotationRestoredFrom]
	}
	return Claim{Name: d.Claim.Name, Workspace: d.Workspace, State: d.State, Created: d.Claim.CreationTimestamp,
		DeletionTimestamp: d.Claim.DeletionTimestamp, DataTime: dt, Undated: undated, InUse: inUse, From: from}
}

// Result is what to create: the claim and the snapshot it restores.
type Result struct {
	Snapshot *Snapshot
	// DataTime is the snapshot's data time (docs/spec.md#evidence).
	DataTime time.Time
	Claim    *corev1.PersistentVolumeClaim
	// Notes are facts the report should carry (an annotation a template
	// could not keep, a size raised to the restore size, …).
	Notes []string
}

// Refusal is a restore the rules forbid (docs/spec.md#restore): exit 2, one line,
// nothing written.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

func refuse(format string, a ...any) error { return &Refusal{Reason: fmt.Sprintf(format, a...)} }

// Plan chooses the snapshot to restore and builds the new claim, or says
// why not. snaps are the namespace's VolumeSnapshots, contents the
// VolumeSnapshotContents they are bound to, claims the namespace's claims.
func Plan(r Request, snaps []Snapshot, contents map[string]inventory.Content, claims []Claim) (*Result, error) {
	return plan(r, named(snaps, r.VolumeLabel), contents, claims)
}

// PlanAll is Plan for every claim a request brings back: with --workspace
// and --volume-label, one claim per role of the workspace's rescues, each
// from that role's rescue with the newest data, each weighed against its
// own role's claims and rescues (docs/spec.md#restore-roles); otherwise
// Plan's one claim. One refusal refuses all: nothing is written.
func PlanAll(r Request, snaps []Snapshot, contents map[string]inventory.Content, claims []Claim) ([]*Result, error) {
	snaps = named(snaps, r.VolumeLabel)
	if r.Workspace == "" || r.VolumeLabel == "" {
		res, err := plan(r, snaps, contents, claims)
		if err != nil {
			return nil, err
		}
		return []*Result{res}, nil
	}
	var roles []string
	for i := range snaps {
		s := &snaps[i]
		if s.ManagedByJanitor && s.Workspace == r.Workspace && !slices.Contains(roles, s.Role) {
			roles = append(roles, s.Role)
		}
	}
	slices.Sort(roles)
	if len(roles) > 1 && r.As != "" {
		return nil, refuse("workspace %s in namespace %s has %d roles (%s=%s): --as names one claim; restore each by its claim's name",
			r.Workspace, r.Namespace, len(roles), r.VolumeLabel, strings.Join(quoteRoles(roles), ", "))
	}
	if len(roles) == 0 {
		roles = []string{""}
	}
	var out []*Result
	names := map[string]string{}
	for _, role := range roles {
		rr := r
		rr.role, rr.byRole = role, true
		res, err := plan(rr, snaps, contents, claims)
		if err != nil {
			if len(roles) > 1 {
				return nil, refuse("role %s=%q of workspace %s: %v", r.VolumeLabel, role, r.Workspace, err)
			}
			return nil, err
		}
		if other, ok := names[res.Claim.Name]; ok {
			return nil, refuse("roles %q and %q of workspace %s restore the same claim name %s: restore each by name with --as",
				other, role, r.Workspace, res.Claim.Name)
		}
		names[res.Claim.Name] = role
		out = append(out, res)
	}
	return out, nil
}

func quoteRoles(roles []string) []string {
	out := make([]string, len(roles))
	for i, r := range roles {
		out[i] = fmt.Sprintf("%q", r)
	}
	return out
}

// sameRole reports whether a claim's or rescue's role (known: it has one)
// is s's, as the refusals weigh it: always without a volume label, or when
// either role is not known (someone else's snapshot: it weighs on every
// role, the safe side).
func sameRole(r Request, s *Snapshot, known bool, role string) bool {
	return r.VolumeLabel == "" || !s.RoleKnown || !known || role == s.Role
}

func plan(r Request, snaps []Snapshot, contents map[string]inventory.Content, claims []Claim) (*Result, error) {
	s, err := choose(r, snaps, contents)
	if err != nil {
		return nil, err
	}
	var t *Template
	if s.Template != "" {
		if t, err = ParseTemplate(s.Template); err != nil {
			return nil, refuse("snapshot %s/%s: %v", s.Namespace, s.Name, err)
		}
	}
	name := r.As
	switch {
	case name != "":
	case r.Claim != "":
		name = r.Claim
	case t != nil && t.Name != "":
		name = t.Name
	default:
		name = s.SourceClaim
	}
	if name == "" {
		return nil, refuse("snapshot %s/%s names no claim to restore: pass --as NAME", s.Namespace, s.Name)
	}
	dataTime := snapshotDataTime(s, claims)
	if err := conflicts(r, name, s, claims, snaps, contents); err != nil {
		return nil, err
	}
	pvc, notes, err := manifest(r, name, s, t, dataTime)
	if err != nil {
		return nil, err
	}
	return &Result{Snapshot: s, DataTime: dataTime, Claim: pvc, Notes: notes}, nil
}

// named gives each of the janitor's snapshots whose spec names no source
// claim the claim its template records: an imported rescue is a
// pre-provisioned snapshot (docs/spec.md#import), and without its claim's
// name restore by name would not find it, and the refusals about that
// claim (a newer rescue of it, a claim of that name) would not weigh it
// (issue 42). With a volume label it also gives each snapshot with a
// template its role. The slice is copied; a template that does not parse
// leaves the snapshot as it is (Plan refuses it when it is chosen).
func named(snaps []Snapshot, volumeLabel string) []Snapshot {
	out := slices.Clone(snaps)
	for i := range out {
		s := &out[i]
		if s.Template == "" || (volumeLabel == "" && (s.SourceClaim != "" || !s.ManagedByJanitor)) {
			continue
		}
		t, err := ParseTemplate(s.Template)
		if err != nil {
			continue
		}
		if s.SourceClaim == "" && s.ManagedByJanitor && t.Name != "" {
			s.SourceClaim = t.Name
		}
		if volumeLabel != "" {
			s.Role, s.RoleKnown = t.Labels[volumeLabel], true
		}
	}
	return out
}

// choose finds the snapshot the request names.
func choose(r Request, snaps []Snapshot, contents map[string]inventory.Content) (*Snapshot, error) {
	if r.From != "" {
		for i := range snaps {
			if snaps[i].Name == r.From {
				if ok, why := classify.Intact(&snaps[i].Snapshot, contents); !ok {
					return nil, refuse("snapshot %s/%s is not intact: %s", r.Namespace, r.From, why)
				}
				return &snaps[i], nil
			}
		}
		return nil, refuse("snapshot %s/%s not found", r.Namespace, r.From)
	}
	what := "claim " + r.Namespace + "/" + r.Claim
	match := func(s *Snapshot) bool { return s.SourceClaim == r.Claim }
	if r.Workspace != "" {
		what = "workspace " + r.Workspace + " in namespace " + r.Namespace
		match = func(s *Snapshot) bool { return s.Workspace == r.Workspace && (!r.byRole || s.Role == r.role) }
		if r.byRole && r.VolumeLabel != "" {
			what = fmt.Sprintf("role %s=%q of %s", r.VolumeLabel, r.role, what)
		}
	}
	var best *Snapshot
	var bestData time.Time
	var broken []string
	for i := range snaps {
		s := &snaps[i]
		if !s.ManagedByJanitor || !match(s) {
			continue
		}
		if ok, why := classify.Intact(&s.Snapshot, contents); !ok {
			broken = append(broken, s.Name+" ("+why+")")
			continue
		}
		d := classify.DataTime(&s.Snapshot, nil)
		if best == nil || d.After(bestData) || (d.Equal(bestData) && before(s, best)) {
			best, bestData = s, d
		}
	}
	if best == nil {
		if len(broken) > 0 {
			slices.Sort(broken)
			return nil, refuse("no intact rescue of %s: %s", what, strings.Join(broken, "; "))
		}
		return nil, refuse("no rescue of %s found", what)
	}
	return best, nil
}

// before orders rescues of equal data time: a rescue before an archive
// (docs/spec.md#retention-archives), then the higher name.
func before(a, b *Snapshot) bool {
	if a.Superseded != b.Superseded {
		return !a.Superseded
	}
	return a.Name > b.Name
}

// conflicts applies the refusals about existing claims and rescues: the
// name is taken, or a claim of the workspace is in use or holds newer data,
// or another rescue of the workspace does.
func conflicts(r Request, name string, s *Snapshot, claims []Claim, snaps []Snapshot, contents map[string]inventory.Content) error {
	dataTime := snapshotDataTime(s, claims)
	for _, c := range claims {
		if c.Name == name {
			if c.DeletionTimestamp != nil {
				return refuse("claim %s/%s exists and is being deleted: wait until it is gone, or restore under another name with --as", r.Namespace, name)
			}
			return refuse("claim %s/%s exists: restore under another name with --as", r.Namespace, name)
		}
	}
	if r.AllowOlder {
		return nil
	}
	// Without a workspace label a claim is its own workspace: the
	// snapshot's is its source claim's (docs/spec.md#rule-lineage).
	of := " of workspace " + s.Workspace
	if s.Workspace == "" {
		of = ""
	}
	for _, c := range claims {
		// A claim created from s descends from its data: it weighs
		// whatever its workspace (found by the model checker: a claim
		// recreated from an unlabelled backup under the workspace label,
		// then written, beside a restore of that backup).
		descends := c.From == s.Name && !c.Created.Before(s.CreationTimestamp)
		if !descends && (c.Workspace != s.Workspace || (s.Workspace == "" && c.Name != s.SourceClaim)) {
			continue
		}
		// Another role's claim holds other data: a home restored beside
		// the workspace's data claim (docs/spec.md#restore-roles).
		if !descends && !sameRole(r, s, true, c.Role) {
			continue
		}
		if classify.RuleFor(c.State).Live {
			return refuse("claim %s/%s%s is %s: restore beside it with --allow-older (and --as)", r.Namespace, c.Name, of, c.State)
		}
		if c.InUse {
			return refuse("claim %s/%s%s is %s and in use: restore beside it with --allow-older (and --as)", r.Namespace, c.Name, of, c.State)
		}
		newest, what := c.Created, "created"
		switch {
		case c.Undated && c.DataTime.After(newest):
			newest, what = c.DataTime, "nothing dates its last use yet, so possibly used until"
		case c.DataTime.After(newest):
			newest, what = c.DataTime, "last used"
		}
		if newest.After(dataTime.Add(-cutMargin(r, s))) {
			return refuse("claim %s/%s%s may hold newer data (%s %s, after the snapshot's data time %s): restore beside it with --allow-older",
				r.Namespace, c.Name, of, what, newest.UTC().Format(time.RFC3339), dataTime.UTC().Format(time.RFC3339))
		}
	}
	return newerRescue(r, s, dataTime, snaps, contents)
}

// cutMargin is how much earlier than s's data time a claim's last use may
// still be newer data: --clock-skew when s is dated by its cut, on the
// storage system's clock (someone else's snapshot; found by the model
// checker: a backup cut on a storage clock a second ahead read as newer
// than the claim's last use), nothing for a rescue that records its data
// time on the API server's clock.
func cutMargin(r Request, s *Snapshot) time.Duration {
	if classify.DataTimeKnown(&s.Snapshot) {
		return 0
	}
	return r.ClockSkew
}

// snapshotDataTime is s's data time as the lineage dates it
// (docs/spec.md#rule-data-time): someone else's snapshot of a claim of the
// namespace that is not in use (the claim of its source's name, created
// before the snapshot) is dated by that claim's last use when it is
// earlier than the cut: a nightly backup of an idle claim holds that
// claim's data of its last use, not of the night. The janitor's own
// records its data time.
func snapshotDataTime(s *Snapshot, claims []Claim) time.Time {
	if s.ManagedByJanitor {
		// A rescue of a restored claim holds the restored data plus what
		// was written since, and it does not say whether anything was:
		// its line reaches only its restored-data-time
		// (docs/spec.md#rule-restored-data-time), and the refusals weigh
		// it so (found by the model checker: a rescue of a claim restored
		// --allow-older from an old backup, never used, was restored
		// beside the newer claim of its workspace).
		t := classify.DataTime(&s.Snapshot, nil)
		if rt := s.RestoredDataTime; rt != nil && rt.Before(t) {
			t = *rt
		}
		return t
	}
	if s.SourceClaim == "" {
		return classify.DataTime(&s.Snapshot, nil)
	}
	for i := range claims {
		c := &claims[i]
		if c.Name != s.SourceClaim || c.Created.After(s.CreationTimestamp) {
			continue
		}
		if c.InUse || classify.RuleFor(c.State).Live || c.Undated || c.DataTime.IsZero() {
			break
		}
		t := c.DataTime
		return classify.DataTime(&s.Snapshot, &t)
	}
	return classify.DataTime(&s.Snapshot, nil)
}

// newerRescue refuses s when another intact rescue of the janitor's of its
// workspace (of its claim, without one) holds newer data: the workspace
// has newer data than s even when every claim of it is gone
// (docs/spec.md#restore-refusals). Archives do not count: they hold a superseded
// claim's data, not the workspace's line (docs/spec.md#rule-lineage).
func newerRescue(r Request, s *Snapshot, dataTime time.Time, snaps []Snapshot, contents map[string]inventory.Content) error {
	if err := newerForeign(r, s, dataTime, snaps, contents); err != nil {
		return err
	}
	for i := range snaps {
		o := &snaps[i]
		if o.UID == s.UID || !o.ManagedByJanitor || o.Superseded {
			continue
		}
		same := o.Workspace == s.Workspace && s.Workspace != ""
		if s.Workspace == "" {
			same = o.SourceClaim == s.SourceClaim && s.SourceClaim != ""
		}
		if !same || !sameRole(r, s, o.RoleKnown, o.Role) {
			continue
		}
		if ok, _ := classify.Intact(&o.Snapshot, contents); !ok {
			continue
		}
		if d := classify.DataTime(&o.Snapshot, nil); d.After(dataTime.Add(-cutMargin(r, s))) {
			what := "workspace " + s.Workspace
			if s.Workspace == "" {
				what = "claim " + s.SourceClaim
			}
			return refuse("rescue %s/%s of %s holds newer data (data time %s, after the snapshot's data time %s): restore beside it with --allow-older (and --as)",
				r.Namespace, o.Name, what, d.UTC().Format(time.RFC3339), dataTime.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// newerForeign refuses s when someone else's intact snapshot of the same
// claim (a backup tool's), or of the same workspace when s has a workspace
// label, was cut after s's data time: it may hold the claim's or the
// workspace's newer data, and the janitor may have reaped the claim on it
// (docs/spec.md#restore-refusals). It has no claim template, so the way to
// it is --from (with --size), or --allow-older for s.
func newerForeign(r Request, s *Snapshot, dataTime time.Time, snaps []Snapshot, contents map[string]inventory.Content) error {
	for i := range snaps {
		o := &snaps[i]
		if o.UID == s.UID || o.ManagedByJanitor || o.SourceClaim == "" {
			continue
		}
		sameClaim := o.SourceClaim == s.SourceClaim
		if !sameClaim && (s.Workspace == "" || o.Workspace != s.Workspace) {
			continue
		}
		if ok, _ := classify.Intact(&o.Snapshot, contents); !ok {
			continue
		}
		// A cut in the same second as s's data time may hold later
		// writes: cut times are whole seconds (found by the model
		// checker: two backups of one claim cut in one second).
		if cut := classify.CutTime(&o.Snapshot); !cut.Add(r.ClockSkew).Before(dataTime) {
			of := "the claim"
			if !sameClaim {
				of = "workspace " + s.Workspace
			}
			return refuse("snapshot %s/%s of claim %s, not the janitor's, was cut at %s, after the data time %s of %s: it may hold newer data of %s; restore from it with --from (and --size), or pass --allow-older",
				r.Namespace, o.Name, o.SourceClaim, cut.UTC().Format(time.RFC3339), dataTime.UTC().Format(time.RFC3339), s.Name, of)
		}
	}
	return nil
}

// manifest builds the new claim from the template (nil: from the flags).
func manifest(r Request, name string, s *Snapshot, t *Template, dataTime time.Time) (*corev1.PersistentVolumeClaim, []string, error) {
	if t == nil {
		var err error
		if t, err = flagTemplate(r, s); err != nil {
			return nil, nil, err
		}
	}
	var notes []string
	size, note, err := sizeOf(r, s, t)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		notes = append(notes, note)
	}
	if s.Dropped != "" {
		notes = append(notes, "the claim template could not keep these annotations (over 16 KiB): "+s.Dropped)
	}
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: name, Labels: keep(t.Labels, nil), Annotations: keep(t.Annotations, systemAnnotations)},
	}
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[AnnotationRestoredFrom] = s.Name
	// The provenance: until it is used, the new claim holds data of this
	// time, however recently it was created (docs/spec.md#rule-restored-data-time).
	// A rescue of a restored claim carries the workspace's line only as
	// far as that claim's source: so does a claim restored from it.
	line := dataTime
	if rt := s.RestoredDataTime; rt != nil && rt.Before(line) {
		line = *rt
	}
	pvc.Annotations[AnnotationRestoredDataTime] = line.UTC().Format(time.RFC3339)
	for _, m := range t.AccessModes {
		pvc.Spec.AccessModes = append(pvc.Spec.AccessModes, corev1.PersistentVolumeAccessMode(m))
	}
	pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: size}
	pvc.Spec.StorageClassName = t.StorageClassName
	if r.StorageClass != "" {
		pvc.Spec.StorageClassName = &r.StorageClass
		// Kubernetes reads the beta annotation before the field
		// (component-helpers' GetPersistentVolumeClaimClass): a template's
		// annotation would send the claim to the old class, which is
		// gone exactly when --storage-class is needed (found with
		// KubeSpawner's claims, docs/platforms.md).
		if _, ok := pvc.Annotations[betaStorageClass]; ok {
			delete(pvc.Annotations, betaStorageClass)
			notes = append(notes, "annotation "+betaStorageClass+" dropped: --storage-class "+r.StorageClass+" decides the class")
		}
	}
	if t.VolumeMode != "" {
		m := corev1.PersistentVolumeMode(t.VolumeMode)
		pvc.Spec.VolumeMode = &m
	}
	pvc.Spec.VolumeAttributesClassName = t.VolumeAttributesClassName
	group := "snapshot.storage.k8s.io"
	pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: s.Name}
	return pvc, notes, nil
}

// betaStorageClass is the storage class annotation older claims carry
// (KubeSpawner sets it beside spec.storageClassName).
const betaStorageClass = "volume.beta.kubernetes.io/storage-class"

// flagTemplate is the template of a snapshot that carries none: the flags
// say the class and size (or the snapshot's restore size), the access mode
// is ReadWriteOnce, and the workspace label comes from the snapshot.
func flagTemplate(r Request, s *Snapshot) (*Template, error) {
	var missing []string
	if r.StorageClass == "" {
		missing = append(missing, "--storage-class")
	}
	if r.Size == "" && s.RestoreSize == nil {
		missing = append(missing, "--size")
	}
	if len(missing) > 0 {
		return nil, refuse("snapshot %s/%s carries no claim template: %s required", s.Namespace, s.Name, strings.Join(missing, " and "))
	}
	t := &Template{AccessModes: []string{string(corev1.ReadWriteOnce)}}
	if r.WorkspaceLabel != "" && s.Workspace != "" {
		t.Labels = map[string]string{r.WorkspaceLabel: s.Workspace}
	}
	return t, nil
}

// sizeOf is the new claim's requested size: the largest of the template's,
// --size and the snapshot's restoreSize (a claim smaller than its snapshot
// cannot be provisioned from it).
func sizeOf(r Request, s *Snapshot, t *Template) (resource.Quantity, string, error) {
	var size resource.Quantity
	from := ""
	for _, c := range []struct{ what, v string }{{"the claim template", t.Storage}, {"--size", r.Size}} {
		if c.v == "" {
			continue
		}
		q, err := resource.ParseQuantity(c.v)
		if err != nil {
			return size, "", refuse("%s: size %q: %v", c.what, c.v, err)
		}
		if q.Cmp(size) > 0 {
			size, from = q, c.what
		}
	}
	if s.RestoreSize != nil && s.RestoreSize.Cmp(size) > 0 {
		note := ""
		if from != "" {
			note = fmt.Sprintf("size raised from %s (%s) to the snapshot's restoreSize %s", size.String(), from, s.RestoreSize.String())
		}
		return s.RestoreSize.DeepCopy(), note, nil
	}
	if size.IsZero() {
		return size, "", refuse("snapshot %s/%s: the size is not known: pass --size", s.Namespace, s.Name)
	}
	return size, "", nil
}
