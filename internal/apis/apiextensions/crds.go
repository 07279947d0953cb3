package apiextensions

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	crdregistry "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	crdtable "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition/tableconvertor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/evolution"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

// CRDPrefix is where CustomResourceDefinitions live in etcd.
const CRDPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

// EnforceAnnotation is the annotation that, set to "true" on a CRD, refuses its changes that
// break the deprecation policy or its clients (422, one cause per
// finding) instead of warning about them.
const EnforceAnnotation = "crdserver.io/enforce-compatibility"

// Compatibility says how CRD changes are checked against the deprecation
// policy and existing clients (package evolution).
type Compatibility struct {
	// Enforce refuses every CRD change with findings, as the annotation
	// does for one CRD.
	Enforce bool
	// ExistingObjects returns the stored objects of a CRD in a version
	// (a bounded number of them), so that a new constraint is reported
	// only when some object fails it; nil checks none.
	ExistingObjects func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, version string) []map[string]any
	// Conversion returns what the new revision of a CRD does to its
	// declarative conversion (a version that cannot hold another's
	// fields); nil checks nothing.
	Conversion func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) []evolution.Finding
}

// Getter returns the CRD of a name as it is now, from the cache of CRDs
// once it holds every earlier write (nil for none, or one that cannot be
// read or decoded).
func Getter(cache *store.Cache) func(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
	return func(ctx context.Context, name string) *apiextensionsv1.CustomResourceDefinition {
		it, err := cache.GetNewest(ctx, CRDPrefix+name)
		if err != nil || it == nil {
			return nil
		}
		crd, err := Decode(it.Bytes())
		if err != nil {
			return nil
		}
		return crd
	}
}

// CRDs is the customresourcedefinitions resource, served from cache. CRD
// changes are checked as compat says.
func CRDs(cache *store.Cache, compat *Compatibility) *resource.Resource {
	return &resource.Resource{
		Group:          apiextensionsv1.GroupName,
		Plural:         "customresourcedefinitions",
		Singular:       "customresourcedefinition",
		Kind:           "CustomResourceDefinition",
		ListKind:       "CustomResourceDefinitionList",
		ShortNames:     []string{"crd", "crds"},
		Categories:     []string{"api-extensions"},
		Versions:       []*resource.Version{{Name: "v1", Status: true}},
		StorageVersion: "v1",
		KeyPrefix:      CRDPrefix,
		Cache:          cache,
		Strategy:       crdStrategy{compat: compat},
		Converter:      conversion.None{},
		// Kubernetes patches CRDs with its strategic merge patch too.
		StrategicMergeType: &apiextensionsv1.CustomResourceDefinition{},
		Table:              crdTable{},
		FieldManagers:      resource.BuiltinFieldManagers(apiextensionsv1.GroupName, "CustomResourceDefinition", true),
		// The strategy checks the name against the spec.
		ValidateName: func(string, bool) []string { return nil },
		Protobuf:     true,
		Verbs:        []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
	}
}

