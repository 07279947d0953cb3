package resource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/request"
)

// FieldManagers builds and keeps the field managers of one resource:
// Kubernetes' managedFields tracking and server-side apply
// (k8s.io/apimachinery/pkg/util/managedfields), per version and
// subresource, over a type converter of the resource's schema. The type
// converter and the managers are built on first use and held in Pool,
// which may release them (they are built again when next needed).
type FieldManagers struct {
	// Group and Kind of the objects.
	Group, Kind string
	// TypeConverter returns the schema-aware converter of the objects and
	// its estimated bytes (called on first use, and again after a
	// release); nil means the deduced one.
	TypeConverter func() (managedfields.TypeConverter, int64, error)
	// Pool holds the type converter and the managers (nil: held once
	// built).
	Pool *budget.Pool
	// Converter converts objects between versions.
	Converter conversion.Converter
	// Default applies the defaults of the version of an object.
	Default func(obj map[string]any)
	// ResetFields are the fields a subresource does not own, by
	// subresource ("" for the main resource) and version.
	ResetFields func(subresource, version string) []string

	once sync.Once
	set  *budget.Value[*fieldManagerSet]
}

// fieldManagerSet is the type converter of a resource and the managers
// built over it.
type fieldManagerSet struct {
	tc       managedfields.TypeConverter
	mu       sync.Mutex
	managers map[string]*managedfields.FieldManager
}

// managerSet returns the type converter and the managers built so far.
func (f *FieldManagers) managerSet() (*fieldManagerSet, error) {
	return f.value().Get()
}

// value is what holds the type converter and the managers.
func (f *FieldManagers) value() *budget.Value[*fieldManagerSet] {
	f.once.Do(func() {
		f.set = budget.NewValue(f.Pool, func() (*fieldManagerSet, int64, error) {
			if f.TypeConverter == nil {
				return &fieldManagerSet{tc: managedfields.NewDeducedTypeConverter()}, 0, nil
			}
			tc, cost, err := f.TypeConverter()
			if err != nil {
				return nil, 0, err
			}
			return &fieldManagerSet{tc: tc}, cost, nil
		})
	})
	return f.set
}

// Release drops the type converter and the managers now (the resource
// is no longer served in this form); a request still using it builds them
// again.
func (f *FieldManagers) Release() { f.value().Drop() }

// FieldManager returns the field manager of a version and subresource.
func (f *FieldManagers) FieldManager(version, subresource string) (*managedfields.FieldManager, error) {
	set, err := f.managerSet()
	if err != nil {
		return nil, err
	}
	key := version + "/" + subresource
	set.mu.Lock()
	defer set.mu.Unlock()
	if m := set.managers[key]; m != nil {
		return m, nil
	}
	gv := schema.GroupVersion{Group: f.Group, Version: version}
	var reset map[fieldpath.APIVersion]fieldpath.Filter
	if f.ResetFields != nil {
		if paths := f.ResetFields(subresource, version); len(paths) > 0 {
			fields := fieldpath.NewSet()
			for _, p := range paths {
				fields.Insert(fieldpath.MakePathOrDie(p))
			}
			reset = fieldpath.NewExcludeFilterSetMap(map[fieldpath.APIVersion]*fieldpath.Set{fieldpath.APIVersion(gv.String()): fields})
		}
	}
	m, err := managedfields.NewDefaultCRDFieldManager(set.tc, objectConvertor{f}, objectDefaulter{f}, objectCreater{}, gv.WithKind(f.Kind), gv, subresource, reset)
	if err != nil {
		return nil, err
	}
	if set.managers == nil {
		set.managers = map[string]*managedfields.FieldManager{}
	}
	set.managers[key] = m
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

// trackKeepingOtherVersions tracks a write with the managers of other
// versions taken as managers of the request's version (their field sets
// read on its schema), then gives their entries back their versions: what
// they own stays theirs, less what this write took over.
func (c *call) trackKeepingOtherVersions(fm *managedfields.FieldManager, liveObj runtime.Object, newObj *unstructured.Unstructured) (runtime.Object, error) {
	own := c.apiVersion()
	type entryKey struct{ manager, operation, subresource string }
	versions := map[entryKey]string{}
	relabel := func(o runtime.Object) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		entries := u.GetManagedFields()
		for i, e := range entries {
			if e.APIVersion != own {
				versions[entryKey{e.Manager, string(e.Operation), e.Subresource}] = e.APIVersion
				entries[i].APIVersion = own
			}
		}
		u.SetManagedFields(entries)
	}
	live := liveObj.DeepCopyObject()
	relabel(live)
	relabel(newObj)
	if len(versions) == 0 {
		return nil, errors.New("no manager of another version")
	}
	out, err := fm.Update(live, newObj, c.managerName())
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected %T", out)
	}
	entries := u.GetManagedFields()
	for i, e := range entries {
		if e.Manager == c.managerName() && e.Operation == metav1.ManagedFieldsOperationUpdate {
			continue // this write's own entry is in the request's version
		}
		if v, ok := versions[entryKey{e.Manager, string(e.Operation), e.Subresource}]; ok {
			entries[i].APIVersion = v
		}
	}
	u.SetManagedFields(entries)
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
	newObj := &unstructured.Unstructured{Object: next.ToUnstructured()}
	out, err := fm.Update(liveObj.DeepCopyObject(), newObj.DeepCopy(), c.managerName())
	if err != nil {
		// Most likely a manager of another version whose conversion
		// failed (a webhook that is down): its entry is kept as it is and
		// the write is tracked without it, rather than losing either.
		out, err = c.trackKeepingOtherVersions(fm, liveObj, newObj)
		if err != nil {
			c.h.Log.Warn("managedFields not updated", "resource", c.res.String(), "err", err)
			out = fm.UpdateNoErrors(liveObj, newObj, c.managerName())
		}
	}
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
