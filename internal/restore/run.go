package restore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/pvc-janitor/pvc-janitor/internal/classify"
	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
	"github.com/pvc-janitor/pvc-janitor/internal/retry"
)

// Options tune a restore.
type Options struct {
	Policy   classify.Policy // for the classification of the namespace's claims
	DryRun   bool            // plan only
	Manifest bool            // -o yaml: plan only, the manifest is the output
	Timeout  time.Duration   // --restore-timeout: how long to wait for Bound
	PageSize int64
	// Poll is how often the claim is read while waiting (default 1s).
	Poll time.Duration
}

// Outcome is what a restore did.
type Outcome struct {
	Plan    *Result
	Created bool
	// Bound: the claim is Bound. WaitsForConsumer: its class binds on the
	// first pod (WaitForFirstConsumer), so it is not waited for.
	Bound            bool
	WaitsForConsumer bool
	Message          string
}

// ProvisionError is a restore whose claim was created but did not bind:
// the provisioner failed, or --restore-timeout passed (exit 4).
type ProvisionError struct{ Msg string }

func (e *ProvisionError) Error() string { return e.Msg }

// Do reads the namespace, plans the restore, and unless opts say to plan
// only, creates the claim, records the Restored Event and waits until it is
// Bound. A *Refusal means nothing was written.
func Do(ctx context.Context, c *kube.Clients, req Request, opts Options) (*Outcome, error) {
	snaps, contents, claims, err := read(ctx, c, req, opts)
	if err != nil {
		return nil, err
	}
	req.ClockSkew = opts.Policy.ClockSkew
	plan, err := Plan(req, snaps, contents, claims)
	if err != nil {
		return nil, err
	}
	return execute(ctx, c, req, plan, opts)
}

// DoAll is Do for every claim the request brings back (PlanAll: with
// --workspace and --volume-label, one per role of the workspace). Every
// plan is made before anything is written: a refusal of one role writes
// nothing. The claims are then created one after the other; with the
// first error come the outcomes so far, the last one the claim it is
// about (Created false when it was not created).
func DoAll(ctx context.Context, c *kube.Clients, req Request, opts Options) ([]*Outcome, error) {
	snaps, contents, claims, err := read(ctx, c, req, opts)
	if err != nil {
		return nil, err
	}
	req.ClockSkew = opts.Policy.ClockSkew
	plans, err := PlanAll(req, snaps, contents, claims)
	if err != nil {
		return nil, err
	}
	var outs []*Outcome
	for _, plan := range plans {
		out, err := execute(ctx, c, req, plan, opts)
		if out == nil {
			out = &Outcome{Plan: plan} // not created: the error says why
		}
		outs = append(outs, out)
		if err != nil {
			return outs, err
		}
	}
	return outs, nil
}

// execute creates the planned claim, unless opts say to plan only.
func execute(ctx context.Context, c *kube.Clients, req Request, plan *Result, opts Options) (*Outcome, error) {
	out := &Outcome{Plan: plan}
	if opts.DryRun || opts.Manifest {
		out.Message = "would restore claim " + req.Namespace + "/" + plan.Claim.Name + " from snapshot " + plan.Snapshot.Name
		return out, nil
	}
	mark, err := markSource(ctx, c, plan, opts)
	if err != nil {
		return nil, err
	}
	created, err := create(ctx, c, plan, opts)
	if err != nil {
		if IsRefusal(err) {
			unmarkSource(ctx, c, plan, mark, opts) // nothing was created
		}
		return nil, err
	}
	out.Created = true
	cl := kube.Claim(created, opts.Policy.WorkspaceLabel)
	msg := fmt.Sprintf("restored from snapshot %s (data time %s)", plan.Snapshot.Name, plan.DataTime.UTC().Format(time.RFC3339))
	_ = c.Event(ctx, &cl, corev1.EventTypeNormal, "Restored", msg)
	out, err = wait(ctx, c, created, out, opts)
	if err == nil && out.Bound {
		// Bound: the volume holds the data, the source is free again.
		// Otherwise the mark stays: the claim that is not Bound keeps the
		// source too, and the mark expires (inventory.RestoringFor).
		unmarkSource(ctx, c, plan, mark, opts)
	}
	return out, err
}

