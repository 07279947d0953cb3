package customresource

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
)

// fieldManagers are the field managers of a CRD's objects: the type
// converter of each version (typeconverter.go) is built when an object of
// that version is first typed, and held in pool.
// versions gives the CRD with one version's schema.
func fieldManagers(crd *apiextensionsv1.CustomResourceDefinition, versions func(string) func() (*apiextensionsv1.CustomResourceDefinition, error), pool *budget.Pool, conv conversion.Converter, schemas map[string]*schema.Version, status map[string]bool) *resource.FieldManagers {
	group := crd.Spec.Group
	tc := &versionedTypeConverter{group: group, versions: map[string]*budget.Value[managedfields.TypeConverter]{}}
	for _, v := range crd.Spec.Versions {
		source := versions(v.Name)
		tc.versions[v.Name] = budget.NewValue(pool, func() (managedfields.TypeConverter, int64, error) {
			crd, err := source()
			if err != nil {
				return nil, 0, err
			}
			return newKindTypeConverter(crd, v.Name)
		})
	}
	return &resource.FieldManagers{
		Group: group,
		Kind:  crd.Status.AcceptedNames.Kind,
		Pool:  pool,
		TypeConverter: func() (managedfields.TypeConverter, int64, error) {
			return tc, 0, nil
		},
		Converter: conv,
		Default: func(obj map[string]any) {
			av, _ := obj["apiVersion"].(string)
			schemas[av].Default(obj)
		},
		ResetFields: func(sub, version string) []string {
			if !status[group+"/"+version] {
				return nil
			}
			if sub == "status" {
				return []string{"metadata", "spec"}
			}
			return []string{"status"}
		},
	}
}

// versionedTypeConverter types an object with the type converter of its
// version, built when first needed (a CRD's versions are typed apart:
// each version's converter is what the converter of all of them would
// use for it).
type versionedTypeConverter struct {
	group    string
	versions map[string]*budget.Value[managedfields.TypeConverter]
}

func (v *versionedTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	tc := v.versions[gvk.Version]
	if gvk.Group != v.group || tc == nil {
		return nil, fmt.Errorf("no type converter for %v", gvk)
	}
	c, err := tc.Get()
	if err != nil {
		return nil, err
	}
	return c.ObjectToTyped(obj, opts...)
}

// TypedToObject needs no schema: any converter turns a typed value back
// into an object the same way.
func (v *versionedTypeConverter) TypedToObject(value *typed.TypedValue) (runtime.Object, error) {
	return managedfields.NewDeducedTypeConverter().TypedToObject(value)
}

// typeConverterBytesPerNode is the estimated bytes of a type converter
// per schema node (measured on the CRDs of a real Crossplane provider).
const typeConverterBytesPerNode = 300

// typeConverterCost estimates the bytes of the type converter of defs.
func typeConverterCost(defs map[string]*spec.Schema) int64 {
	n := 0
	var count func(s *spec.Schema)
	count = func(s *spec.Schema) {
		if s == nil {
			return
		}
		n++
		for k := range s.Properties {
			p := s.Properties[k]
			count(&p)
		}
		if s.Items != nil {
			count(s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			count(s.AdditionalProperties.Schema)
		}
		for i := range s.AllOf {
			count(&s.AllOf[i])
		}
	}
	for _, s := range defs {
		count(s)
	}
	return int64(n) * typeConverterBytesPerNode
}
