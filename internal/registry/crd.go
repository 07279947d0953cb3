package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	crdregistry "k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	kjson "sigs.k8s.io/json"
)

const crdPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

func crdResource(cache *store.Cache) *resource.Resource {
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
		KeyPrefix:      crdPrefix,
		Cache:          cache,
		Strategy:       crdStrategy{},
		Converter:      resource.ApiVersionConverter{},
		Table:          crdTable{},
		FieldManagers:  builtinFieldManagers(apiextensionsv1.GroupName, "CustomResourceDefinition", true),
		Protobuf:       true,
		Verbs:          []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"},
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

// decodeCRD decodes a stored CRD.
func decodeCRD(raw []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(raw, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// toInternal converts a v1 CRD to the internal version the upstream
// validation works on.
func toInternal(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// crdStrategy holds Kubernetes' rules for CustomResourceDefinitions: the
// upstream defaulting and validation, status reset on create, generation
// on spec changes, and storedVersions kept up to date.
type crdStrategy struct{}

// Normalize decodes a body through the v1 type and applies its defaults.
func (crdStrategy) Normalize(obj *resource.Object) ([]error, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	strict, err := decodeTyped(obj, crd)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: %v", err))
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	fromCRD(crd, obj)
	return strict, nil
}

// decodeTyped decodes an Object into a Go type, returning the strict
// decoding errors (unknown fields) apart.
func decodeTyped(obj *resource.Object, into any) ([]error, error) {
	data, err := obj.Encode()
	if err != nil {
		return nil, err
	}
	return kjson.UnmarshalStrict(data, into)
}

func editCRD(obj *resource.Object, f func(crd *apiextensionsv1.CustomResourceDefinition)) {
	crd, err := toCRD(obj)
	if err != nil {
		return
	}
	f(crd)
	fromCRD(crd, obj)
}

func addStoredVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			if !apihelpers.IsStoredVersion(crd, v.Name) {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
			break
		}
	}
}

func (crdStrategy) PrepareForCreate(_ context.Context, obj *resource.Object) {
	editCRD(obj, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		crd.Generation = 1
		addStoredVersion(crd)
	})
}

func (crdStrategy) PrepareForUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := toCRD(old)
	if err != nil {
		return
	}
	editCRD(obj, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Status = o.Status
		if !apiequality.Semantic.DeepEqual(o.Spec, crd.Spec) {
			crd.Generation = o.Generation + 1
		}
		addStoredVersion(crd)
	})
}

// PrepareForStatusUpdate keeps the spec. (Kubernetes' CRD status strategy
// does not reset metadata: its finalizer controller removes the cleanup
// finalizer with a status update.)
func (crdStrategy) PrepareForStatusUpdate(_ context.Context, obj, old *resource.Object) {
	o, err := toCRD(old)
	if err != nil {
		return
	}
	editCRD(obj, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec = o.Spec
	})
}

func internalPair(obj, old *resource.Object) (*apiextensions.CustomResourceDefinition, *apiextensions.CustomResourceDefinition, field.ErrorList) {
	crd, err := toCRD(obj)
	if err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	in, err := toInternal(crd)
	if err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	if old == nil {
		return in, nil, nil
	}
	ocrd, err := toCRD(old)
	if err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	oin, err := toInternal(ocrd)
	if err != nil {
		return nil, nil, field.ErrorList{field.Invalid(field.NewPath(""), nil, err.Error())}
	}
	return in, oin, nil
}

func (crdStrategy) Validate(ctx context.Context, obj *resource.Object) field.ErrorList {
	in, _, errs := internalPair(obj, nil)
	if errs != nil {
		return errs
	}
	return validation.ValidateCustomResourceDefinition(ctx, in)
}

func (crdStrategy) ValidateUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, oin, errs := internalPair(obj, old)
	if errs != nil {
		return errs
	}
	return validation.ValidateCustomResourceDefinitionUpdate(ctx, in, oin)
}

func (crdStrategy) ValidateStatusUpdate(ctx context.Context, obj, old *resource.Object) field.ErrorList {
	in, oin, errs := internalPair(obj, old)
	if errs != nil {
		return errs
	}
	return validation.ValidateUpdateCustomResourceDefinitionStatus(ctx, in, oin)
}

// BeforeDelete marks a CRD terminating and adds the cleanup finalizer; the
// finalizer controller deletes its custom resources, then the finalizer.
func (crdStrategy) BeforeDelete(_ context.Context, obj *resource.Object) (bool, error) {
	if obj.Meta.DeletionTimestamp != nil {
		return false, nil
	}
	crd, err := toCRD(obj)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	now := metav1.Now().Rfc3339Copy()
	zero := int64(0)
	crd.DeletionTimestamp = &now
	crd.DeletionGracePeriodSeconds = &zero
	if !apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, apiextensionsv1.CustomResourceCleanupFinalizer)
	}
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
	fromCRD(crd, obj)
	return true, nil
}

func isEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)
}

// servable: Kubernetes serves a CRD's resource once its names are accepted
// (or it has been established).
func servable(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) || isEstablished(crd)
}

// crPrefix is where a CRD's objects live in etcd.
func crPrefix(crd *apiextensionsv1.CustomResourceDefinition) string {
	return "/registry/" + crd.Spec.Group + "/" + crd.Spec.Names.Plural + "/"
}

