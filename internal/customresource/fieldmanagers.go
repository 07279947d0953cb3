package customresource

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
)

// fieldManagers are the field managers of a CRD's objects:
// the type converter is built from the CRD's OpenAPI (Kubernetes' builder),
// as kube-apiserver builds it for server-side apply, from the whole CRD
// that full decodes, when first needed, and held in pool.
func fieldManagers(crd *apiextensionsv1.CustomResourceDefinition, full func() (*apiextensionsv1.CustomResourceDefinition, error), pool *budget.Pool, conv conversion.Converter, schemas map[string]*schema.Version, status map[string]bool) *resource.FieldManagers {
	group := crd.Spec.Group
	return &resource.FieldManagers{
		Group: group,
		Kind:  crd.Status.AcceptedNames.Kind,
		Pool:  pool,
		TypeConverter: func() (managedfields.TypeConverter, int64, error) {
			crd, err := full()
			if err != nil {
				return nil, 0, err
			}
			var specs []*spec3.OpenAPI
			for _, v := range crd.Spec.Versions {
				s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
				if err != nil {
					return nil, 0, err
				}
				specs = append(specs, s)
			}
			merged, err := builder.MergeSpecsV3(specs...)
			if err != nil {
				return nil, 0, err
			}
			tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
			return tc, typeConverterCost(merged.Components.Schemas), err
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
