package integration

import (
	"net/http"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"
)

func TestSelectableFields(t *testing.T) {
	e := start(t)
	fx := loadSchemaFixtures(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal([]byte(fx.doc(t, "crd-shirt")), crd); err != nil {
		t.Fatal(err)
	}
	e.createCRD(crd)
	shirts := e.dyn.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "shirts"}).Namespace("default")
	for _, id := range []string{"cr-shirt-example1", "cr-shirt-example2", "cr-shirt-example3"} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(fx.doc(t, id)), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := shirts.Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(sel string) []string {
		t.Helper()
		l, err := shirts.List(e.ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		var out []string
		for _, it := range l.Items {
			out = append(out, it.GetName())
		}
		return out
	}
	if got := names("spec.color=blue"); !slices.Equal(got, []string{"example1", "example2"}) {
		t.Fatalf("spec.color=blue: %v", got)
	}
	if got := names("spec.color=green,spec.size=M"); !slices.Equal(got, []string{"example3"}) {
		t.Fatalf("spec.color=green,spec.size=M: %v", got)
	}
	if got := names("spec.size!=M"); !slices.Equal(got, []string{"example1"}) {
		t.Fatalf("spec.size!=M: %v", got)
	}
	// Paginated reads from etcd filter the same way.
	l, err := shirts.List(e.ctx, metav1.ListOptions{FieldSelector: "spec.color==blue", Limit: 1, ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("paginated: %v %d", err, len(l.Items))
	}
	// Watch.
	w, err := shirts.Watch(e.ctx, metav1.ListOptions{FieldSelector: "spec.color=red"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	red := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "stable.example.com/v1", "kind": "Shirt",
		"metadata": map[string]any{"name": "red"}, "spec": map[string]any{"color": "red", "size": "L"}}}
	if _, err := shirts.Create(e.ctx, red, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != "red" {
			t.Fatalf("watch: %s", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	// An unsupported field: 400 as Kubernetes words it; deletecollection too.
	expectStatus(t, e.do("GET", "/apis/stable.example.com/v1/namespaces/default/shirts?fieldSelector=spec.other%3Dx", ""),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, "field label not supported: spec.other")
	if err := shirts.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.color=blue"}); err != nil {
		t.Fatal(err)
	}
	if got := names(""); !slices.Equal(got, []string{"example3", "red"}) {
		t.Fatalf("after deletecollection: %v", got)
	}
}