// toCRD decodes an Object into the typed v1 CustomResourceDefinition.
func toCRD(obj *resource.Object) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := obj.Encode()
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(data, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// fromCRD writes a typed CRD back into an Object.
func fromCRD(crd *apiextensionsv1.CustomResourceDefinition, obj *resource.Object) {
	data, err := json.Marshal(crd)
	if err != nil {
		return
	}
	o, err := resource.DecodeObject(data)
	if err != nil {
		return
	}
	*obj = *o
}

// Decode decodes a stored or encoded CRD.
func Decode(raw []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(raw, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// ToInternal converts a v1 CRD to the internal version the upstream
// validation works on.
func ToInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// crdStrategy holds Kubernetes' rules for CustomResourceDefinitions: the
// upstream defaulting and validation, status reset on create, generation
// on spec changes, and storedVersions kept up to date.
type crdStrategy struct{ compat *Compatibility }

// Normalize decodes a body through the v1 type and applies its defaults.
func (crdStrategy) Normalize(obj *resource.Object) ([]error, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	strict, err := resource.DecodeStrict(obj, crd)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: %v", err))
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	fromCRD(crd, obj)
	return strict, nil
}

// storageVersionOf is the name of the storage version in an object's
// spec.versions.
func storageVersionOf(obj *resource.Object) string {
	spec, _ := obj.Content["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		if vm, ok := v.(map[string]any); ok && vm["storage"] == true {
			name, _ := vm["name"].(string)
			return name
		}
	}
	return ""
}

// setStatus writes a typed status into an object, as the v1 type encodes
// it.
func setStatus(obj *resource.Object, status apiextensionsv1.CustomResourceDefinitionStatus) {
	raw, err := json.Marshal(status)
	if err != nil {
		return
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return
	}
	obj.Content["status"] = m
}

// statusOf decodes an object's status.
func statusOf(obj *resource.Object) apiextensionsv1.CustomResourceDefinitionStatus {
	var status apiextensionsv1.CustomResourceDefinitionStatus
	if st, ok := obj.Content["status"]; ok {
		if raw, err := json.Marshal(st); err == nil {
			_ = json.Unmarshal(raw, &status)
		}
	}
	return status
}

// The preparations below edit the decoded object where Kubernetes' edit
// the typed CRD: the object went through the v1 type already (Normalize,
// or when it was stored), so what they leave is what the type would, and
// the schemas are not decoded again.

func (crdStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	var status apiextensionsv1.CustomResourceDefinitionStatus
	if v := storageVersionOf(obj); v != "" {
		status.StoredVersions = []string{v}
	}
	setStatus(obj, status)
	obj.Meta.Generation = 1
}

func (crdStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	status := statusOf(old)
	if v := storageVersionOf(obj); v != "" && !slices.Contains(status.StoredVersions, v) {
		status.StoredVersions = append(status.StoredVersions, v)
	}
	setStatus(obj, status)
	if !reflect.DeepEqual(obj.Content["spec"], old.Content["spec"]) {
		obj.Meta.Generation = old.Meta.Generation + 1
	}
}

// PrepareForStatusUpdate keeps the spec. (Kubernetes' CRD status strategy
// does not reset metadata: its finalizer controller removes the cleanup
// finalizer with a status update.) Both objects went through the v1 type
// (the body in Normalize, the stored one when it was written), so the
// stored spec is taken as it is, without decoding it again.
func (crdStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	if spec, ok := old.Content["spec"]; ok {
		obj.Content["spec"] = spec
	} else {
		delete(obj.Content, "spec")
	}
}

// decoded is an object as the typed v1 CRD and as the internal one
// Kubernetes' validation takes.
type decoded struct {
	v1       *apiextensionsv1.CustomResourceDefinition
	internal *apiextensions.CustomResourceDefinition
	err      error
}

// decodedKey identifies an object as it is: a preparation that changes
// it replaces its content map.
type decodedKey struct {
	obj     *resource.Object
	content uintptr
}

// decode decodes an object, once per request while it stays the same
// (validation and warnings decode the same object).
func decode(ctx context.Context, obj *resource.Object) decoded {
	key := decodedKey{obj: obj, content: reflect.ValueOf(obj.Content).Pointer()}
	return resource.Memo(ctx, key, func() decoded {
		crd, err := toCRD(obj)
		if err != nil {
			return decoded{err: err}
		}
		in, err := ToInternal(crd)
		return decoded{v1: crd, internal: in, err: err}
	})
}

func internalPair(ctx context.Context, obj, old *resource.Object) (*apiextensions.CustomResourceDefinition, *apiextensions.CustomResourceDefinition, field.ErrorList) {
	d := decode(ctx, obj)
	if d.err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, d.err.Error())}
	}
	if old == nil {
		return d.internal, nil, nil
	}
	od := decode(ctx, old)
	if od.err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, od.err.Error())}
	}
	return d.internal, od.internal, nil
}

func (crdStrategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	in, _, errs := internalPair(ctx, obj, nil)
	if errs != nil {
		return errs
	}
	return validation.ValidateCustomResourceDefinition(ctx, in)
}

func (s crdStrategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, oin, errs := internalPair(ctx, obj, old)
	if errs != nil {
		return errs
	}
	if errs := validation.ValidateCustomResourceDefinitionUpdate(ctx, in, oin); len(errs) > 0 {
		return errs
	}
	if !s.enforced(obj) {
		return nil
	}
	for _, f := range s.findings(ctx, obj, old) {
		p := field.NewPath("spec")
		if f.Version != "" {
			p = p.Child("versions").Key(f.Version)
		}
		errs = append(errs, field.Forbidden(p, findingText(f)))
	}
	return errs
}

