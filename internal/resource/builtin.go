package resource

import (
	"fmt"
	"sort"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/crdserver/crdserver/internal/conversion"
)

// Helpers for the built-in APIs' strategies, which work on Go types.

// DecodeStrict decodes an Object into a Go type, returning the strict
// decoding errors (unknown and duplicate fields) apart from a failure.
func DecodeStrict(obj *Object, into any) ([]error, error) {
	data, err := obj.Encode()
	if err != nil {
		return nil, err
	}
	return kjson.UnmarshalStrict(data, into)
}

// FromTyped replaces an Object's content and metadata with a Go object's
// (one whose metadata is an ObjectMeta). apiVersion and kind stay the
// Object's.
func FromTyped(typed any, obj *Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return err
	}
	delete(u, "metadata")
	u["apiVersion"], u["kind"] = obj.APIVersion(), obj.Kind()
	obj.Content = u
	if m, ok := typed.(interface{ GetObjectMeta() metav1.Object }); ok {
		if om, ok := m.GetObjectMeta().(*metav1.ObjectMeta); ok {
			obj.Meta = *om
		}
	}
	return nil
}

// ToTyped decodes an Object into a Go type (lax: unknown fields are
// dropped).
func ToTyped(obj *Object, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj.ToUnstructured(), into)
}

// BuiltinFieldManagers track the managedFields of a built-in kind with the
// schemas Kubernetes publishes for its types (builtinTypeConverter), so
// that lists and structs merge as on Kubernetes. With
// statusReset, the main resource does not own status and the status
// subresource owns nothing else, as for kinds with a status subresource.
func BuiltinFieldManagers(group, kind string, statusReset bool) *FieldManagers {
	return &FieldManagers{
		Group:         group,
		Kind:          kind,
		Converter:     conversion.None{},
		TypeConverter: builtinTypeConverter,
		ResetFields: func(sub, _ string) []string {
			switch {
			case !statusReset:
				return nil
			case sub == "status":
				return []string{"metadata", "spec"}
			}
			return []string{"status"}
		},
	}
}

// SortVersions orders versions by Kubernetes' version priority: GA before
// beta before alpha, higher numbers first, then other names alphabetically.
func SortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool {
		return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0
	})
}

// Typed decodes an Object into a new T of k8s.io/api (lax).
func Typed[T any](obj *Object) (*T, error) {
	t := new(T)
	return t, ToTyped(obj, t)
}

// EditTyped lets f change an Object through its Go type; an Object that
// does not decode is left alone (validation reports it).
func EditTyped[T any](obj *Object, f func(t *T)) {
	t, err := Typed[T](obj)
	if err != nil {
		return
	}
	f(t)
	_ = FromTyped(t, obj)
}

// NormalizeTyped is a Normalizer's work for a Go type: the body is decoded
// through T (unknown fields dropped and returned for field validation),
// defaulted by def (when not nil), and written back. A body that does not
// fit T is Kubernetes' 400 "<Kind> in version "<v>" cannot be handled as a
// <Kind>".
func NormalizeTyped[T any](obj *Object, kind, version string, def func(*T)) ([]error, error) {
	t := new(T)
	strict, err := DecodeStrict(obj, t)
	if err == nil {
		if def != nil {
			def(t)
		}
		err = FromTyped(t, obj)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", kind, version, kind, err))
	}
	return strict, nil
}

// builtinTypeConverter is the schema-aware type converter of the built-in
// types: client-go's structured-merge-diff schemas for the k8s.io/api
// groups, apiextensions-apiserver's for CRDs. Types are named through the
// scheme the built-in APIs register (AddProtobufTypes).
func builtinTypeConverter() (managedfields.TypeConverter, int64, error) {
	return builtinTypes(), 0, nil
}

// WarmBuiltinTypes builds the built-in types' type converter now (once per
// process). A server starting calls it in the background, beside the
// storage starting, as its own first writes (the system namespaces, the
// RBAC defaults) need it.
func WarmBuiltinTypes() { builtinTypes() }

var builtinTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return unionTypeConverter{
		kube:          newServedTypes(),
		apiextensions: newCRDTypes(),
	}
})

// unionTypeConverter picks the converter of an object's group.
type unionTypeConverter struct{ kube, apiextensions managedfields.TypeConverter }

func (u unionTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if obj.GetObjectKind().GroupVersionKind().Group == apiextensionsv1.GroupName {
		return u.apiextensions.ObjectToTyped(obj, opts...)
	}
	return u.kube.ObjectToTyped(obj, opts...)
}

func (u unionTypeConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return u.kube.TypedToObject(v)
}
