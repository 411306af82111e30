package apistub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v6/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group-resources the stubs name in their errors.
var (
	ClaimsGR   = schema.GroupResource{Resource: "persistentvolumeclaims"}
	SnapsGR    = schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"}
	ContentsGR = schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents"}
)

// WriteJSON answers code with v in JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteStatus answers with err's Status, as the API server does.
func WriteStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	WriteJSON(w, int(st.Code), &st)
}

// WriteSuccess answers a delete that was done.
func WriteSuccess(w http.ResponseWriter) {
	WriteJSON(w, 200, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
}

// WriteGet answers a GET of name from m, or a 404 of gr.
func WriteGet[T any](w http.ResponseWriter, m map[string]*T, name string, gr schema.GroupResource) {
	if o, ok := m[name]; ok {
		WriteJSON(w, 200, o)
		return
	}
	WriteStatus(w, apierrors.NewNotFound(gr, name))
}

// ContentList answers a list of contents by the field selector
// metadata.name=N: the one of that name, if any.
func ContentList(contents map[string]*snapshotv1.VolumeSnapshotContent, fieldSelector string) *snapshotv1.VolumeSnapshotContentList {
	l := &snapshotv1.VolumeSnapshotContentList{TypeMeta: metav1.TypeMeta{Kind: "VolumeSnapshotContentList", APIVersion: "snapshot.storage.k8s.io/v1"}}
	if c, ok := contents[strings.TrimPrefix(fieldSelector, "metadata.name=")]; ok {
		l.Items = append(l.Items, *c)
	}
	return l
}

// SortedValues are m's values in the order of their keys.
func SortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// ProtoMagic starts every protobuf response of the API server.
const ProtoMagic = "k8s\x00"

// WriteProtoList answers a list the scan streams as protobuf: the envelope
// (runtime.Unknown) of kind and the list's bytes.
func WriteProtoList(w http.ResponseWriter, apiVersion, kind string, list interface{ Marshal() ([]byte, error) }) {
	raw, err := list.Marshal()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw,
		ContentType: "application/vnd.kubernetes.protobuf"}).Marshal()
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
	_, _ = w.Write(append([]byte(ProtoMagic), env...))
}

// DecodeEvent reads an Event the janitor posts, in protobuf (the core
// kinds' encoding of kube.NewClients) or JSON.
func DecodeEvent(body []byte) (*corev1.Event, error) {
	ev := &corev1.Event{}
	if raw, ok := unwrap(body); ok {
		return ev, ev.Unmarshal(raw)
	}
	return ev, json.Unmarshal(body, ev)
}

// unwrap is the object's bytes of a protobuf body (false: not protobuf,
// or no envelope).
func unwrap(body []byte) ([]byte, bool) {
	if !bytes.HasPrefix(body, []byte(ProtoMagic)) {
		return nil, false
	}
	var u runtime.Unknown
	if err := u.Unmarshal(body[len(ProtoMagic):]); err != nil {
		return nil, false
	}
	return u.Raw, true
}

// ApplyJSONPatch applies the test, replace and remove operations of an RFC
// 6902 patch to obj into out, or answers 422 when one does not hold (400
// when the patch cannot be read).
func ApplyJSONPatch(w http.ResponseWriter, obj any, body []byte, out any) bool {
	var ops []jsonOp
	var doc map[string]any
	b, err := json.Marshal(obj)
	if err == nil {
		err = json.Unmarshal(b, &doc)
	}
	if err == nil {
		err = json.Unmarshal(body, &ops)
	}
	if err != nil {
		WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return false
	}
	for _, o := range ops {
		if !o.apply(w, doc) {
			return false
		}
	}
	b, _ = json.Marshal(doc)
	if err := json.Unmarshal(b, out); err != nil {
		WriteStatus(w, apierrors.NewBadRequest(err.Error()))
		return false
	}
	return true
}

type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// apply applies one operation to doc, or answers why not.
func (o jsonOp) apply(w http.ResponseWriter, doc map[string]any) bool {
	keys := strings.Split(strings.TrimPrefix(o.Path, "/"), "/")
	parent := doc
	for _, k := range keys[:len(keys)-1] {
		next, _ := parent[unescape(k)].(map[string]any)
		if next == nil {
			next = map[string]any{}
		}
		parent = next
	}
	last := unescape(keys[len(keys)-1])
	cur, exists := parent[last]
	switch {
	case o.Op != "test" && o.Op != "replace" && o.Op != "remove":
		WriteStatus(w, apierrors.NewBadRequest("the stub does not apply "+o.Op))
		return false
	case !exists || o.Op == "test" && fmt.Sprint(cur) != fmt.Sprint(o.Value):
		WriteStatus(w, apierrors.NewInvalid(schema.GroupKind{Kind: "Patch"}, o.Path, nil))
		return false
	case o.Op == "replace":
		parent[last] = o.Value
	case o.Op == "remove":
		delete(parent, last)
	}
	return true
}

func unescape(k string) string { return strings.NewReplacer("~1", "/", "~0", "~").Replace(k) }

// PatchSummary names what a patch does: "+key rv=N" (a merge patch of an
// annotation, at a resourceVersion), "-key" (a JSON patch removing an
// annotation), "deletionPolicy=X" (a JSON patch of a content's policy).
func PatchSummary(ctype string, body []byte) string {
	if strings.HasPrefix(ctype, "application/merge-patch+json") {
		var p struct {
			Metadata struct {
				ResourceVersion string            `json:"resourceVersion"`
				Annotations     map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(body, &p)
		var keys []string
		for k := range p.Metadata.Annotations {
			keys = append(keys, "+"+k)
		}
		slices.Sort(keys)
		return strings.Join(keys, " ") + " rv=" + p.Metadata.ResourceVersion
	}
	var ops []jsonOp
	_ = json.Unmarshal(body, &ops)
	var out []string
	for _, o := range ops {
		switch {
		case o.Op == "remove" && strings.HasPrefix(o.Path, "/metadata/annotations/"):
			out = append(out, "-"+unescape(strings.TrimPrefix(o.Path, "/metadata/annotations/")))
		case o.Op == "replace" && o.Path == "/spec/deletionPolicy":
			out = append(out, fmt.Sprintf("deletionPolicy=%v", o.Value))
		}
	}
	return strings.Join(out, " ")
}
