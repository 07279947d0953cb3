package customresource

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/schemaconv"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/crdserver/crdserver/internal/fixtures"
)

// kinds is a CRD whose schema has what the builder treats specially:
// embedded resources (at the root of a property, in a list, in a map),
// list and map types, int-or-string, preserved unknown fields, nullable
// and defaulted fields.
const kinds = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: kinds.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: kinds, singular: kind, kind: Kind, listKind: KindList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              template:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
              objects:
                type: array
                items: {type: object, x-kubernetes-embedded-resource: true, properties: {data: {type: string}}, required: [kind]}
              byName:
                type: object
                additionalProperties: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name, protocol]
                items:
                  type: object
                  required: [name, protocol]
                  properties:
                    name: {type: string}
                    protocol: {type: string, default: TCP}
                    port: {x-kubernetes-int-or-string: true}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              atomic: {type: object, x-kubernetes-map-type: atomic, properties: {a: {type: string}}}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              maybe: {type: string, nullable: true}
              size: {type: integer, default: 3}
          status:
            type: object
            properties:
              conditions:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [type]
                items: {type: object, properties: {type: {type: string}, status: {type: string}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestTypeConverterAsKubernetes: the type converter of every version of
// every CRD of the corpus (and of CRDs with what the builder treats
// specially, with and without spec.preserveUnknownFields, and not
// structural) has the types
// kube-apiserver's has (from builder.BuildOpenAPIV3 converted whole) and
// types objects as it does: the same values and field sets, or an error
// for both.
func TestTypeConverterAsKubernetes(t *testing.T) {
	crds, whole, err := fixtures.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d CRDs (the whole corpus: %v)", len(crds), whole)
	k := fixtures.DecodeCRD(t, kinds)
	preserved := k.DeepCopy()
	preserved.Name, preserved.Spec.PreserveUnknownFields = "preserved.example.com", true
	// A schema that is not structural (a property without a type) is
	// left out, as the builder leaves it out.
	loose := k.DeepCopy()
	loose.Name = "loose.example.com"
	loose.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["loose"] = apiextensionsv1.JSONSchemaProps{}
	crds = append(crds, k, preserved, loose, fixtures.DecodeCRD(t, gadgetsCRD))
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			compareTypeConverter(t, crd, v.Name)
		}
	}
}

