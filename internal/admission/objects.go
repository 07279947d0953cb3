package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// ResourceFuncs is what admission needs of the resource of a request, whose
// objects are *unstructured.Unstructured in every version.
type ResourceFuncs struct {
	// Convert returns obj converted to the version to, with the server's
	// conversion of the resource (a CRD's None, Webhook or rules; the
	// conversion of a built-in resource); obj must not be changed. It is
	// called when a policy or webhook matches another version than the
	// request's (matchPolicy Equivalent, or rules naming that version).
	// Nil: the resource has one version.
	Convert func(obj *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error)
	// Default applies the defaults of obj's version in place (a CRD's
	// structural defaults), as Kubernetes defaults a patched object after
	// each mutating webhook and policy. Optional.
	Default func(obj *unstructured.Unstructured)
	// EquivalentResources lists the resources that serve the same objects
	// as resource/subresource (its other versions, other groups serving
	// them), the resource itself included. Nil: only itself.
	EquivalentResources func(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource
	// KindFor is the kind of resource/subresource (one of the equivalent
	// resources), or the zero kind when it is unknown.
	KindFor func(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind
}

// NewObjectInterfaces returns the admission.ObjectInterfaces of a resource:
// it creates, types, defaults and converts *unstructured.Unstructured
// objects with f, as kube-apiserver's custom resource handler does.
func NewObjectInterfaces(f ResourceFuncs) admission.ObjectInterfaces {
	return objectInterfaces{f: f}
}

// objectInterfaces is at once the ObjectCreater, ObjectTyper,
// ObjectDefaulter, ObjectConvertor and EquivalentResourceMapper of a
// resource.
type objectInterfaces struct {
	f ResourceFuncs
}

var (
	_ admission.ObjectInterfaces       = objectInterfaces{}
	_ runtime.ObjectCreater            = objectInterfaces{}
	_ runtime.ObjectTyper              = objectInterfaces{}
	_ runtime.ObjectDefaulter          = objectInterfaces{}
	_ runtime.ObjectConvertor          = objectInterfaces{}
	_ runtime.EquivalentResourceMapper = objectInterfaces{}
)

func (o objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return o }
func (o objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return o }
func (o objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return o }
func (o objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return o }
func (o objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o
}

// New implements runtime.ObjectCreater: an empty object of kind.
func (objectInterfaces) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// ObjectKinds implements runtime.ObjectTyper: an object says its kind.
func (objectInterfaces) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, fmt.Errorf("admission: unexpected object type %T", obj)
	}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" {
		return nil, false, runtime.NewMissingKindErr("object has no kind")
	}
	if gvk.Version == "" {
		return nil, false, runtime.NewMissingVersionErr("object has no apiVersion")
	}
	return []schema.GroupVersionKind{gvk}, false, nil
}

// Recognizes implements runtime.ObjectTyper.
func (objectInterfaces) Recognizes(gvk schema.GroupVersionKind) bool {
	return gvk.Kind != "" && gvk.Version != ""
}

// Default implements runtime.ObjectDefaulter.
func (o objectInterfaces) Default(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok && o.f.Default != nil {
		o.f.Default(u)
	}
}

// Convert implements runtime.ObjectConvertor: in converted to out's
// version, into out.
func (o objectInterfaces) Convert(in, out, _ interface{}) error {
	uin, ok := in.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("admission: cannot convert %T", in)
	}
	uout, ok := out.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("admission: cannot convert to %T", out)
	}
	converted, err := o.convert(uin, uout.GroupVersionKind().GroupVersion())
	if err != nil {
		return err
	}
	uout.SetUnstructuredContent(converted.UnstructuredContent())
	return nil
}

// ConvertToVersion implements runtime.ObjectConvertor.
func (o objectInterfaces) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("admission: cannot convert %T", in)
	}
	from := u.GroupVersionKind()
	to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok {
		return nil, fmt.Errorf("admission: %v cannot be converted to %v", from, target)
	}
	return o.convert(u, to.GroupVersion())
}

// ConvertFieldLabel implements runtime.ObjectConvertor (admission converts
// no field selectors).
func (objectInterfaces) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// convert returns a copy of u in version to: the result never shares
// anything with u, which the plugins may keep using.
func (o objectInterfaces) convert(u *unstructured.Unstructured, to schema.GroupVersion) (*unstructured.Unstructured, error) {
	if u.GroupVersionKind().GroupVersion() == to {
		return u.DeepCopy(), nil
	}
	if o.f.Convert == nil {
		return nil, fmt.Errorf("admission: no conversion of %v to %v", u.GroupVersionKind(), to)
	}
	converted, err := o.f.Convert(u, to)
	if err != nil {
		return nil, err
	}
	if converted == u {
		converted = converted.DeepCopy()
	}
	return converted, nil
}

// EquivalentResourcesFor implements runtime.EquivalentResourceMapper.
func (o objectInterfaces) EquivalentResourcesFor(resource schema.GroupVersionResource, subresource string) []schema.GroupVersionResource {
	if o.f.EquivalentResources == nil {
		return []schema.GroupVersionResource{resource}
	}
	return o.f.EquivalentResources(resource, subresource)
}

// KindFor implements runtime.EquivalentResourceMapper.
func (o objectInterfaces) KindFor(resource schema.GroupVersionResource, subresource string) schema.GroupVersionKind {
	if o.f.KindFor == nil {
		return schema.GroupVersionKind{}
	}
	return o.f.KindFor(resource, subresource)
}
