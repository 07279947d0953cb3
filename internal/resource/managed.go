package resource

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// FieldManagers builds and keeps the field managers of one resource:
// Kubernetes' managedFields tracking and server-side apply
// (k8s.io/apimachinery/pkg/util/managedfields), per version and
// subresource, over a type converter of the resource's schema.
type FieldManagers struct {
	// Group and Kind of the objects.
	Group, Kind string
	// TypeConverter returns the schema-aware converter of the objects
	// (called once, on first use); nil means the deduced one.
	TypeConverter func() (managedfields.TypeConverter, error)
	// Converter converts objects between versions.
	Converter conversion.Converter
	// Default applies the defaults of the version of an object.
	Default func(obj map[string]any)
	// ResetFields are the fields a subresource does not own, by
	// subresource ("" for the main resource) and version.
	ResetFields func(subresource, version string) []string

	once     sync.Once
	tc       managedfields.TypeConverter
	tcErr    error
	mu       sync.Mutex
	managers map[string]*managedfields.FieldManager
}

// FieldManager returns the field manager of a version and subresource.
func (f *FieldManagers) FieldManager(version, subresource string) (*managedfields.FieldManager, error) {
	f.once.Do(func() {
		if f.TypeConverter != nil {
			f.tc, f.tcErr = f.TypeConverter()
		}
		if f.tc == nil {
			f.tc = managedfields.NewDeducedTypeConverter()
		}
	})
	if f.tcErr != nil {
		return nil, f.tcErr
	}
	key := version + "/" + subresource
	f.mu.Lock()
	defer f.mu.Unlock()
	if m := f.managers[key]; m != nil {
		return m, nil
	}
	gv := schema.GroupVersion{Group: f.Group, Version: version}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if f.ResetFields != nil {
		if paths := f.ResetFields(subresource, version); len(paths) > 0 {
			set := fieldpath.NewSet()
			for _, p := range paths {
				set.Insert(fieldpath.MakePathOrDie(p))
			}
			reset = fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{fieldpath.APIVersion(gv.String()): set})
		}
	}
	m, err := managedfields.NewDefaultCRDFieldManager(f.tc, objectConvertor{f}, objectDefaulter{f}, objectCreater{}, gv.WithKind(f.Kind), gv, subresource, reset)
	if err != nil {
		return nil, err
	}
	if f.managers == nil {
		f.managers = map[string]*managedfields.FieldManager{}
	}
	f.managers[key] = m
	return m, nil
}

// objectConvertor converts unstructured objects between versions with the
// resource's Converter, for the field manager.
type objectConvertor struct{ f *FieldManagers }

func (o objectConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("unexpected conversion from %T to %T", in, out)
}

func (o objectConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("cannot convert %T", in)
	}
	gvk := u.GroupVersionKind()
	want, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, fmt.Errorf("no version of %v in %v", gvk, target)
	}
	if want.GroupVersion() == gvk.GroupVersion() {
		return u, nil
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	out, err := o.f.Converter.Convert(context.Background(), [][]byte{raw}, want.GroupVersion().String())
	if err != nil {
		return nil, err
	}
	res := &unstructured.Unstructured{}
	if err := res.UnmarshalJSON(out.Objects[0]); err != nil {
		return nil, err
	}
	return res, nil
}

func (o objectConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

type objectDefaulter struct{ f *FieldManagers }

func (d objectDefaulter) Default(in runtime.Object) {
	if u, ok := in.(*unstructured.Unstructured); ok && d.f.Default != nil {
		d.f.Default(u.Object)
	}
}

type objectCreater struct{}

func (objectCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// zeroObject is what a create replaces: nothing, or for a built-in type
// its Go type's zero value (fields a new object leaves at their zero value
// are then not its manager's, as on Kubernetes).
func (c *call) zeroObject() runtime.Object {
	gvk := schema.FromAPIVersionAndKind(c.apiVersion(), c.res.Kind)
	if c.res.Protobuf {
		if typed, err := request.Scheme().New(gvk); err == nil {
			if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed); err == nil {
				out := &unstructured.Unstructured{Object: u}
				out.SetGroupVersionKind(gvk)
				return out
			}
		}
	}
	obj, _ := objectCreater{}.New(gvk)
	return obj
}

// managerName is the field manager a write is recorded under: the
// fieldManager parameter, or the client's User-Agent up to its first "/",
// as Kubernetes does.
func (c *call) managerName() string {
	if m := c.r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua := strings.Split(c.r.UserAgent(), "/")[0]
	var b bytes.Buffer
	for _, r := range ua {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len() >= 128 {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// checkManagerName validates the fieldManager parameter.
func (c *call) checkManagerName(optionsKind string) error {
	m := c.r.URL.Query().Get("fieldManager")
	if len(m) > 128 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: optionsKind}, "",
			field.ErrorList{field.TooLong(field.NewPath("fieldManager"), m, 128)})
	}
	for _, r := range m {
		if !unicode.IsPrint(r) {
			return apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: optionsKind}, "",
				field.ErrorList{field.Invalid(field.NewPath("fieldManager"), m, "must only contain printable characters")})
		}
	}
	return nil
}

// track records a write in the object's managedFields: next replaces live
// (nil for a create). Objects without a field manager pass unchanged.
func (c *call) track(live, next *Object, sub string) *Object {
	if c.res.FieldManagers == nil {
		return next
	}
	fm, err := c.res.FieldManagers.FieldManager(c.ver.Name, sub)
	if err != nil {
		c.h.Log.Warn("field manager", "resource", c.res.String(), "err", err)
		return next
	}
	var liveObj runtime.Object
	if live != nil {
		liveObj = &unstructured.Unstructured{Object: live.ToUnstructured()}
	} else {
		liveObj = c.zeroObject()
	}
	out := fm.UpdateNoErrors(liveObj, &unstructured.Unstructured{Object: next.ToUnstructured()}, c.managerName())
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return next
	}
	obj, errs := NewObject(u.Object)
	if len(errs) > 0 {
		return next
	}
	return obj
}