// read lists what Plan needs: the namespace's claims, classified, and its
// snapshots with their templates and contents.
func read(ctx context.Context, c *kube.Clients, req Request, opts Options) ([]Snapshot, map[string]inventory.Content, []Claim, error) {
	scope := kube.Scope{Namespaces: []string{req.Namespace}, WorkspaceLabel: opts.Policy.WorkspaceLabel, PageSize: opts.PageSize}
	if req.VolumeLabel != "" {
		// The claims' roles: the read keeps these labels of a claim.
		scope.NotifyLabels = []string{req.VolumeLabel}
	}
	inv, err := kube.Read(ctx, c, scope)
	if err != nil {
		return nil, nil, nil, err
	}
	now := c.Clock.Latest()
	ds := classify.Classify(inv, opts.Policy, now)
	claims := make([]Claim, 0, len(ds))
	for i := range ds {
		cl := ClaimOf(&ds[i], now)
		if req.VolumeLabel != "" {
			cl.Role = ds[i].Claim.Labels.Notify[req.VolumeLabel]
		}
		claims = append(claims, cl)
	}
	var list *snapv1.VolumeSnapshotList
	err = c.Retry.Do(ctx, "list snapshots in "+req.Namespace, func(ctx context.Context) error {
		var err error
		list, err = c.Snap.SnapshotV1().VolumeSnapshots(req.Namespace).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return nil, nil, nil, &kube.ReadError{What: "snapshots in " + req.Namespace, Err: err}
	}
	snaps := make([]Snapshot, 0, len(list.Items))
	for i := range list.Items {
		vs := &list.Items[i]
		s := Snapshot{Snapshot: kube.Snapshot(vs, opts.Policy.WorkspaceLabel), Template: vs.Annotations[AnnotationTemplate],
			Dropped: vs.Annotations[AnnotationTemplateDropped]}
		if vs.Status != nil && vs.Status.RestoreSize != nil {
			q := vs.Status.RestoreSize.DeepCopy()
			s.RestoreSize = &q
		}
		snaps = append(snaps, s)
	}
	sort.Slice(snaps, func(a, b int) bool { return snaps[a].Name < snaps[b].Name })
	return snaps, inv.Contents, claims, nil
}

// create creates the planned claim. A create whose response was lost and
// whose retry finds the name taken is settled by reading the claim: ours
// when it restores from the same snapshot and was created just now.
func create(ctx context.Context, c *kube.Clients, plan *Result, opts Options) (*corev1.PersistentVolumeClaim, error) {
	ns, name := plan.Claim.Namespace, plan.Claim.Name
	var got *corev1.PersistentVolumeClaim
	attempts := 0
	err := c.Retry.Do(ctx, "create claim "+ns+"/"+name, func(ctx context.Context) error {
		attempts++
		var err error
		got, err = c.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, plan.Claim, metav1.CreateOptions{})
		return err
	})
	if apierrors.IsAlreadyExists(err) {
		if attempts > 1 {
			cur, gerr := c.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if gerr == nil && cur.Annotations[AnnotationRestoredFrom] == plan.Snapshot.Name &&
				cur.Spec.DataSourceRef != nil && cur.Spec.DataSourceRef.Name == plan.Snapshot.Name {
				return cur, nil
			}
		}
		return nil, &Refusal{Reason: "claim " + ns + "/" + name + " exists: restore under another name with --as"}
	}
	if err != nil {
		return nil, err
	}
	return got, nil
}

// wait waits for the claim to be Bound, bounded by opts.Timeout, unless its
// class binds on first use.
func wait(ctx context.Context, c *kube.Clients, pvc *corev1.PersistentVolumeClaim, out *Outcome, opts Options) (*Outcome, error) {
	if wffc(ctx, c, pvc, opts) {
		out.WaitsForConsumer = true
		out.Message = "created; its StorageClass binds it when a pod first uses it (WaitForFirstConsumer)"
		return out, nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	poll := opts.Poll
	if poll <= 0 {
		poll = time.Second
	}
	err := retry.Poll(ctx, poll, time.Now().Add(timeout), func(ctx context.Context) (bool, error) {
		cur, err := c.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil || cur.UID != pvc.UID || cur.Status.Phase != corev1.ClaimBound {
			return false, nil // a failed read is read again: only the deadline ends the wait
		}
		out.Bound = true
		out.Message = "Bound to volume " + cur.Spec.VolumeName
		return true, nil
	})
	if errors.Is(err, retry.ErrDeadline) {
		why := lastFailure(ctx, c, pvc)
		if why == "" {
			why = "no event from the provisioner"
		}
		return out, &ProvisionError{Msg: fmt.Sprintf("claim %s/%s created but not Bound after %s: %s", pvc.Namespace, pvc.Name, timeout, why)}
	}
	return out, err
}

// wffc reports whether the claim's StorageClass binds on first use.
func wffc(ctx context.Context, c *kube.Clients, pvc *corev1.PersistentVolumeClaim, opts Options) bool {
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return false
	}
	var sc *storagev1.StorageClass
	err := c.Retry.Do(ctx, "get storage class", func(ctx context.Context) error {
		var err error
		sc, err = c.Kube.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
		return err
	})
	return err == nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// lastFailure is the message of the claim's newest Warning event (the
// provisioner's ProvisioningFailed, say), "" when none can be read.
func lastFailure(ctx context.Context, c *kube.Clients, pvc *corev1.PersistentVolumeClaim) string {
	sel := fields.Set{"involvedObject.name": pvc.Name, "involvedObject.uid": string(pvc.UID), "type": corev1.EventTypeWarning}.AsSelector().String()
	l, err := c.Kube.CoreV1().Events(pvc.Namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(l.Items) == 0 {
		return ""
	}
	sort.Slice(l.Items, func(a, b int) bool { return eventTime(&l.Items[a]).Before(eventTime(&l.Items[b])) })
	e := &l.Items[len(l.Items)-1]
	return e.Reason + ": " + e.Message
}

func eventTime(e *corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// IsRefusal reports whether err is a refusal (exit 2, nothing written).
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}
