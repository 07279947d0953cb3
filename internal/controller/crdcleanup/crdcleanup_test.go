package crdcleanup

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index)) { fn(f.ix) }

func deletedCRD(established bool) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", DeletionTimestamp: &metav1.Time{}, Finalizers: []string{apiextensionsv1.CustomResourceCleanupFinalizer}},
		Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"}},
	}
	if established {
		apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue})
	}
	return crd
}

func setup(crd *apiextensionsv1.CustomResourceDefinition, widgets ...*store.Item) (*Controller, *apiextensionsfake.Clientset) {
	crds := apiextensionsfake.NewClientset(crd)
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "WidgetList"})
	res := &resource.Resource{Group: "example.com", Plural: "widgets", Kind: "Widget", StorageVersion: "v1",
		KeyPrefix: "/registry/example.com/widgets/", Cache: store.NewFixedCache("/registry/example.com/widgets/", 1, widgets...)}
	ix := &registry.Index{
		CRDs:         map[string]*apiextensionsv1.CustomResourceDefinition{crd.Name: crd},
		CRDResources: map[string]*resource.Resource{crd.Name: res},
	}
	return New(fixedReader{ix}, crds, dyn, slog.New(slog.DiscardHandler)), crds
}

func TestNeverEstablishedCRDGoesAtOnce(t *testing.T) {
	c, crds := setup(deletedCRD(false))
	if err := c.sync(context.Background(), "widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	got, _ := crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "widgets.example.com", metav1.GetOptions{})
	term := apihelpers.FindCRDCondition(got, apiextensionsv1.Terminating)
	if len(got.Finalizers) != 0 || term == nil || term.Reason != "NeverEstablished" || term.Status != "False" {
		t.Fatalf("finalizers %v, terminating %+v", got.Finalizers, term)
	}
}

func TestCRDWaitsForItsObjects(t *testing.T) {
	w, _ := resource.DecodeItem("/registry/example.com/widgets/w", []byte(`{"metadata":{"name":"w"}}`), 1)
	c, crds := setup(deletedCRD(true), w)
	if err := c.sync(context.Background(), "widgets.example.com"); !errors.Is(err, controller.Requeue()) {
		t.Fatalf("an object remains, yet sync says %v", err)
	}
	got, _ := crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "widgets.example.com", metav1.GetOptions{})
	term := apihelpers.FindCRDCondition(got, apiextensionsv1.Terminating)
	if len(got.Finalizers) != 1 || term == nil || term.Reason != "InstanceDeletionInProgress" {
		t.Fatalf("finalizers %v, terminating %+v", got.Finalizers, term)
	}
	// Once empty (cache and a consistent list), the finalizer goes.
	c, crds = setup(deletedCRD(true))
	if err := c.sync(context.Background(), "widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	got, _ = crds.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "widgets.example.com", metav1.GetOptions{})
	if term := apihelpers.FindCRDCondition(got, apiextensionsv1.Terminating); len(got.Finalizers) != 0 || term.Reason != "InstanceDeletionCompleted" {
		t.Fatalf("finalizers %v, terminating %+v", got.Finalizers, term)
	}
}
