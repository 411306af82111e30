package rescue

import (
	"context"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"

	"github.com/pvc-janitor/pvc-janitor/internal/inventory"
	"github.com/pvc-janitor/pvc-janitor/internal/kube"
)

// ErrReplaced and RecordTemplate let the cluster tests (package
// rescue_test, which imports testenv, which imports rescue) reach the
// template's re-read of the claim.
var ErrReplaced = errReplaced

func RecordTemplate(ctx context.Context, c *kube.Clients, cl *inventory.Claim, vs *snapv1.VolumeSnapshot) error {
	r := &rescuer{c: c}
	return r.template(ctx, cl, vs)
}