// enforced says whether a CRD's changes with findings are refused.
func (s crdStrategy) enforced(obj *resource.Object) bool {
	return s.compat != nil && (s.compat.Enforce || obj.Meta.Annotations[EnforceAnnotation] == "true")
}

// findings are what package evolution finds in a CRD change of spec.
func (s crdStrategy) findings(ctx context.Context, obj, old *resource.Object) []evolution.Finding {
	if s.compat == nil || reflect.DeepEqual(obj.Content["spec"], old.Content["spec"]) {
		return nil
	}
	d, od := decode(ctx, obj), decode(ctx, old)
	if d.err != nil || od.err != nil {
		return nil
	}
	crd, prev := d.v1, od.v1
	var opts evolution.Options
	if s.compat.ExistingObjects != nil {
		opts.ExistingObjects = func(version string) []map[string]any { return s.compat.ExistingObjects(ctx, prev, version) }
	}
	findings := evolution.CheckCRD(ctx, prev, crd, opts)
	if s.compat.Conversion != nil {
		findings = append(findings, s.compat.Conversion(ctx, crd)...)
	}
	return findings
}

// findingText is a finding as a warning or a cause says it.
func findingText(f evolution.Finding) string {
	return strings.TrimSuffix(evolution.FormatText([]evolution.Finding{f}), "\n")
}

// ValidateStatusUpdate validates metadata and status, all that
// Kubernetes' status validation reads: the spec, schemas and all, is not
// decoded.
func (crdStrategy) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, err := statusOnly(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("status"), nil, err.Error())}
	}
	oin, err := statusOnly(old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("status"), nil, err.Error())}
	}
	return validation.ValidateUpdateCustomResourceDefinitionStatus(ctx, in, oin)
}

// statusOnly is the internal CRD of an object's metadata and status.
func statusOnly(obj *resource.Object) (*apiextensions.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: obj.Meta}
	if st, ok := obj.Content["status"]; ok {
		raw, err := json.Marshal(st)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &crd.Status); err != nil {
			return nil, err
		}
	}
	return ToInternal(crd)
}

// BeforeDelete marks a CRD terminating and adds the cleanup finalizer; the
// finalizer controller deletes its custom resources, then the finalizer.
func (crdStrategy) BeforeDelete(_ context.Context, obj *resource.Object) (bool, error) {
	if obj.Meta.DeletionTimestamp != nil {
		return false, nil
	}
	now := metav1.Now().Rfc3339Copy()
	zero := int64(0)
	obj.Meta.DeletionTimestamp = &now
	obj.Meta.DeletionGracePeriodSeconds = &zero
	if !slices.Contains(obj.Meta.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer) {
		obj.Meta.Finalizers = append(obj.Meta.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	}
	// Only the status is decoded and written back, as the v1 type would:
	// the object was stored through it.
	crd := &apiextensionsv1.CustomResourceDefinition{Status: statusOf(obj)}
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
	setStatus(obj, crd.Status)
	return true, nil
}

// IsEstablished reports whether a CRD is Established.
func IsEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)
}

// Servable reports whether a CRD's resource is served: Kubernetes serves it
// once its names are accepted (or it has been established).
func Servable(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) || IsEstablished(crd)
}

// upstreamCRDStrategy gives the warnings Kubernetes sends on CRD writes
// (unrecognized formats, list-type set on non-scalar items).
var upstreamCRDStrategy = crdregistry.NewStrategy(nil)

func (s crdStrategy) WarningsOnCreate(ctx context.Context, obj *resource.Object) []string {
	in, _, errs := internalPair(ctx, obj, nil)
	if errs != nil {
		return nil
	}
	warnings := upstreamCRDStrategy.WarningsOnCreate(ctx, in)
	// ConversionRules outlive their CRD: a CRD created again under their
	// name is converted by them, so say when they do not fit it.
	if s.compat != nil && s.compat.Conversion != nil {
		if d := decode(ctx, obj); d.err == nil {
			for _, f := range s.compat.Conversion(ctx, d.v1) {
				warnings = append(warnings, findingText(f))
			}
		}
	}
	return warnings
}

