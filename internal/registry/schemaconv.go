package registry

import (
	"context"
	"encoding/json"

	"github.com/crdserver/crdserver/internal/jsonraw"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/schema"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
)

// compileSchemas compiles the schema of every version of a CRD.
func compileSchemas(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*schema.Version, error) {
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

// schemaConverter runs the schema of the target version over what a
// converter returns, as Kubernetes does after conversion: unknown fields
// are pruned and defaults applied. Objects that the converter left alone
// are only processed if they were stored before the schema last changed
// (schemaRev); newer ones were pruned and defaulted when written.
type schemaConverter struct {
	inner     resource.Converter
	schemas   map[string]*schema.Version
	schemaRev int64
}

func (s *schemaConverter) Convert(ctx context.Context, objs [][]byte, to string) ([][]byte, error) {
	out, err := s.inner.Convert(ctx, objs, to)
	if err != nil {
		return nil, err
	}
	v := s.schemas[to]
	if v == nil {
		return out, nil
	}
	copied := false
	for i := range out {
		converted := len(out[i]) == 0 || len(objs[i]) == 0 || &out[i][0] != &objs[i][0]
		if !converted {
			rv, _ := jsonraw.ResourceVersion(objs[i])
			if rv == 0 || rv > s.schemaRev {
				continue
			}
		}
		var m map[string]any
		if err := utiljson.Unmarshal(out[i], &m); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := v.CoerceStored(m); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		v.Default(m)
		b, err := json.Marshal(m)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if !copied {
			out = append([][]byte(nil), out...)
			copied = true
		}
		out[i] = b
	}
	return out, nil
}

// Close passes on to the inner converter.
func (s *schemaConverter) Close() {
	if c, ok := s.inner.(interface{ Close() }); ok {
		c.Close()
	}
}

// customResourceFieldManagers are the field managers of a CRD's objects:
// the type converter is built from the CRD's OpenAPI (Kubernetes' builder),
// as kube-apiserver builds it for server-side apply.
func customResourceFieldManagers(crd *apiextensionsv1.CustomResourceDefinition, conv resource.Converter, schemas map[string]*schema.Version, status map[string]bool) *resource.FieldManagers {
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

// builtinFieldManagers track managedFields of built-in kinds with the
// deduced type converter (every list atomic, every map granular).
func builtinFieldManagers(group, kind string, statusReset bool) *resource.FieldManagers {
	return &resource.FieldManagers{
		Group:     group,
		Kind:      kind,
		Converter: resource.ApiVersionConverter{},
		ResetFields: func(sub, _ string) []string {
			switch {
			case !statusReset:
				return nil
			case sub == "status":
				return []string{"metadata", "spec"}
			}
			return []string{"status"}
		},
	}
}
