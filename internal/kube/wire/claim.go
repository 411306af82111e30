package wire

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// A claim is small, but its ObjectMeta is not: managedFields (a JSON
// document per manager), every label and annotation, the finalizers.
// Decoding whole claims was the largest allocation left in a scan at 10k
// (26 MB, docs/benchmarks.md); WalkClaim reads the fields the inventory
// keeps straight from the protobuf bytes, as WalkPod and WalkPV do.
//
// The janitor deletes claims on what these fields say, so the walk reads
// them as client-go's generated decoder does (k8s.io/api/core/v1
// generated.pb.go), and where the two could differ on malformed bytes it
// refuses them: a field it reads that comes with another wire type is an
// error, never a field read as absent. Fields it skips are not validated
// (a quantity in spec.resources, a managedFields entry), as for pods.

// Field numbers from k8s.io/api/core/v1/generated.proto and
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto (checked against
// client-go's own decoding by kube's TestWalkClaimAgreesWithTheDecoder).
const (
	claimMetadata       = 1  // PersistentVolumeClaim.metadata
	claimSpec           = 2  // PersistentVolumeClaim.spec
	claimStatus         = 3  // PersistentVolumeClaim.status
	metaResourceVersion = 6  // ObjectMeta.resourceVersion
	metaDeletion        = 9  // ObjectMeta.deletionTimestamp
	metaLabels          = 11 // ObjectMeta.labels
	metaAnnotations     = 12 // ObjectMeta.annotations
	metaOwners          = 13 // ObjectMeta.ownerReferences
	entryKey            = 1  // a map entry's key
	entryValue          = 2  // a map entry's value
	ownerKind           = 1  // OwnerReference.kind
	ownerName           = 3  // OwnerReference.name
	ownerUID            = 4  // OwnerReference.uid
	ownerAPIVersion     = 5  // OwnerReference.apiVersion
	specVolumeName      = 3  // PersistentVolumeClaimSpec.volumeName
	specClass           = 5  // PersistentVolumeClaimSpec.storageClassName
	specAttributesClass = 9  // PersistentVolumeClaimSpec.volumeAttributesClassName
	specDataSource      = 7  // PersistentVolumeClaimSpec.dataSource
	specDataSourceRef   = 8  // PersistentVolumeClaimSpec.dataSourceRef
	refKind             = 2  // TypedLocalObjectReference.kind, TypedObjectReference.kind
	refName             = 3  // TypedLocalObjectReference.name, TypedObjectReference.name
	refNamespace        = 4  // TypedObjectReference.namespace
	claimPhase          = 1  // PersistentVolumeClaimStatus.phase
	claimCapacity       = 3  // PersistentVolumeClaimStatus.capacity
	claimConditions     = 4  // PersistentVolumeClaimStatus.conditions
	condType            = 1  // PersistentVolumeClaimCondition.type
	condStatus          = 2  // PersistentVolumeClaimCondition.status
	condTransition      = 4  // PersistentVolumeClaimCondition.lastTransitionTime
	timeNanos           = 2  // Time.nanos
)

// The fields each message's walk reads (readFields checks their wire type).
var (
	claimRead     = bits(claimMetadata, claimSpec, claimStatus)
	claimMetaRead = bits(metaName, metaNamespace, metaUID, metaResourceVersion, metaCreation, metaDeletion,
		metaLabels, metaAnnotations, metaOwners)
	claimSpecRead   = bits(specVolumeName, specClass, specAttributesClass, specDataSource, specDataSourceRef)
	refRead         = bits(refKind, refName, refNamespace)
	claimStatusRead = bits(claimPhase, claimCapacity, claimConditions)
	entryRead       = bits(entryKey, entryValue)
	ownerRead       = bits(ownerKind, ownerName, ownerUID, ownerAPIVersion)
	condRead        = bits(condType, condStatus, condTransition)
)

// KV is one entry of a map field, in the order of the bytes: a key that
// comes twice is the last one's (the decoder's map assignment).
type KV struct{ Key, Value []byte }

// Owner is an ownerReference of a claim.
type Owner struct{ APIVersion, Kind, Name, UID []byte }

// Ref is a typed object reference (Namespace only for dataSourceRef).
type Ref struct{ Kind, Name, Namespace []byte }

// Condition is one of a claim's status conditions.
type Condition struct {
	Type, Status   []byte
	LastTransition time.Time
}

// Claim is what the scan keeps of a PersistentVolumeClaim, as views into its
// bytes (times decoded as metav1.Time decodes them). A field that is absent
// is nil; StorageClass is nil for a claim without storageClassName and
// empty for storageClassName "" (the inventory reads both as "").
type Claim struct {
	Namespace, Name, UID, ResourceVersion []byte
	Created                               time.Time
	// Deletion is metadata.deletionTimestamp, when Deleting.
	Deletion                            time.Time
	Deleting                            bool
	Labels, Annotations                 []KV
	Owners                              []Owner
	VolumeName, StorageClass, AttrClass []byte
	// DataSource and DataSourceRef are spec.dataSource and
	// spec.dataSourceRef: what the claim was created from.
	DataSource, DataSourceRef Ref
	Phase                     []byte
	Conditions                []Condition
	// Capacity holds status.capacity: each value is a Quantity message
	// (resource.Quantity.Unmarshal reads it).
	Capacity []KV
}

// reset empties c, keeping its slices' arrays.
func (c *Claim) reset() {
	*c = Claim{Labels: c.Labels[:0], Annotations: c.Annotations[:0], Owners: c.Owners[:0],
		Conditions: c.Conditions[:0], Capacity: c.Capacity[:0]}
}

// WalkClaim reads a PersistentVolumeClaim's protobuf bytes into c, reusing
// c's slices. The views are valid as long as b is. A message that comes
// twice (metadata, spec, status) is merged, as the decoder merges it.
func WalkClaim(b []byte, c *Claim) error {
	c.reset()
	return readFields(b, claimRead, func(num protowire.Number, v []byte) error {
		switch num {
		case claimMetadata:
			return c.walkMeta(v)
		case claimSpec:
			return readFields(v, claimSpecRead, func(num protowire.Number, v []byte) error {
				switch num {
				case specVolumeName:
					c.VolumeName = v
				case specClass:
					c.StorageClass = present(v)
				case specAttributesClass:
					c.AttrClass = present(v)
				case specDataSource:
					return readRef(v, &c.DataSource)
				case specDataSourceRef:
					return readRef(v, &c.DataSourceRef)
				}
				return nil
			})
		case claimStatus:
			return c.walkStatus(v)
		}
		return nil
	})
}

// readRef reads a typed object reference; a message that comes twice is
// merged, as the decoder merges it.
func readRef(b []byte, r *Ref) error {
	return readFields(b, refRead, func(num protowire.Number, v []byte) error {
		switch num {
		case refKind:
			r.Kind = v
		case refName:
			r.Name = v
		case refNamespace:
			r.Namespace = v
		}
		return nil
	})
}

// walkMeta reads the ObjectMeta fields the inventory keeps.
func (c *Claim) walkMeta(b []byte) error {
	return readFields(b, claimMetaRead, func(num protowire.Number, v []byte) error {
		var err error
		switch num {
		case metaName:
			c.Name = v
		case metaNamespace:
			c.Namespace = v
		case metaUID:
			c.UID = v
		case metaResourceVersion:
			c.ResourceVersion = v
		case metaCreation:
			c.Created, err = readTime(v)
		case metaDeletion:
			c.Deletion, err = readTime(v)
			c.Deleting = true
		case metaLabels:
			c.Labels, err = appendEntry(c.Labels, v)
		case metaAnnotations:
			c.Annotations, err = appendEntry(c.Annotations, v)
		case metaOwners:
			var o Owner
			err = readFields(v, ownerRead, func(num protowire.Number, v []byte) error {
				switch num {
				case ownerKind:
					o.Kind = v
				case ownerName:
					o.Name = v
				case ownerUID:
					o.UID = v
				case ownerAPIVersion:
					o.APIVersion = v
				}
				return nil
			})
			c.Owners = append(c.Owners, o)
		}
		return err
	})
}

// walkStatus reads the phase, the capacity and the conditions.
func (c *Claim) walkStatus(b []byte) error {
	return readFields(b, claimStatusRead, func(num protowire.Number, v []byte) error {
		var err error
		switch num {
		case claimPhase:
			c.Phase = v
		case claimCapacity:
			c.Capacity, err = appendEntry(c.Capacity, v)
		case claimConditions:
			var cond Condition
			err = readFields(v, condRead, func(num protowire.Number, v []byte) error {
				var err error
				switch num {
				case condType:
					cond.Type = v
				case condStatus:
					cond.Status = v
				case condTransition:
					cond.LastTransition, err = readTime(v)
				}
				return err
			})
			c.Conditions = append(c.Conditions, cond)
		}
		return err
	})
}

// appendEntry appends a map entry to kvs. An entry without a key or value
// has the empty one, as in the decoder; within an entry the last key and
// the last value win.
func appendEntry(kvs []KV, b []byte) ([]KV, error) {
	var kv KV
	err := readFields(b, entryRead, func(num protowire.Number, v []byte) error {
		if num == entryKey {
			kv.Key = v
		} else {
			kv.Value = v
		}
		return nil
	})
	return append(kvs, kv), err
}

// readTime reads a metav1.Time as metav1.Time.Unmarshal does: an empty
// message is the zero time; otherwise whole seconds in the local zone, the
// nanoseconds dropped (the JSON form carries none, so neither does the
// decoder's value). Both fields must be varints, as the decoder wants.
func readTime(b []byte) (time.Time, error) {
	if len(b) == 0 {
		return time.Time{}, nil
	}
	var sec int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return time.Time{}, protowire.ParseError(n)
		}
		b = b[n:]
		if num == timeSeconds || num == timeNanos {
			if typ != protowire.VarintType {
				return time.Time{}, fmt.Errorf("protobuf: a time's field %d has wire type %d", num, typ)
			}
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return time.Time{}, protowire.ParseError(m)
			}
			if num == timeSeconds {
				sec = int64(v)
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return time.Time{}, protowire.ParseError(m)
		}
		b = b[m:]
	}
	return time.Unix(sec, 0).Local(), nil
}

// readFields calls fn with each field of b whose number is in read (a set
// of numbers below 64, from bits), all length-delimited: one of them with
// another wire type is an error (the decoder refuses it, or in a map entry
// reads it as a length anyway). Other fields are skipped unread. A
// malformed message is an error.
func readFields(b []byte, read uint64, fn func(protowire.Number, []byte) error) error {
	return walkFields(b, read, fn)
}

// bits is the set of field numbers nums (each below 64) for readFields.
func bits(nums ...protowire.Number) uint64 {
	var s uint64
	for _, n := range nums {
		s |= 1 << n
	}
	return s
}

// present returns v, never nil: a field that is there, if empty, is not an
// absent one.
func present(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}
