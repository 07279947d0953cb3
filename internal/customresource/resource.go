package customresource

import (
	"fmt"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	"github.com/crdserver/crdserver/internal/store"
)

// KeyPrefix is where a CRD's objects live in etcd.
func KeyPrefix(crd *apiextensionsv1.CustomResourceDefinition) string {
	return "/registry/" + crd.Spec.Group + "/" + crd.Spec.Names.Plural + "/"
}

// Built is what a CRD's resource is made from besides the CRD: its
// objects' watch cache, its converter, its schemas by apiVersion (see
// LazySchemas and CompileSchemas), the whole CRD for what needs more than
// New's crd has (the OpenAPI the type converter is built from; nil: crd is
// whole) and the pool what is built on first use is held in (nil: held
// once built).
type Built struct {
	Cache     *store.Cache
	Converter conversion.Converter
	Schemas   map[string]*schema.Version
	Full      func() (*apiextensionsv1.CustomResourceDefinition, error)
	// Version gives the CRD with one version's schema only (nil: from
	// Full).
	Version func(version string) func() (*apiextensionsv1.CustomResourceDefinition, error)
	Pool    *budget.Pool
}

// New builds the serving definition of a CRD's resource: its served
// versions (highest priority first) with their subresources, deprecation
// warnings and selectable fields, the strategy of its schemas, its printer
// columns and field managers. crd may lack its schemas (b.Full gives them).
func New(crd *apiextensionsv1.CustomResourceDefinition, b Built) *resource.Resource {
	cache, conv, schemas := b.Cache, b.Converter, b.Schemas
	full := b.Full
	if full == nil {
		whole := crd.DeepCopy()
		full = func() (*apiextensionsv1.CustomResourceDefinition, error) { return whole, nil }
	}
	versions := b.Version
	if versions == nil {
		versions = func(string) func() (*apiextensionsv1.CustomResourceDefinition, error) { return full }
	}
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
	resource.SortVersions(served)
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
		KeyPrefix:      KeyPrefix(crd),
		Cache:          cache,
		Strategy:       newStrategy(crd, cache, conv, storage, status, schemas, scales),
		Converter:      conv,
		Table:          newTable(crd),
		FieldManagers:  fieldManagers(crd, versions, b.Pool, conv, schemas, status),
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
	resource.SortVersions(better)
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, better[0], spec.Names.Kind)
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

// CompileSchemas compiles the schema of every version of a CRD, by
// apiVersion.
func CompileSchemas(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*schema.Version, error) {
	out := map[string]*schema.Version{}
	for _, v := range crd.Spec.Versions {
		s, err := schema.Compile(crd, v.Name)
		if err != nil {
			return nil, err
		}
		out[crd.Spec.Group+"/"+v.Name] = s
	}
	return out, nil
}
