package customresource

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
)

// fieldManagers are the field managers of a CRD's objects:
// the type converter is built from the CRD's OpenAPI (Kubernetes' builder),
// as kube-apiserver builds it for server-side apply.
func fieldManagers(crd *apiextensionsv1.CustomResourceDefinition, conv conversion.Converter, schemas map[string]*schema.Version, status map[string]bool) *resource.FieldManagers {
	crd = crd.DeepCopy()
	return &resource.FieldManagers{
		Group: crd.Spec.Group,
		Kind:  crd.Status.AcceptedNames.Kind,
		TypeConverter: func() (managedfields.TypeConverter, error) {
			var specs []*spec3.OpenAPI
			for _, v := range crd.Spec.Versions {
				s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
				if err != nil {
					return nil, err
				}
				specs = append(specs, s)
			}
			merged, err := builder.MergeSpecsV3(specs...)
			if err != nil {
				return nil, err
			}
			return managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
		},
		Converter: conv,
		Default: func(obj map[string]any) {
			av, _ := obj["apiVersion"].(string)
			schemas[av].Default(obj)
		},
		ResetFields: func(sub, version string) []string {
			if !status[crd.Spec.Group+"/"+version] {
				return nil
			}
			if sub == "status" {
				return []string{"metadata", "spec"}
			}
			return []string{"status"}
		},
	}
}
