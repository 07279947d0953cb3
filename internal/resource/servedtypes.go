package resource

import (
	_ "embed"
	"log/slog"
	"sync"

	yaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/crdserver/crdserver/internal/request"
)

// ServedTypesYAML is the structured-merge-diff schema of the k8s.io/api
// kinds crdserver serves, and of every type they refer to: the part of
// client-go's schema (the one server-side apply uses for these types) the
// server needs. A server's first write waits for it to be read, so it is
// this part (some 350 types, the workload kinds' pod templates among
// them), not client-go's whole schema (959 types), and it is read without
// smd's check against its schema of schemas (a third of the time).
// internal/apis' TestServedTypes makes it from client-go's schema and
// checks it is what client-go says.
//
//go:embed servedtypes.yaml
var ServedTypesYAML []byte

// servedTypes converts the k8s.io/api kinds with the schema of
// ServedTypesYAML, and any other kind with client-go's whole schema
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
	// typed.NewParser would first check the YAML against smd's schema of
	// schemas, which takes twice as long as reading it; TestServedTypes
	// checks the file instead, type by type against client-go's.
	parser := &typed.Parser{}
	if err := yaml.Unmarshal(ServedTypesYAML, &parser.Schema); err != nil {
		// Only a broken build gets here (TestServedTypes parses it).
		slog.Error("resource: the served types' schema does not parse; using client-go's", "err", err)
		parser = &typed.Parser{}
	}
	scheme := request.Scheme()
	return &servedTypes{scheme: scheme, parser: parser, served: managedfields.NewSchemeTypeConverter(scheme, parser)}
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
