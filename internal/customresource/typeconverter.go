package customresource

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// A CRD version's type converter (the structured-merge-diff types of its
// objects, for managed fields and server-side apply) is what
// kube-apiserver builds: its OpenAPI v3 from Kubernetes' builder
// (builder.BuildOpenAPIV3), converted by schemaconv. Building that
// document also builds the version's routes and every definition
// Kubernetes generates, about three quarters of the cost of a CRD's first
// write; and the types the kind refers to (ObjectMeta, ManagedFieldsEntry,
// OwnerReference …) are the same for every CRD. So here only the kind's
// schema is made per CRD version, as the builder makes it (the steps of
// its generateBuilder and buildKubeNative for v3, without value
// validations stripped), and converted alone; the types it refers to are
// converted once, from the builder's own document, and shared.
// TestTypeConverterAsKubernetes compares the two for every CRD of the
// corpus.

const objectMetaRef = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// metaTypes are the types a CRD's kind refers to, converted once for
// each value of the CRD's spec.preserveUnknownFields (it changes how
// objects without properties convert); and TypeMeta's apiVersion and kind,
// which the builder puts in every kind's schema.
type metaTypes struct {
	types            []smdschema.TypeDef
	apiVersion, kind spec.Schema
}

var sharedMeta [2]struct {
	once sync.Once
	m    *metaTypes
	err  error
}

func sharedMetaTypes(preserveUnknownFields bool) (*metaTypes, error) {
	s := &sharedMeta[0]
	if preserveUnknownFields {
		s = &sharedMeta[1]
	}
	s.once.Do(func() { s.m, s.err = buildMetaTypes(preserveUnknownFields) })
	return s.m, s.err
}

// metaCRD is a CRD with every subresource, so that its document has every
// definition the builder puts beside a kind.
var metaCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "metas.meta.crdserver.internal"},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: "meta.crdserver.internal",
		Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "metas", Singular: "meta", Kind: "Meta", ListKind: "MetaList"},
		Scope: apiextensionsv1.NamespaceScoped,
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: "v1", Served: true, Storage: true,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec":   {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
					"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
				},
			}},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
				Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
			},
		}},
	},
}

func buildMetaTypes(preserveUnknownFields bool) (*metaTypes, error) {
	doc, err := builder.BuildOpenAPIV3(metaCRD, "v1", builder.Options{})
	if err != nil {
		return nil, err
	}
	n := metaCRD.Spec.Names
	kind := doc.Components.Schemas[modelName(metaCRD.Spec.Group, "v1", n.Kind)]
	if kind == nil {
		return nil, fmt.Errorf("the builder's document has no schema of its kind")
	}
	defs := map[string]*spec.Schema{}
	for name, s := range doc.Components.Schemas {
		if name != modelName(metaCRD.Spec.Group, "v1", n.Kind) && name != modelName(metaCRD.Spec.Group, "v1", n.ListKind) {
			defs[name] = s
		}
	}
	types, err := schemaconv.ToSchemaFromOpenAPI(defs, preserveUnknownFields)
	if err != nil {
		return nil, err
	}
	return &metaTypes{types: types.Types, apiVersion: kind.Properties["apiVersion"], kind: kind.Properties["kind"]}, nil
}

// modelName is the builder's name of a kind's definition: the group
// reversed, the version, the kind (io.example.stable.v1.CronTab).
func modelName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	slices.Reverse(parts)
	return strings.Join(parts, ".") + "." + version + "." + kind
}