// customResourceFor builds the serving definition of a CRD's resource.
func customResourceFor(crd *apiextensionsv1.CustomResourceDefinition, cache *store.Cache, conv resource.Converter, schemas map[string]*schema.Version) *resource.Resource {
	names := crd.Status.AcceptedNames
	var served []string
	status := map[string]bool{}
	scales := map[string]*apiextensionsv1.CustomResourceSubresourceScale{}
	storage := ""
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
		if !v.Served {
			continue
		}
		served = append(served, v.Name)
		if v.Subresources != nil && v.Subresources.Status != nil {
			status[crd.Spec.Group+"/"+v.Name] = true
		}
		if sub, _ := apihelpers.GetSubresourcesForVersion(crd, v.Name); sub != nil && sub.Scale != nil {
			scales[crd.Spec.Group+"/"+v.Name] = sub.Scale
		}
	}
	SortVersions(served)
	res := &resource.Resource{
		Group:          crd.Spec.Group,
		Plural:         names.Plural,
		Singular:       names.Singular,
		Kind:           names.Kind,
		ListKind:       names.ListKind,
		ShortNames:     names.ShortNames,
		Categories:     names.Categories,
		Namespaced:     crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
		StorageVersion: storage,
		KeyPrefix:      crPrefix(crd),
		Cache:          cache,
		Strategy:       customResourceStrategy{status: status, schemas: schemas, scales: scales},
		Converter:      conv,
		Table:          newCustomResourceTable(crd),
		FieldManagers:  customResourceFieldManagers(crd, conv, schemas, status),
		Terminating:    crd.DeletionTimestamp != nil || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating),
		Verbs:          resource.DefaultVerbs,
	}
	for _, v := range served {
		ver := &resource.Version{Name: v, Status: status[crd.Spec.Group+"/"+v]}
		if sub, _ := apihelpers.GetSubresourcesForVersion(crd, v); sub != nil && sub.Scale != nil {
			ver.Scale = &resource.Scale{SpecReplicasPath: sub.Scale.SpecReplicasPath, StatusReplicasPath: sub.Scale.StatusReplicasPath}
			if sub.Scale.LabelSelectorPath != nil {
				ver.Scale.LabelSelectorPath = *sub.Scale.LabelSelectorPath
			}
		}
		if sf, err := selectableFields(crd, v); err == nil {
			ver.SelectableFields = sf
		}
		for _, sv := range crd.Spec.Versions {
			if sv.Name == v && sv.Deprecated {
				ver.Deprecated = true
				ver.Warning = defaultDeprecationWarning(v, crd.Spec)
				if sv.DeprecationWarning != nil {
					ver.Warning = *sv.DeprecationWarning
				}
			}
		}
		res.Versions = append(res.Versions, ver)
	}
	return res
}

// defaultDeprecationWarning is Kubernetes' text for a deprecated version
// without its own: it names the highest-priority served version that is
// not deprecated and has a higher priority than the deprecated one.
func defaultDeprecationWarning(deprecated string, spec apiextensionsv1.CustomResourceDefinitionSpec) string {
	msg := fmt.Sprintf("%s/%s %s is deprecated", spec.Group, deprecated, spec.Names.Kind)
	var better []string
	for _, v := range spec.Versions {
		if v.Served && !v.Deprecated && version.CompareKubeAwareVersionStrings(deprecated, v.Name) < 0 {
			better = append(better, v.Name)
		}
	}
	if len(better) == 0 {
		return msg
	}
	SortVersions(better)
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, better[0], spec.Names.Kind)
}

// failingConverter answers every conversion with the error that kept the
// CRD's converter from being built; objects already in the wanted version
// pass.
type failingConverter struct{ err error }

func (f failingConverter) Convert(_ context.Context, objs [][]byte, to string) ([][]byte, error) {
	for _, o := range objs {
		if av, _, _ := jsonraw.String(o, "apiVersion"); av != to {
			return nil, apierrors.NewInternalError(fmt.Errorf("conversion to %s failed: %v", to, f.err))
		}
	}
	return objs, nil
}

// upstreamCRDStrategy gives the warnings Kubernetes sends on CRD writes
// (unrecognized formats, list-type set on non-scalar items).
var upstreamCRDStrategy = crdregistry.NewStrategy(nil)

func (crdStrategy) WarningsOnCreate(ctx context.Context, obj *resource.Object) []string {
	in, _, errs := internalPair(obj, nil)
	if errs != nil {
		return nil
	}
	return upstreamCRDStrategy.WarningsOnCreate(ctx, in)
}

func (crdStrategy) WarningsOnUpdate(ctx context.Context, obj, old *resource.Object) []string {
	in, oin, errs := internalPair(obj, old)
	if errs != nil {
		return nil
	}
	return upstreamCRDStrategy.WarningsOnUpdate(ctx, in, oin)
}

// selectableFields are a version's spec.versions[].selectableFields (or
// the CRD's top-level ones) as field selector names.
func selectableFields(crd *apiextensionsv1.CustomResourceDefinition, version string) ([]string, error) {
	var out []string
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		for _, f := range v.SelectableFields {
			out = append(out, strings.TrimPrefix(f.JSONPath, "."))
		}
	}
	return out, nil
}
