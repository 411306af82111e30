package wire

import "google.golang.org/protobuf/encoding/protowire"

// A PersistentVolume's spec carries its source, access modes, claim
// reference, node affinity and managedFields; the scan needs its name, its
// reclaim policy and its CSI driver and volume handle. WalkPV reads those
// straight from the protobuf bytes, as WalkPod does for pods: decoding
// whole volumes was a tenth of a scan's garbage at 10k claims.

// Field numbers from k8s.io/api/core/v1/generated.proto (checked against
// client-go's own decoding by TestWalkPVAgreesWithTheDecoder).
const (
	pvMetadata      = 1  // PersistentVolume.metadata
	pvSpec          = 2  // PersistentVolume.spec
	pvSpecSource    = 2  // PersistentVolumeSpec.persistentVolumeSource (inline)
	pvSpecReclaim   = 5  // PersistentVolumeSpec.persistentVolumeReclaimPolicy
	pvSourceCSI     = 22 // PersistentVolumeSource.csi
	csiDriver       = 1  // CSIPersistentVolumeSource.driver
	csiVolumeHandle = 2  // CSIPersistentVolumeSource.volumeHandle
	pvMetaName      = metaName
)

// PV is what the scan keeps of a PersistentVolume, as views into its bytes.
// CSI is false for a volume without a CSI source (Driver and Handle nil).
type PV struct {
	Name, ReclaimPolicy, Driver, Handle []byte
	CSI                                 bool
}

// WalkPV reads a PersistentVolume's protobuf bytes into p. The views are
// valid as long as b is.
func WalkPV(b []byte, p *PV) error {
	*p = PV{}
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case pvMetadata:
			name, err := lastField(v, pvMetaName)
			p.Name = name
			return err
		case pvSpec:
			return p.walkSpec(v)
		}
		return nil
	})
}

// walkSpec reads the reclaim policy and the CSI source of a spec.
func (p *PV) walkSpec(b []byte) error {
	return eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case pvSpecReclaim:
			p.ReclaimPolicy = v
		case pvSpecSource:
			csi, err := lastField(v, pvSourceCSI)
			if err != nil || csi == nil {
				return err
			}
			p.CSI = true
			return eachField(csi, func(num protowire.Number, v []byte) error {
				switch num {
				case csiDriver:
					p.Driver = v
				case csiVolumeHandle:
					p.Handle = v
				}
				return nil
			})
		}
		return nil
	})
}
