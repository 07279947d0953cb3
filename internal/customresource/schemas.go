package customresource

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdapi "github.com/crdserver/crdserver/internal/apis/apiextensions"
	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/schema"
)

// LazySchemas are the schemas of every version of a CRD, by apiVersion,
// each compiled part by part when a request first needs it, from raw (the
// CRD as stored, of which crd is the decoded form without schemas; see
// apiextensions.DecodeSlim), and held in pool, which may release them
// again. raw returns the stored CRD. A version without a schema has none
// (nil).
func LazySchemas(pool *budget.Pool, crd *apiextensionsv1.CustomResourceDefinition, raw func() []byte, withSchema map[string]bool) map[string]*schema.Version {
	out := map[string]*schema.Version{}
	for _, v := range crd.Spec.Versions {
		if !withSchema[v.Name] {
			continue
		}
		out[crd.Spec.Group+"/"+v.Name] = schema.Lazy(pool, rawSource(raw, v.Name))
	}
	return out
}

// rawSource is the schema.Source of a version of a stored CRD.
func rawSource(raw func() []byte, version string) schema.Source {
	return func() (*apiextensions.JSONSchemaProps, bool, error) {
		val, hasStatus, err := crdapi.VersionSchema(raw(), version)
		if err != nil || val == nil || val.OpenAPIV3Schema == nil {
			return nil, hasStatus, err
		}
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, false, fmt.Errorf("converting the schema of %s: %w", version, err)
		}
		return internal.OpenAPIV3Schema, hasStatus, nil
	}
}
