package wire

import "google.golang.org/protobuf/encoding/protowire"

// A pod is by far the largest object the scan reads (containers, env,
// probes, managedFields: 8 KB is common), and all the scan needs of it is
// its name, namespace, UID and the claims its volumes name. Decoding whole
// pods was half of a scan's CPU and most of its garbage; WalkPod reads those
// few fields straight from the protobuf bytes and skips the rest.

// Field numbers from k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto (checked against
// client-go's own decoding by TestWalkPodAgreesWithTheDecoder).
const (
	podMetadata        = 1  // Pod.metadata
	podSpec            = 2  // Pod.spec
	podStatus          = 3  // Pod.status
	statusPhase        = 1  // PodStatus.phase
	metaCreation       = 8  // ObjectMeta.creationTimestamp
	timeSeconds        = 1  // Time.seconds
	metaName           = 1  // ObjectMeta.name
	metaNamespace      = 3  // ObjectMeta.namespace
	metaUID            = 5  // ObjectMeta.uid
	specVolumes        = 1  // PodSpec.volumes
	volumeName         = 1  // Volume.name
	volumeSource       = 2  // Volume.volumeSource
	sourcePVC          = 10 // VolumeSource.persistentVolumeClaim
	sourceEphemeral    = 29 // VolumeSource.ephemeral
	pvcSourceClaimName = 1  // PersistentVolumeClaimVolumeSource.claimName
)

// PodVolume is a volume of a pod that names a claim: Claim is set for a
// persistentVolumeClaim source (possibly empty), Ephemeral for a generic
// ephemeral volume (whose claim is <pod>-<volume>).
type PodVolume struct {
	Name, Claim []byte
	Ephemeral   bool
}

// Pod is what the scan keeps of a pod, as views into its bytes. The
// creation time and phase serve the check that the controller manager
// maintains the Unused condition (docs/spec.md#marks).
type Pod struct {
	Namespace, Name, UID, Phase []byte
	// Created is metadata.creationTimestamp in Unix seconds (0 if unset).
	Created int64
	Volumes []PodVolume
}

// WalkPod reads a Pod's protobuf bytes into p, reusing p's volume slice.
// The views are valid as long as b is.
func WalkPod(b []byte, p *Pod) error {
	p.Namespace, p.Name, p.UID, p.Phase = nil, nil, nil, nil
	p.Created = 0
	p.Volumes = p.Volumes[:0]
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podMetadata:
			return p.walkMeta(v)
		case podStatus:
			ph, err := lastField(v, statusPhase)
			if err != nil {
				return err
			}
			p.Phase = ph
			return nil
		case podSpec:
			return p.walkSpec(v)
		}
		return nil
	})
}

// walkMeta reads the ObjectMeta fields the scan needs.
func (p *Pod) walkMeta(b []byte) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case metaName:
			p.Name = v
		case metaNamespace:
			p.Namespace = v
		case metaUID:
			p.UID = v
		case metaCreation:
			sec, err := varintField(v, timeSeconds)
			if err != nil {
				return err
			}
			p.Created = sec
		}
		return nil
	})
}

// walkSpec keeps the volumes of the PodSpec that name a claim.
func (p *Pod) walkSpec(b []byte) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		if num != specVolumes {
			return nil
		}
		vol, err := walkVolume(v)
		if err == nil && (vol.Claim != nil || vol.Ephemeral) {
			p.Volumes = append(p.Volumes, vol)
		}
		return err
	})
}

// walkVolume reads one Volume: its name and, if any, the claim it names.
func walkVolume(b []byte) (PodVolume, error) {
	var vol PodVolume
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case volumeName:
			vol.Name = v
		case volumeSource:
			return vol.walkSource(v)
		}
		return nil
	})
	return vol, err
}

// walkSource reads a VolumeSource: a persistentVolumeClaim source names its
// claim (an absent claimName is the empty name, never no claim), an
// ephemeral one names the pod's own.
func (vol *PodVolume) walkSource(b []byte) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case sourcePVC:
			c, err := lastField(v, pvcSourceClaimName)
			if err != nil {
				return err
			}
			if c == nil {
				c = []byte{}
			}
			vol.Claim = c
		case sourceEphemeral:
			vol.Ephemeral = true
		}
		return nil
	})
}
