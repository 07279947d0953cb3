package storagemigration

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index)) { fn(f.ix) }
func (f fixedReader) CatchUp(context.Context) error         { return nil }

// TestMigrateRewritesThroughTheAPI: every object is written back as read,
// in the storage version; the ones the server stored again count; then
// storedVersions is trimmed.
func TestMigrateRewritesThroughTheAPI(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v2", Resource: "widgets"}
	var objs []runtime.Object
	for i := 0; i < 5; i++ {
		stale := "false"
		if i%2 == 0 {
			stale = "true"
		}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v2", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i), "namespace": "default", "resourceVersion": "7", "labels": map[string]any{"stale": stale}},
		}})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "WidgetList"}, objs...)
	// The server stores again only what was in an older version.
	var updates int
	dyn.PrependReactor("update", "widgets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		updates++
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		if u.GetLabels()["stale"] == "true" {
			u.SetResourceVersion("8")
		}
		return true, u, nil
	})
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1"}, {Name: "v2", Storage: true}}},
		Status:     apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1", "v2"}},
	}
	crds := apiextensionsfake.NewClientset(crd)
	res := &resource.Resource{Group: "example.com", Plural: "widgets", Kind: "Widget", Namespaced: true, StorageVersion: "v2", Cache: store.NewFixedCache("/registry/example.com/widgets/", 7)}
	ix := &registry.Index{Resources: []*resource.Resource{res}, CRDResources: map[string]*resource.Resource{crd.Name: res}}
	c := New(fixedReader{ix}, nil, crds, dyn, slog.New(slog.DiscardHandler))

	var progress []string
	n, err := c.migrate(context.Background(), "example.com", "widgets", func(rv string, done, total, rewritten int) {
		progress = append(progress, fmt.Sprintf("%d/%d %d", done, total, rewritten))
	})
	if err != nil || n != 3 || updates != 5 {
		t.Fatalf("migrated %d (err %v), %d writes; want 3 of 5 written", n, err, updates)
	}
	if len(progress) != 1 || progress[0] != "5/5 3" {
		t.Fatalf("progress %v", progress)
	}
	got, _ := crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd.Name, metav1.GetOptions{})
	if fmt.Sprint(got.Status.StoredVersions) != "[v2]" {
		t.Fatalf("storedVersions %v", got.Status.StoredVersions)
	}
	// A resource that is not served is an error of the migration.
	if _, err := c.migrate(context.Background(), "example.com", "gadgets", func(string, int, int, int) {}); err == nil {
		t.Fatal("migrating an unknown resource succeeded")
	}
}
