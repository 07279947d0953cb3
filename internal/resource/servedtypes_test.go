package resource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdserver/crdserver/internal/request"
)

// TestServedTypesFallBack: a served kind is typed with the served types'
// schema; a k8s.io/api kind outside it with client-go's whole schema.
func TestServedTypesFallBack(t *testing.T) {
	if err := request.AddProtobufTypes(corev1.AddToScheme); err != nil {
		t.Fatal(err)
	}
	tc := builtinTypes()
	served := len(newServedTypes().parser.Schema.Types)
	for _, tt := range []struct {
		kind string
		all  bool
	}{{"ConfigMap", false}, {"Pod", true}} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": tt.kind,
			"metadata": map[string]any{"name": "a", "labels": map[string]any{"a": "b"}}}}
		tv, err := tc.ObjectToTyped(obj)
		if err != nil {
			t.Fatalf("%s: %v", tt.kind, err)
		}
		if n := len(tv.Schema().Types); (n > served) != tt.all {
			t.Errorf("%s typed with a schema of %d types (the served types: %d)", tt.kind, n, served)
		}
		if _, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": tt.kind, "spec": "x", "data": 1}}); err == nil {
			t.Errorf("%s: a body against the schema converted", tt.kind)
		}
	}
}
