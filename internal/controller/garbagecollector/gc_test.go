package garbagecollector

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/crdserver/crdserver/internal/conversion"
	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/store"
)

const prefix = "/registry/example.com/widgets/"

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

type fixedReader struct{ ix *registry.Index }

func (f fixedReader) Index() *registry.Index                { return f.ix }
func (f fixedReader) Subscribe(fn func(ix *registry.Index)) { fn(f.ix) }

// obj is a stored Widget: name, uid, and its metadata extras.
func obj(name, uid string, md map[string]any) *store.Item {
	m := map[string]any{"name": name, "namespace": "default", "uid": uid}
	for k, v := range md {
		m[k] = v
	}
	raw, _ := json.Marshal(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": m})
	it, err := resource.DecodeItem(prefix+"default/"+name, raw, 10)
	if err != nil {
		panic(err)
	}
	return it
}

func ownedBy(name, uid string, block bool) map[string]any {
	return map[string]any{"ownerReferences": []any{map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "name": name, "uid": uid, "blockOwnerDeletion": block}}}
}

// collector returns a collector over one Widget resource holding items,
// whose API (a fake dynamic client) holds the same objects.
func collector(items ...*store.Item) (*Collector, *dynamicfake.FakeDynamicClient) {
	res := &resource.Resource{Group: "example.com", Plural: "widgets", Kind: "Widget", Namespaced: true,
		Versions: []*resource.Version{{Name: "v1"}}, StorageVersion: "v1", KeyPrefix: prefix,
		Cache: store.NewFixedCache(prefix, 10, items...), Converter: conversion.None{}}
	var objs []runtime.Object
	for _, it := range items {
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON(it.Raw)
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgetsGVR: "WidgetList"}, objs...)
	g := New(fixedReader{&registry.Index{Resources: []*resource.Resource{res}}}, dyn, slog.New(slog.DiscardHandler))
	for _, it := range items {
		g.observe(it, false)
	}
	return g, dyn
}

// writes lists the write actions as "verb name detail".
func writes(dyn *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range dyn.Actions() {
		switch a := a.(type) {
		case clienttesting.DeleteAction:
			policy := ""
			if p := a.GetDeleteOptions().PropagationPolicy; p != nil {
				policy = string(*p)
			}
			out = append(out, "delete "+a.GetName()+" "+policy)
		case clienttesting.PatchAction:
			out = append(out, "patch "+a.GetName()+" "+string(a.GetPatch()))
		}
	}
	return out
}

func TestDependentOfAGoneOwnerIsDeleted(t *testing.T) {
	g, dyn := collector(obj("child", "u-child", ownedBy("parent", "u-parent", false)))
	if err := g.process(context.Background(), prefix+"default/child"); err != nil {
		t.Fatal(err)
	}
	if w := writes(dyn); len(w) != 1 || w[0] != "delete child Background" {
		t.Fatalf("writes: %v", w)
	}
}

func TestDependentOfALiveOwnerStays(t *testing.T) {
	g, dyn := collector(obj("parent", "u-parent", nil), obj("child", "u-child", ownedBy("parent", "u-parent", false)))
	if err := g.process(context.Background(), prefix+"default/child"); err != nil {
		t.Fatal(err)
	}
	if w := writes(dyn); len(w) != 0 {
		t.Fatalf("writes: %v", w)
	}
	// An owner of the same name but another uid is gone: the reference is
	// stale.
	g, dyn = collector(obj("parent", "u-other", nil), obj("child", "u-child", ownedBy("parent", "u-parent", false)))
	_ = g.process(context.Background(), prefix+"default/child")
	if w := writes(dyn); len(w) != 1 || w[0] != "delete child Background" {
		t.Fatalf("writes: %v", w)
	}
}

func TestForegroundDeletion(t *testing.T) {
	parent := obj("parent", "u-parent", map[string]any{"deletionTimestamp": "2026-11-24T12:00:00Z", "finalizers": []any{metav1.FinalizerDeleteDependents}})
	child := obj("child", "u-child", ownedBy("parent", "u-parent", true))
	g, dyn := collector(parent, child)
	// The owner waits for its blocking dependent, which is deleted in the
	// foreground too.
	if err := g.process(context.Background(), parent.Key); err != nil {
		t.Fatal(err)
	}
	if w := writes(dyn); len(w) != 1 || w[0] != "delete child Foreground" {
		t.Fatalf("owner first: %v", w)
	}
	// Once the dependent is gone, the owner's finalizer goes.
	g.observe(child, true)
	if err := g.process(context.Background(), parent.Key); err != nil {
		t.Fatal(err)
	}
	w := writes(dyn)
	if len(w) != 2 || !strings.HasPrefix(w[1], "patch parent ") || !strings.Contains(w[1], `"finalizers":null`) || !strings.Contains(w[1], `"uid":"u-parent"`) {
		t.Fatalf("owner then: %v", w)
	}
}

func TestOrphanDeletion(t *testing.T) {
	parent := obj("parent", "u-parent", map[string]any{"deletionTimestamp": "2026-11-24T12:00:00Z", "finalizers": []any{metav1.FinalizerOrphanDependents}})
	child := obj("child", "u-child", ownedBy("parent", "u-parent", false))
	g, dyn := collector(parent, child)
	if err := g.process(context.Background(), parent.Key); err != nil {
		t.Fatal(err)
	}
	w := writes(dyn)
	if len(w) != 2 || !strings.Contains(w[0], `patch child {"metadata":{"ownerReferences":null`) || !strings.Contains(w[1], "patch parent ") {
		t.Fatalf("orphaning: %v", w)
	}
}
