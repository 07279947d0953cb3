package namespace

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/crdserver/crdserver/internal/apis/core"
	"github.com/crdserver/crdserver/internal/controller"
	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index)) { fn(f.ix) }

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func item(t *testing.T, key string, obj map[string]any) *store.Item {
	t.Helper()
	raw, _ := json.Marshal(obj)
	it, err := resource.DecodeItem(key, raw, 5)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// setup: namespace "doomed" being deleted; widgets holds what the widgets
// cache holds.
func setup(t *testing.T, widgets ...*store.Item) (*Controller, *dynamicfake.FakeDynamicClient) {
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "doomed", "deletionTimestamp": "2026-11-24T12:00:00Z"},
		"spec": map[string]any{"finalizers": []any{"kubernetes"}}}
	namespaces := core.Namespaces(store.NewFixedCache(core.NamespacePrefix, 5, item(t, core.NamespacePrefix+"doomed", ns)), nil)
	res := &resource.Resource{Group: "example.com", Plural: "widgets", Kind: "Widget", Namespaced: true,
		Versions: []*resource.Version{{Name: "v1"}}, StorageVersion: "v1", KeyPrefix: "/registry/example.com/widgets/",
		Cache: store.NewFixedCache("/registry/example.com/widgets/", 5, widgets...), Converter: conversion.None{}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgetsGVR: "WidgetList", namespacesGVR: "NamespaceList"}, &unstructured.Unstructured{Object: ns})
	ix := &registry.Index{Resources: []*resource.Resource{namespaces, res}}
	return New(fixedReader{ix}, namespaces, dyn, slog.New(slog.DiscardHandler)), dyn
}

func verbs(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		v := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			v += "/" + a.GetSubresource()
		}
		if a.GetNamespace() != "" {
			v += " in " + a.GetNamespace()
		}
		out = append(out, v)
	}
	return out
}

func TestNamespaceWithObjectsIsEmptiedFirst(t *testing.T) {
	w := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": "doomed"}}
	c, dyn := setup(t, item(t, "/registry/example.com/widgets/doomed/w", w))
	err := c.sync(context.Background(), "doomed")
	if !errors.Is(err, controller.Requeue()) {
		t.Fatalf("objects were left, yet sync says %v", err)
	}
	if v := verbs(dyn); len(v) != 1 || v[0] != "delete-collection widgets in doomed" {
		t.Fatalf("actions: %v", v)
	}
}

func TestEmptyNamespaceIsFinalized(t *testing.T) {
	c, dyn := setup(t)
	if err := c.sync(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	v := verbs(dyn)
	// The empty cache is confirmed by a list before the namespace goes.
	if len(v) != 3 || v[0] != "list widgets in doomed" || v[1] != "get namespaces" || v[2] != "update namespaces/finalize" {
		t.Fatalf("actions: %v", v)
	}
	got, _ := dyn.Resource(namespacesGVR).Get(context.Background(), "doomed", metav1.GetOptions{})
	if f, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "finalizers"); len(f) != 0 {
		t.Fatalf("finalizers left: %v", f)
	}
}
