package resource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/applyconfigurations"
	"sigs.k8s.io/structured-merge-diff/v6/value"

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
	}{{"ConfigMap", false}, {"Node", true}} {
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

// TestServedTypesAsClientGo: a served kind, as a Go object and as
// unstructured, types to the value and field set client-go's converter
// gives (the oracle), and back to the same object.
func TestServedTypesAsClientGo(t *testing.T) {
	if err := request.AddProtobufTypes(corev1.AddToScheme); err != nil {
		t.Fatal(err)
	}
	oracle := applyconfigurations.NewTypeConverter(request.Scheme())
	st := newServedTypes()
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"a": "b"}}, Data: map[string]string{"k": "v"}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{cm, &unstructured.Unstructured{Object: u}} {
		got, err := st.ObjectToTyped(obj)
		if err != nil {
			t.Fatalf("%T: %v", obj, err)
		}
		want, err := oracle.ObjectToTyped(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !value.Equals(got.AsValue(), want.AsValue()) {
			t.Errorf("%T: typed value differs from client-go's", obj)
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
			t.Errorf("%T: field set %s, client-go's %s", obj, gs, ws)
		}
		back, err := st.TypedToObject(got)
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(back.(*unstructured.Unstructured).Object, u) {
			t.Errorf("%T: back %v, want %v", obj, back, u)
		}
	}
}
