//go:build integration

package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v6/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Names of the cluster-wide storage objects every local cluster has.
const (
	// StorageClassName is the class of the fixtures' CSI volumes, which
	// are made by hand and pre-bound (Fixtures.BoundClaim; reclaimPolicy
	// Retain). Its provisioner is the driver, so csi-provisioner provisions
	// a claim of it that is not pre-bound (a generic ephemeral volume's).
	StorageClassName = "csi-hostpath"
	// ProvisionedStorageClassName is the class of dynamically provisioned
	// volumes: csi-provisioner provisions its claims through the driver
	// (reclaimPolicy Delete: deleting the claim deletes the volume and its
	// files; immediate binding). Fixtures.ProvisionedClaim makes them.
	ProvisionedStorageClassName = "pvc-janitor-csi"
	// SnapshotClassRetain is the default VolumeSnapshotClass (deletionPolicy Retain).
	SnapshotClassRetain = "csi-hostpath-retain"
	// SnapshotClassDelete is a non-default class with deletionPolicy Delete.
	SnapshotClassDelete = "csi-hostpath-delete"
)

func readyz(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			select {
			case <-p.done:
				return false, fmt.Errorf("%s exited during start; see %s", p.name, filepath.Join(c.Dir, "logs", p.name+".log"))
			default:
			}
		}
		last = readyz(ctx, c.Config)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready (last: %v): %w; see %s", last, err, filepath.Join(c.Dir, "logs"))
	}
	return nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRDs creates the VolumeSnapshot CRDs and waits until they are
// established, so that the snapshot controllers start against served APIs.
func applyCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "snapshot.storage.k8s.io_*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no snapshot CRDs in %s", dir)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			return fmt.Errorf("parse %s: %w", f, err)
		}
		names = append(names, obj.GetName())
		if _, err := dyn.Resource(crdGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, n := range names {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", n, err)
		}
	}
	return nil
}

// createStorageObjects creates the StorageClass of the fixtures' volumes, the
// one csi-provisioner provisions, and the two VolumeSnapshotClasses of the
// driver: the default one with deletionPolicy Retain and a non-default one
// with Delete.
func createStorageObjects(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	immediate := storagev1.VolumeBindingImmediate
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClassName},
		Provisioner:       DriverName,
		VolumeBindingMode: &immediate,
		ReclaimPolicy:     &retain,
	}
	del := corev1.PersistentVolumeReclaimDelete
	provisioned := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: ProvisionedStorageClassName},
		Provisioner:       DriverName,
		VolumeBindingMode: &immediate,
		ReclaimPolicy:     &del,
	}
	for _, sc := range []*storagev1.StorageClass{sc, provisioned} {
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create StorageClass %s: %w", sc.Name, err)
		}
	}
	sn, err := snapclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, vsc := range []*snapv1.VolumeSnapshotClass{
		{
			ObjectMeta:     metav1.ObjectMeta{Name: SnapshotClassRetain, Annotations: map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}},
			Driver:         DriverName,
			DeletionPolicy: snapv1.VolumeSnapshotContentRetain,
		},
		{
			ObjectMeta:     metav1.ObjectMeta{Name: SnapshotClassDelete},
			Driver:         DriverName,
			DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
		},
	} {
		if _, err := sn.SnapshotV1().VolumeSnapshotClasses().Create(ctx, vsc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create VolumeSnapshotClass %s: %w", vsc.Name, err)
		}
	}
	return nil
}

// waitDefaultServiceAccount waits for the serviceaccount controller: until it
// has created "default" in namespace default, pods are refused.
func waitDefaultServiceAccount(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager did not create the default ServiceAccount: %w", err)
	}
	return nil
}
