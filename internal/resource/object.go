package resource

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"unique"

	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/store"
)

// Object is an object on the write path: its metadata typed, everything
// else as decoded JSON (integers as int64).
type Object struct {
	// Content holds every top-level field but metadata.
	Content map[string]any
	Meta    metav1.ObjectMeta
}

// NewObject splits decoded JSON into an Object. Metadata that does not
// have ObjectMeta's shape is a field error on "metadata".
func NewObject(content map[string]any) (*Object, field.ErrorList) {
	o := &Object{Content: content}
	raw, ok := content["metadata"]
	delete(content, "metadata")
	if !ok || raw == nil {
		return o, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, fmt.Sprintf("expected map[string]interface{}, got %T", raw))}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &o.Meta); err != nil {
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata"), raw, err.Error())}
	}
	return o, nil
}

// DecodeStoredObject decodes a stored object into an Object, reading its
// metadata as Kubernetes' storage decoder does: a field of ObjectMeta that
// does not decode (written to etcd by other means) is dropped rather than
// failing the read.
func DecodeStoredObject(data []byte) (*Object, error) {
	o, err := DecodeObject(data)
	if err == nil {
		return o, nil
	}
	var content map[string]any
	if uerr := utiljson.Unmarshal(data, &content); uerr != nil {
		return nil, uerr
	}
	meta, found, _, merr := schemaobjectmeta.GetObjectMetaWithOptions(content, schemaobjectmeta.ObjectMetaOptions{DropMalformedFields: true})
	if merr != nil {
		return nil, err
	}
	delete(content, "metadata")
	o = &Object{Content: content}
	if found && meta != nil {
		o.Meta = *meta
	}
	return o, nil
}

// DecodeObject decodes stored or encoded JSON into an Object.
func DecodeObject(data []byte) (*Object, error) {
	var content map[string]any
	if err := utiljson.Unmarshal(data, &content); err != nil {
		return nil, err
	}
	o, errs := NewObject(content)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return o, nil
}

// APIVersion returns the object's apiVersion.
func (o *Object) APIVersion() string { s, _ := o.Content["apiVersion"].(string); return s }

// Kind returns the object's kind.
func (o *Object) Kind() string { s, _ := o.Content["kind"].(string); return s }

// SetAPIVersion sets the object's apiVersion.
func (o *Object) SetAPIVersion(v string) { o.Content["apiVersion"] = v }

// Encode returns the object as JSON.
func (o *Object) Encode() ([]byte, error) {
	m := maps.Clone(o.Content)
	m["metadata"] = &o.Meta
	return json.Marshal(m)
}

// encodeForStorage encodes the object without its resourceVersion, which
// etcd's revision replaces.
func (o *Object) encodeForStorage() ([]byte, error) {
	rv := o.Meta.ResourceVersion
	o.Meta.ResourceVersion = ""
	b, err := o.Encode()
	o.Meta.ResourceVersion = rv
	return b, err
}

// DeepCopy returns an independent copy.
func (o *Object) DeepCopy() *Object {
	return &Object{Content: runtime.DeepCopyJSON(o.Content), Meta: *o.Meta.DeepCopy()}
}

// ToUnstructured returns the whole object as a JSON-like map.
func (o *Object) ToUnstructured() map[string]any {
	m := maps.Clone(o.Content)
	md, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&o.Meta)
	m["metadata"] = md
	return m
}

// ParseResourceVersion parses a resourceVersion; "" is 0.
func ParseResourceVersion(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, err
	}
	return int64(n), nil
}

// itemMeta is the part of an object the cache indexes.
type itemMeta struct {
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name              string                  `json:"name"`
		Namespace         string                  `json:"namespace"`
		UID               string                  `json:"uid"`
		Labels            map[string]string       `json:"labels"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
		Finalizers        []string                `json:"finalizers"`
		DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
		ManagedFields     []struct {
			Manager    string `json:"manager"`
			APIVersion string `json:"apiVersion"`
		} `json:"managedFields"`
	} `json:"metadata"`
}

// Owner is one ownerReference of an object.
type Owner struct {
	APIVersion, Kind, Name, UID string
	BlockOwnerDeletion          bool
}

// Lifecycle is what an object's metadata says of its life: its owners,
// its finalizers and whether its deletion was requested. DecodeItem keeps it
// in the cache item (store.Item.Meta) of objects that have any of it;
// LifecycleOf reads it back.
type Lifecycle struct {
	Owners     []Owner
	Finalizers []string
	Deleting   bool
	// Versions: see VersionsOf.
	Versions *Versions
}

var noLifecycle = &Lifecycle{}

// LifecycleOf returns an item's Lifecycle (never nil).
func LifecycleOf(it *store.Item) *Lifecycle {
	if l, ok := it.Meta.(*Lifecycle); ok {
		return l
	}
	return noLifecycle
}

// keyTail returns name as the end of key (a Kubernetes key ends with the
// object's name), so that an item's name costs nothing beside its key.
func keyTail(key, name string) string {
	if len(name) < len(key) && key[len(key)-len(name)-1] == '/' && key[len(key)-len(name):] == name {
		return key[len(key)-len(name):]
	}
	return name
}

// sharedString returns the one copy of s the process keeps while it is in
// use (namespaces: many objects share each).
func sharedString(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// DecodeItem turns a stored value into a cache Item: the JSON with its
// resourceVersion set, the metadata selectors need, and its Lifecycle.
func DecodeItem(key string, value []byte, rev int64) (*store.Item, error) {
	var m itemMeta
	if err := json.Unmarshal(value, &m); err != nil {
		// Metadata that does not decode (written to etcd by other means)
		// is read as Kubernetes reads it: what does not decode is dropped.
		o, derr := DecodeStoredObject(value)
		if derr != nil {
			return nil, err
		}
		md := &m.Metadata
		m.APIVersion = o.APIVersion()
		md.Name, md.Namespace, md.UID, md.Labels = o.Meta.Name, o.Meta.Namespace, string(o.Meta.UID), o.Meta.Labels
		md.OwnerReferences, md.Finalizers, md.DeletionTimestamp = o.Meta.OwnerReferences, o.Meta.Finalizers, o.Meta.DeletionTimestamp
	}
	raw, err := jsonraw.SetResourceVersion(value, rev)
	if err != nil {
		return nil, err
	}
	it := &store.Item{
		Key:       key,
		Namespace: sharedString(m.Metadata.Namespace),
		Name:      keyTail(key, m.Metadata.Name),
		UID:       m.Metadata.UID,
		Labels:    sharedLabels(m.Metadata.Labels),
		Rev:       rev,
		Raw:       raw,
	}
	md := m.Metadata
	vs := m.versions()
	it.Meta = vs
	if len(md.OwnerReferences) > 0 || len(md.Finalizers) > 0 || md.DeletionTimestamp != nil {
		l := &Lifecycle{Finalizers: md.Finalizers, Deleting: md.DeletionTimestamp != nil, Versions: vs}
		for _, o := range md.OwnerReferences {
			l.Owners = append(l.Owners, Owner{
				APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: string(o.UID),
				BlockOwnerDeletion: o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion,
			})
		}
		it.Meta = l
	}
	return it, nil
}