func (s crdStrategy) WarningsOnUpdate(ctx context.Context, obj, old *resource.Object) []string {
	in, oin, errs := internalPair(ctx, obj, old)
	if errs != nil {
		return nil
	}
	warnings := upstreamCRDStrategy.WarningsOnUpdate(ctx, in, oin)
	// Enforced CRDs with findings were refused: there is nothing to warn.
	if !s.enforced(obj) {
		for _, f := range s.findings(ctx, obj, old) {
			warnings = append(warnings, findingText(f))
		}
	}
	return warnings
}

// crdTable is Kubernetes' table of CustomResourceDefinitions: Name, Scope,
// Versions, Created At (and Group, Kind, ShortNames, Established wide).
type crdTable struct{}

func (crdTable) ConvertToTable(ctx context.Context, _ string, objs []*unstructured.Unstructured, noHeaders bool) (*metav1.Table, error) {
	list := &apiextensions.CustomResourceDefinitionList{}
	for _, o := range objs {
		v1 := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, v1); err != nil {
			return nil, err
		}
		in, err := ToInternal(v1)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, *in)
	}
	return crdtable.New().ConvertToTable(ctx, list, &metav1.TableOptions{NoHeaders: noHeaders})
}

// DecodeSlim decodes a stored or encoded CRD without its schemas (each
// version's schema is nil) and without managedFields: what serving it
// needs until a request needs its schemas (VersionSchema). The schemas,
// most of a large CRD, are only scanned over. It also says which versions
// have a schema.
func DecodeSlim(raw []byte) (*apiextensionsv1.CustomResourceDefinition, map[string]bool, error) {
	var s slimCRD
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   s.TypeMeta,
		ObjectMeta: s.Metadata.ObjectMeta,
		Spec:       s.Spec.CustomResourceDefinitionSpec,
		Status:     s.Status,
	}
	crd.Spec.Versions = make([]apiextensionsv1.CustomResourceDefinitionVersion, len(s.Spec.Versions))
	withSchema := map[string]bool{}
	for i, v := range s.Spec.Versions {
		crd.Spec.Versions[i] = v.CustomResourceDefinitionVersion
		if v.Schema {
			withSchema[v.Name] = true
		}
	}
	return crd, withSchema, nil
}

// The shapes DecodeSlim decodes into: a field of the outer struct hides
// the embedded struct's field of the same JSON name.
type (
	slimCRD struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        slimMeta                                       `json:"metadata"`
		Spec            slimSpec                                       `json:"spec"`
		Status          apiextensionsv1.CustomResourceDefinitionStatus `json:"status"`
	}
	slimMeta struct {
		metav1.ObjectMeta
		ManagedFields skipJSON `json:"managedFields"`
	}
	slimSpec struct {
		apiextensionsv1.CustomResourceDefinitionSpec
		Versions []slimVersion `json:"versions"`
	}
	slimVersion struct {
		apiextensionsv1.CustomResourceDefinitionVersion
		Schema presence `json:"schema"`
	}
)

// skipJSON takes any JSON value and keeps nothing of it.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

// presence takes any JSON value and keeps only whether it is not null.
type presence bool

func (p *presence) UnmarshalJSON(b []byte) error {
	*p = string(b) != "null"
	return nil
}

// VersionSchema decodes the schema of one version of a stored or encoded
// CRD, and whether that version has the status subresource; a version
// without a schema (or not in the CRD) gives nil.
func VersionSchema(raw []byte, version string) (*apiextensionsv1.CustomResourceValidation, bool, error) {
	var s struct {
		Spec struct {
			Versions []struct {
				Name         string                                      `json:"name"`
				Schema       json.RawMessage                             `json:"schema"`
				Subresources *apiextensionsv1.CustomResourceSubresources `json:"subresources"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, err
	}
	for _, v := range s.Spec.Versions {
		if v.Name != version {
			continue
		}
		hasStatus := v.Subresources != nil && v.Subresources.Status != nil
		if len(v.Schema) == 0 || string(v.Schema) == "null" {
			return nil, hasStatus, nil
		}
		val := &apiextensionsv1.CustomResourceValidation{}
		if err := json.Unmarshal(v.Schema, val); err != nil {
			return nil, false, err
		}
		return val, hasStatus, nil
	}
	return nil, false, nil
}