func compareTypeConverter(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) {
	t.Helper()
	preserve := crd.Spec.PreserveUnknownFields
	doc, err := builder.BuildOpenAPIV3(crd, version, builder.Options{})
	if err != nil {
		t.Fatalf("%s %s: builder: %v", crd.Name, version, err)
	}
	kubeTypes, err := schemaconv.ToSchemaFromOpenAPI(doc.Components.Schemas, preserve)
	if err != nil {
		t.Fatalf("%s %s: schemaconv: %v", crd.Name, version, err)
	}
	kube, err := managedfields.NewTypeConverter(doc.Components.Schemas, preserve)
	if err != nil {
		t.Fatalf("%s %s: %v", crd.Name, version, err)
	}
	tc, _, err := newKindTypeConverter(crd, version)
	if err != nil {
		t.Fatalf("%s %s: %v", crd.Name, version, err)
	}
	ours := tc.(*kindTypeConverter)

	// Every type of kube's but the list's is ours, the same.
	list := modelName(crd.Spec.Group, version, crd.Spec.Names.ListKind)
	own := map[string]string{}
	for _, td := range ours.typ.Schema.Types {
		own[td.Name] = canonical(t, td)
	}
	for _, td := range kubeTypes.Types {
		if td.Name == list {
			continue
		}
		got, ok := own[td.Name]
		if !ok {
			t.Fatalf("%s %s: no type %s", crd.Name, version, td.Name)
		}
		if want := canonical(t, td); got != want {
			t.Fatalf("%s %s: type %s:\n got %s\nwant %s", crd.Name, version, td.Name, got, want)
		}
	}

	// Objects are typed the same.
	objs := []map[string]any{{"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "y"}}}}
	if !strings.Contains(crd.Spec.Group, "azure") {
		objs = append(objs, map[string]any{"metadata": map[string]any{"name": "b"}, "spec": map[string]any{
			"template": map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "x": int64(1)},
			"objects":  []any{map[string]any{"kind": "K", "apiVersion": "v1", "data": "d"}},
			"byName":   map[string]any{"one": map[string]any{"kind": "K", "apiVersion": "v1", "y": true}},
			"ports":    []any{map[string]any{"name": "http", "protocol": "TCP", "port": "web"}, map[string]any{"name": "http", "protocol": "UDP", "port": int64(53)}},
			"tags":     []any{"a", "b"}, "atomic": map[string]any{"a": "b"}, "free": map[string]any{"any": []any{int64(1)}},
			"maybe": nil, "size": int64(2)}, "status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}})
	} else {
		objs = append(objs, variants(t, crd, version)...)
	}
	for i, obj := range objs {
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(crd.Spec.Group + "/" + version)
		u.SetKind(crd.Spec.Names.Kind)
		want, werr := kube.ObjectToTyped(u.DeepCopy())
		got, gerr := ours.ObjectToTyped(u.DeepCopy())
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%s %s object %d: error %v, kube's %v", crd.Name, version, i, gerr, werr)
		}
		if werr != nil {
			continue
		}
		gs, err := got.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		ws, err := want.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		if !gs.Equals(ws) {
			t.Fatalf("%s %s object %d: field set\n%s\nkube's\n%s", crd.Name, version, i, gs, ws)
		}
		if !value.Equals(got.AsValue(), want.AsValue()) {
			t.Fatalf("%s %s object %d: typed value differs from kube's", crd.Name, version, i)
		}
	}

	// Another kind of the group and version has no type, as in kube's.
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(crd.Spec.Group + "/" + version)
	u.SetKind("Other" + crd.Spec.Names.Kind)
	if _, err := ours.ObjectToTyped(u); err == nil {
		t.Fatalf("%s %s: typed an object of another kind", crd.Name, version)
	}
}

// canonical is td as YAML (JSON would drop the fields List and Map both
// have) with every map's fields in name order (schemaconv orders them as
// it iterates a Go map).
func canonical(t *testing.T, td smdschema.TypeDef) string {
	t.Helper()
	var atom func(a *smdschema.Atom)
	ref := func(r *smdschema.TypeRef) {
		if r.NamedType == nil {
			atom(&r.Inlined)
		}
	}
	atom = func(a *smdschema.Atom) {
		if a.Map != nil {
			m := &smdschema.Map{Fields: slices.Clone(a.Fields), Unions: a.Unions, ElementType: a.Map.ElementType, ElementRelationship: a.Map.ElementRelationship}
			slices.SortFunc(m.Fields, func(x, y smdschema.StructField) int { return strings.Compare(x.Name, y.Name) })
			for i := range m.Fields {
				ref(&m.Fields[i].Type)
			}
			ref(&m.ElementType)
			a.Map = m
		}
		if a.List != nil {
			l := *a.List
			ref(&l.ElementType)
			a.List = &l
		}
	}
	atom(&td.Atom)
	b, err := yaml.Marshal(td)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkTypeConverter builds the type converter of each version of the
// corpus's CRDs and types one object with it: as kube-apiserver builds it
// (the builder's whole document, converted) and as crdserver does.
func BenchmarkTypeConverter(b *testing.B) {
	crds, _, err := fixtures.Corpus()
	if err != nil {
		b.Fatal(err)
	}
	build := map[string]func(*apiextensionsv1.CustomResourceDefinition, string) (managedfields.TypeConverter, error){
		"kube": func(crd *apiextensionsv1.CustomResourceDefinition, v string) (managedfields.TypeConverter, error) {
			doc, err := builder.BuildOpenAPIV3(crd, v, builder.Options{})
			if err != nil {
				return nil, err
			}
			return managedfields.NewTypeConverter(doc.Components.Schemas, crd.Spec.PreserveUnknownFields)
		},
		"crdserver": func(crd *apiextensionsv1.CustomResourceDefinition, v string) (managedfields.TypeConverter, error) {
			tc, _, err := newKindTypeConverter(crd, v)
			return tc, err
		},
	}
	for _, name := range []string{"kube", "crdserver"} {
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				crd := crds[i%len(crds)]
				v := crd.Spec.Versions[0].Name
				tc, err := build[name](crd, v)
				if err != nil {
					b.Fatal(err)
				}
				u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "a"}}}
				u.SetAPIVersion(crd.Spec.Group + "/" + v)
				u.SetKind(crd.Spec.Names.Kind)
				if _, err := tc.ObjectToTyped(u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
