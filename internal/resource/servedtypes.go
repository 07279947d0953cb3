package resource

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/crdserver/crdserver/internal/request"
)

// ServedSchemas are the structured-merge-diff schemas of the built-in
// kinds, compiled in (servedtypes_gen.go): kube, the k8s.io/api kinds
// crdserver serves and every type they refer to, the part of client-go's
// schema (the one server-side apply uses for these types) the server needs
// (some 350 types, the workload kinds' pod templates among them, of
// client-go's 959); crds, apiextensions-apiserver's. Being Go data, they
// take no time or heap when a process starts (parsing client-go's part
// took some 15 ms and 3 MB). internal/apis' TestServedTypes writes them
// from client-go's and apiextensions-apiserver's schemas and checks them
// against those.
func ServedSchemas() (kube, crds *schema.Schema) {
	return &schema.Schema{Types: servedKubeTypes}, &schema.Schema{Types: servedCRDTypes}
}

// servedTypes converts the k8s.io/api kinds with their compiled-in schema
// (ServedSchemas), and any other kind with client-go's whole schema
// (parsed on first use). It types objects as apimachinery's scheme type
// converter does (managedfields.NewSchemeTypeConverter, its oracle in
// TestServedTypesFallBack), with the scheme's name of each kind's type
// kept: finding it makes a new object of the type.
type servedTypes struct {
	scheme *runtime.Scheme
	parser *typed.Parser
	names  sync.Map // schema.GroupVersionKind → string
	// served is apimachinery's scheme type converter on parser, which
	// turns typed values back into objects (whatever their schema).
	served managedfields.TypeConverter
}

func newServedTypes() *servedTypes {
	scheme := request.Scheme()
	parser := &typed.Parser{Schema: schema.Schema{Types: servedKubeTypes}}
	return &servedTypes{scheme: scheme, parser: parser, served: managedfields.NewSchemeTypeConverter(scheme, parser)}
}

// newCRDTypes is apiextensions-apiserver's type converter
// (applyconfiguration.NewTypeConverter) on the compiled-in schema.
func newCRDTypes() managedfields.TypeConverter {
	return managedfields.NewSchemeTypeConverter(request.Scheme(), &typed.Parser{Schema: schema.Schema{Types: servedCRDTypes}})
}

// allKubeTypes is client-go's type converter of every k8s.io/api type.
var allKubeTypes = sync.OnceValue(func() managedfields.TypeConverter {
	return applyconfigurations.NewTypeConverter(request.Scheme())
})

func (s *servedTypes) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	name, ok := s.names.Load(gvk)
	if !ok {
		n, err := s.scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			return allKubeTypes().ObjectToTyped(obj, opts...)
		}
		name, _ = s.names.LoadOrStore(gvk, n)
	}
	t := s.parser.Type(name.(string))
	if !t.IsValid() {
		return allKubeTypes().ObjectToTyped(obj, opts...)
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return t.FromUnstructured(u.UnstructuredContent(), opts...)
	}
	return t.FromStructured(obj, opts...)
}

func (s *servedTypes) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return s.served.TypedToObject(v)
}
