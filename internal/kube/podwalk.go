package kube

import "google.golang.org/protobuf/encoding/protowire"

// A pod is by far the largest object the scan reads (containers, env,
// probes, managedFields: 8 KB is common), and all the scan needs of it is
// its name, namespace, UID and the claims its volumes name. Decoding whole
// pods was half of a scan's CPU and most of its garbage; walkPod reads those
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

// podVolume is a volume of a pod that names a claim: claim is set for a
// persistentVolumeClaim source (possibly empty), ephemeral for a generic
// ephemeral volume (whose claim is <pod>-<volume>).
type podVolume struct {
	name, claim []byte
	ephemeral   bool
}

// walkedPod is what the scan keeps of a pod, as views into its bytes. The
// creation time and phase serve the check that the controller manager
// maintains the Unused condition (SPEC §3 Marks).
type walkedPod struct {
	namespace, name, uid, phase []byte
	// created is metadata.creationTimestamp in Unix seconds (0 if unset).
	created int64
	volumes []podVolume
}

// walkPod reads a Pod's protobuf bytes into p, reusing p's volume slice.
// The views are valid as long as b is.
func walkPod(b []byte, p *walkedPod) error {
	p.namespace, p.name, p.uid, p.phase = nil, nil, nil, nil
	p.created = 0
	p.volumes = p.volumes[:0]
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podMetadata:
			return eachField(v, func(num protowire.Number, v []byte) error {
				switch num {
				case metaName:
					p.name = v
				case metaNamespace:
					p.namespace = v
				case metaUID:
					p.uid = v
				case metaCreation:
					sec, err := varintField(v, timeSeconds)
					if err != nil {
						return err
					}
					p.created = sec
				}
				return nil
			})
		case podStatus:
			ph, err := lastField(v, statusPhase)
			if err != nil {
				return err
			}
			p.phase = ph
			return nil
		case podSpec:
			return eachField(v, func(num protowire.Number, v []byte) error {
				if num != specVolumes {
					return nil
				}
				var vol podVolume
				err := eachField(v, func(num protowire.Number, v []byte) error {
					switch num {
					case volumeName:
						vol.name = v
					case volumeSource:
						return eachField(v, func(num protowire.Number, v []byte) error {
							switch num {
							case sourcePVC:
								c, err := lastField(v, pvcSourceClaimName)
								if err != nil {
									return err
								}
								if c == nil {
									c = []byte{}
								}
								vol.claim = c
							case sourceEphemeral:
								vol.ephemeral = true
							}
							return nil
						})
					}
					return nil
				})
				if err == nil && (vol.claim != nil || vol.ephemeral) {
					p.volumes = append(p.volumes, vol)
				}
				return err
			})
		}
		return nil
	})
}

// varintField returns the last varint field num of message b (0 when absent).
func varintField(b []byte, num protowire.Number) (int64, error) {
	var out int64
	for len(b) > 0 {
		n, typ, m := protowire.ConsumeTag(b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		b = b[m:]
		if n == num && typ == protowire.VarintType {
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return 0, protowire.ParseError(k)
			}
			out = int64(v)
			b = b[k:]
			continue
		}
		k := protowire.ConsumeFieldValue(n, typ, b)
		if k < 0 {
			return 0, protowire.ParseError(k)
		}
		b = b[k:]
	}
	return out, nil
}