// kindSchema is the schema of the kind of crd's version in the builder's
// v3 document: the version's schema if it is structural (unfolded), with
// apiVersion, kind and metadata, and the same three in every embedded
// resource; else an object of any fields.
func kindSchema(crd *apiextensionsv1.CustomResourceDefinition, version string, meta *metaTypes) (*spec.Schema, error) {
	v, err := apiextensionshelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, err
	}
	var ss *structuralschema.Structural
	if v != nil && v.OpenAPIV3Schema != nil {
		in := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v, in, nil); err != nil {
			return nil, fmt.Errorf("failed converting CRD validation to internal version: %v", err)
		}
		if !validation.SchemaHasInvalidTypes(in.OpenAPIV3Schema) {
			if s, err := structuralschema.NewStructural(in.OpenAPIV3Schema); err == nil && len(structuralschema.ValidateStructural(nil, s)) == 0 {
				ss = s.Unfold()
			}
		}
	}
	if ss == nil {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}, nil
	}
	s := ss.ToKubeOpenAPI()
	s.SetProperty("metadata", *spec.RefSchema(objectMetaRef))
	s.SetProperty("apiVersion", meta.apiVersion)
	s.SetProperty("kind", meta.kind)
	addEmbedded(s, meta)
	return s, nil
}

// addEmbedded gives each x-kubernetes-embedded-resource object of s
// apiVersion, kind and metadata, kind and apiVersion required.
func addEmbedded(s *spec.Schema, meta *metaTypes) {
	if s == nil {
		return
	}
	for k := range s.Properties {
		p := s.Properties[k]
		addEmbedded(&p, meta)
		s.Properties[k] = p
	}
	if s.Items != nil {
		addEmbedded(s.Items.Schema, meta)
	}
	if s.AdditionalProperties != nil {
		addEmbedded(s.AdditionalProperties.Schema, meta)
	}
	if embedded, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); !ok || !embedded {
		return
	}
	s.SetProperty("apiVersion", meta.apiVersion)
	s.SetProperty("kind", meta.kind)
	s.SetProperty("metadata", *spec.RefSchema(objectMetaRef))
	required := slices.Clone(s.Required)
	for _, f := range []string{"kind", "apiVersion"} {
		if !slices.Contains(required, f) {
			s.Required = append(s.Required, f)
		}
	}
}

// kindTypeConverter types the objects of one kind.
type kindTypeConverter struct {
	gvk schema.GroupVersionKind
	typ typed.ParseableType
}

// newKindTypeConverter is the type converter of crd's version and its
// estimated bytes (the kind's own types; the shared ones are not its).
func newKindTypeConverter(crd *apiextensionsv1.CustomResourceDefinition, version string) (managedfields.TypeConverter, int64, error) {
	preserve := crd.Spec.PreserveUnknownFields
	meta, err := sharedMetaTypes(preserve)
	if err != nil {
		return nil, 0, err
	}
	s, err := kindSchema(crd, version, meta)
	if err != nil {
		return nil, 0, err
	}
	name := modelName(crd.Spec.Group, version, crd.Spec.Names.Kind)
	own, err := schemaconv.ToSchemaFromOpenAPI(map[string]*spec.Schema{name: s}, preserve)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to convert models to schema: %v", err)
	}
	types := slices.Clone(meta.types)
	for _, t := range own.Types {
		if t.Name == name {
			types = append(types, t)
		}
	}
	p := &typed.Parser{Schema: smdschema.Schema{Types: types}}
	return &kindTypeConverter{
		gvk: schema.GroupVersionKind{Group: crd.Spec.Group, Version: version, Kind: crd.Spec.Names.Kind},
		typ: p.Type(name),
	}, typeConverterCost(map[string]*spec.Schema{name: s}), nil
}

func (c *kindTypeConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk != c.gvk {
		return nil, fmt.Errorf("no corresponding type for %v", gvk)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return c.typ.FromUnstructured(u.UnstructuredContent(), opts...)
	}
	return c.typ.FromStructured(obj, opts...)
}

// TypedToObject needs no schema: any converter turns a typed value back
// into an object the same way.
func (c *kindTypeConverter) TypedToObject(value *typed.TypedValue) (runtime.Object, error) {
	return managedfields.NewDeducedTypeConverter().TypedToObject(value)
}
