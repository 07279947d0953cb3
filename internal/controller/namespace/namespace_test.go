package namespace

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

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

var (
	widgetsGVR    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	eventsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	kinds         = map[string]string{"widgets": "Widget", "configmaps": "ConfigMap", "events": "Event"}
)

func item(t *testing.T, key string, obj map[string]any) *store.Item {
	t.Helper()
	raw, _ := json.Marshal(obj)
	it, err := resource.DecodeItem(key, raw, 5)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// object is an object of apiVersion and kind named name in namespace
// doomed, with finalizers.
func object(apiVersion, kind, name string, finalizers ...string) map[string]any {
	meta := map[string]any{"name": name, "namespace": "doomed"}
	if len(finalizers) > 0 {
		meta["finalizers"] = toAny(finalizers)
	}
	return map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// world is namespace "doomed", being deleted, with widgets (example.com)
// and configmaps (core) in it: in their watch caches and in the fake API.
type world struct {
	c   *Controller
	dyn *dynamicfake.FakeDynamicClient
	// at is the time the controller reads, set by the test.
	at time.Time
}

func testResource(group, plural, kind, prefix string, cache *store.Cache) *resource.Resource {
	return &resource.Resource{Group: group, Plural: plural, Kind: kind, Namespaced: true,
		Versions: []*resource.Version{{Name: "v1"}}, StorageVersion: "v1", KeyPrefix: prefix,
		Cache: cache, Converter: conversion.None{}, Verbs: resource.DefaultVerbs}
}

func setup(t *testing.T, nsFinalizers []string, widgets, configMaps []map[string]any) *world {
	t.Helper()
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "doomed", "deletionTimestamp": "2026-11-24T12:00:00Z"},
		"spec":     map[string]any{"finalizers": toAny(nsFinalizers)},
		"status":   map[string]any{"phase": "Terminating"}}
	namespaces := core.Namespaces(store.NewFixedCache(core.NamespacePrefix, 5, item(t, core.NamespacePrefix+"doomed", ns)), nil)
	objects := []runtime.Object{&unstructured.Unstructured{Object: ns}}
	cached := func(prefix string, objs []map[string]any) *store.Cache {
		var items []*store.Item
		for _, o := range objs {
			name, _, _ := unstructured.NestedString(o, "metadata", "name")
			items = append(items, item(t, prefix+"doomed/"+name, o))
			objects = append(objects, &unstructured.Unstructured{Object: o})
		}
		return store.NewFixedCache(prefix, 5, items...)
	}
	widgetRes := testResource("example.com", "widgets", "Widget", "/registry/example.com/widgets/", cached("/registry/example.com/widgets/", widgets))
	cmRes := testResource("", "configmaps", "ConfigMap", "/registry/configmaps/", cached("/registry/configmaps/", configMaps))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{widgetsGVR: "WidgetList", configMapsGVR: "ConfigMapList", namespacesGVR: "NamespaceList",
			eventsGVR: "EventList", {Group: "events.k8s.io", Version: "v1", Resource: "events"}: "EventList"}, objects...)
	// A delete of a collection deletes what has no finalizers and marks the
	// rest deleted, as the API does.
	dyn.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		gvr, nsName := a.GetResource(), a.GetNamespace()
		l, err := dyn.Tracker().List(gvr, gvr.GroupVersion().WithKind(kinds[gvr.Resource]), nsName)
		if err != nil {
			return true, nil, err
		}
		list, _ := l.(*unstructured.UnstructuredList)
		for i := range list.Items {
			o := &list.Items[i]
			if len(o.GetFinalizers()) == 0 {
				if err := dyn.Tracker().Delete(gvr, nsName, o.GetName()); err != nil {
					return true, nil, err
				}
				continue
			}
			now := metav1.NewTime(time.Date(2026, 11, 24, 12, 0, 1, 0, time.UTC))
			o.SetDeletionTimestamp(&now)
			if err := dyn.Tracker().Update(gvr, o, nsName); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	ix := &registry.Index{Resources: []*resource.Resource{namespaces, widgetRes, cmRes}}
	w := &world{dyn: dyn, at: time.Date(2026, 11, 24, 12, 0, 6, 0, time.UTC)}
	w.c = New(fixedReader{ix}, namespaces, dyn, slog.New(slog.DiscardHandler))
	w.c.now = func() metav1.Time { return metav1.NewTime(w.at) }
	return w
}

func (w *world) namespace(t *testing.T) *corev1.Namespace {
	t.Helper()
	u, err := w.dyn.Resource(namespacesGVR).Get(context.Background(), "doomed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ns); err != nil {
		t.Fatal(err)
	}
	return &ns
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

// cond is a condition without its time, for comparing.
type cond struct{ Type, Status, Reason, Message string }

func conds(ns *corev1.Namespace) []cond {
	var out []cond
	for _, c := range ns.Status.Conditions {
		out = append(out, cond{string(c.Type), string(c.Status), c.Reason, c.Message})
	}
	return out
}

// What kube-controller-manager v1.37.2 sets on a namespace whose only
// content left is one object carrying the finalizer example.com/hold, and
// then once that object has gone.
var (
	stuckOnConfigMap = []cond{
		{"NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"},
		{"NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
		{"NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
		{"NamespaceContentRemaining", "True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances"},
		{"NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"},
	}
	allDone = []cond{
		{"NamespaceDeletionDiscoveryFailure", "False", "ResourcesDiscovered", "All resources successfully discovered"},
		{"NamespaceDeletionGroupVersionParsingFailure", "False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
		{"NamespaceDeletionContentFailure", "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
		{"NamespaceContentRemaining", "False", "ContentRemoved", "All content successfully removed"},
		{"NamespaceFinalizersRemaining", "False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
	}
)

func mustConds(t *testing.T, what string, got, want []cond) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestNamespaceWithObjectsIsEmptiedFirst(t *testing.T) {
	w := setup(t, []string{"kubernetes"}, []map[string]any{object("example.com/v1", "Widget", "w")}, nil)
	err := w.c.sync(context.Background(), "doomed")
	if err != nil {
		t.Fatalf("the widget went, yet sync says %v", err)
	}
	v := verbs(w.dyn)
	want := []string{
		"get namespaces",
		"delete-collection widgets in doomed", "list widgets in doomed",
		"list configmaps in doomed", // the empty cache is confirmed
		"update namespaces/status", "update namespaces/finalize",
	}
	if !slices.Equal(v, want) {
		t.Fatalf("actions:\n got %q\nwant %q", v, want)
	}
	ns := w.namespace(t)
	mustConds(t, "conditions of the emptied namespace", conds(ns), allDone)
	if len(ns.Spec.Finalizers) != 0 {
		t.Fatalf("finalizers left: %v", ns.Spec.Finalizers)
	}
	if _, err := w.dyn.Resource(widgetsGVR).Namespace("doomed").Get(context.Background(), "w", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the widget is still there: %v", err)
	}
}

func TestEmptyNamespaceIsFinalized(t *testing.T) {
	w := setup(t, []string{"kubernetes"}, nil, nil)
	if err := w.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	v := verbs(w.dyn)
	want := []string{"get namespaces", "list widgets in doomed", "list configmaps in doomed", "update namespaces/status", "update namespaces/finalize"}
	if !slices.Equal(v, want) {
		t.Fatalf("actions:\n got %q\nwant %q", v, want)
	}
	ns := w.namespace(t)
	// Kubernetes sets the five conditions even on a namespace that was
	// empty, before it finalizes it.
	mustConds(t, "conditions", conds(ns), allDone)
	if len(ns.Spec.Finalizers) != 0 {
		t.Fatalf("finalizers left: %v", ns.Spec.Finalizers)
	}
}

func TestOtherNamespaceFinalizersAreKept(t *testing.T) {
	w := setup(t, []string{"example.com/ns-hold", "kubernetes", "example.com/a"}, nil, nil)
	if err := w.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	if f := w.namespace(t).Spec.Finalizers; !slices.Equal(f, []corev1.FinalizerName{"example.com/a", "example.com/ns-hold"}) {
		t.Fatalf("finalizers: %v", f)
	}
	// Once only others' finalizers are left there is nothing more to do.
	w.dyn.ClearActions()
	if err := w.c.sync(context.Background(), "doomed"); err != nil {
		t.Fatal(err)
	}
	if v := verbs(w.dyn); slices.Contains(v, "update namespaces/finalize") || slices.Contains(v, "update namespaces/status") {
		t.Fatalf("actions: %q", v)
	}
}

// A namespace stuck on an object's finalizer says so, as Kubernetes does;
// when the object goes the conditions turn False and the namespace goes.
func TestStuckNamespaceConditions(t *testing.T) {
	w := setup(t, []string{"kubernetes"}, nil, []map[string]any{
		object("v1", "ConfigMap", "held", "example.com/hold"),
		object("v1", "ConfigMap", "kube-root-ca.crt"),
	})
	ctx := context.Background()
	first := w.at
	if err := w.c.sync(ctx, "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatalf("an object is left, yet sync says %v", err)
	}
	ns := w.namespace(t)
	mustConds(t, "conditions of the stuck namespace", conds(ns), stuckOnConfigMap)
	for _, c := range ns.Status.Conditions {
		if !c.LastTransitionTime.Time.Equal(first) {
			t.Fatalf("%s set at %v, not at the pass's time %v", c.Type, c.LastTransitionTime, first)
		}
	}
	if ns.Spec.Finalizers[0] != corev1.FinalizerKubernetes {
		t.Fatalf("finalized while an object is left: %v", ns.Spec.Finalizers)
	}

	// Another pass that finds the same writes nothing.
	w.dyn.ClearActions()
	w.at = first.Add(time.Second)
	if err := w.c.sync(ctx, "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatal(err)
	}
	if v := verbs(w.dyn); slices.Contains(v, "update namespaces/status") {
		t.Fatalf("conditions rewritten unchanged: %q", v)
	}

	// The finalizer is removed; the object goes.
	if err := w.dyn.Tracker().Delete(configMapsGVR, "doomed", "held"); err != nil {
		t.Fatal(err)
	}
	w.dyn.ClearActions()
	second := first.Add(2 * time.Second)
	w.at = second
	if err := w.c.sync(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	v := verbs(w.dyn)
	if len(v) < 2 || v[len(v)-2] != "update namespaces/status" || v[len(v)-1] != "update namespaces/finalize" {
		t.Fatalf("actions: %q", v)
	}
	ns = w.namespace(t)
	mustConds(t, "conditions once the object went", conds(ns), allDone)
	// Only the conditions whose status changed have a new time.
	for _, c := range ns.Status.Conditions {
		want := first
		if c.Type == corev1.NamespaceContentRemaining || c.Type == corev1.NamespaceFinalizersRemaining {
			want = second
		}
		if !c.LastTransitionTime.Time.Equal(want) {
			t.Fatalf("%s lastTransitionTime %v, want %v", c.Type, c.LastTransitionTime, want)
		}
	}
	if len(ns.Spec.Finalizers) != 0 {
		t.Fatalf("not finalized: %v", ns.Spec.Finalizers)
	}
}

// Remaining objects are counted per resource.group and per finalizer,
// sorted, custom resources too.
func TestRemainingCountedPerResourceAndFinalizer(t *testing.T) {
	w := setup(t, []string{"kubernetes"},
		[]map[string]any{
			object("example.com/v1", "Widget", "a", "example.com/hold", "example.com/audit"),
			object("example.com/v1", "Widget", "b", "example.com/hold"),
			object("example.com/v1", "Widget", "c"),
		},
		[]map[string]any{object("v1", "ConfigMap", "held", "example.com/hold")})
	if err := w.c.sync(context.Background(), "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatalf("objects are left, yet sync says %v", err)
	}
	got := conds(w.namespace(t))
	want := slices.Clone(stuckOnConfigMap)
	want[3].Message = "Some resources are remaining: configmaps. has 1 resource instances, widgets.example.com has 2 resource instances"
	want[4].Message = "Some content in the namespace has finalizers remaining: example.com/audit in 1 resource instances, example.com/hold in 3 resource instances"
	mustConds(t, "conditions", got, want)
}

// A resource that cannot be listed makes NamespaceDeletionContentFailure
// True with the error, and the namespace stays.
func TestContentFailure(t *testing.T) {
	w := setup(t, []string{"kubernetes"}, nil, nil)
	w.dyn.PrependReactor("list", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("conversion webhook unreachable"))
	})
	err := w.c.sync(context.Background(), "doomed")
	if err == nil || errors.Is(err, controller.Requeue()) {
		t.Fatalf("sync: %v", err)
	}
	ns := w.namespace(t)
	want := slices.Clone(allDone)
	want[2] = cond{"NamespaceDeletionContentFailure", "True", "ContentDeletionFailed",
		"Failed to delete all resource types, 1 remaining: Internal error occurred: conversion webhook unreachable"}
	mustConds(t, "conditions", conds(ns), want)
	if len(ns.Spec.Finalizers) != 1 {
		t.Fatalf("finalized despite the failure: %v", ns.Spec.Finalizers)
	}
}

// Objects that a delete left without any finalizer are unexpected, as in
// Kubernetes.
func TestUnexpectedRemainingObjects(t *testing.T) {
	w := setup(t, []string{"kubernetes"}, []map[string]any{object("example.com/v1", "Widget", "w")}, nil)
	w.dyn.PrependReactor("delete-collection", "widgets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	if err := w.c.sync(context.Background(), "doomed"); err == nil {
		t.Fatal("sync succeeded")
	}
	got := conds(w.namespace(t))
	want := slices.Clone(allDone)
	want[2] = cond{"NamespaceDeletionContentFailure", "True", "ContentDeletionFailed",
		"Failed to delete all resource types, 1 remaining: unexpected items still remain in namespace: doomed for gvr: example.com/v1, Resource=widgets"}
	want[3] = cond{"NamespaceContentRemaining", "True", "SomeResourcesRemain", "Some resources are remaining: widgets.example.com has 1 resource instances"}
	mustConds(t, "conditions", got, want)
}

// Resources that share their objects (both Event APIs) are deleted and
// listed once, and their objects counted under each name, as discovery
// lists both.
func TestSharedObjectsCountedUnderEachResource(t *testing.T) {
	ev := object("v1", "Event", "e", "example.com/hold")
	w := setup(t, []string{"kubernetes"}, nil, nil)
	cache := store.NewFixedCache("/registry/events/", 5, item(t, "/registry/events/doomed/e", ev))
	if err := w.dyn.Tracker().Add(&unstructured.Unstructured{Object: ev}); err != nil {
		t.Fatal(err)
	}
	ix := w.c.reader.Index()
	ix.Resources = append(ix.Resources,
		testResource("", "events", "Event", "/registry/events/", cache),
		testResource("events.k8s.io", "events", "Event", "/registry/events/", cache))
	if err := w.c.sync(context.Background(), "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatal(err)
	}
	n := 0
	for _, v := range verbs(w.dyn) {
		if v == "delete-collection events in doomed" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("events deleted %d times: %q", n, verbs(w.dyn))
	}
	got := conds(w.namespace(t))
	want := slices.Clone(stuckOnConfigMap)
	want[3].Message = "Some resources are remaining: events. has 1 resource instances, events.events.k8s.io has 1 resource instances"
	want[4].Message = "Some content in the namespace has finalizers remaining: example.com/hold in 2 resource instances"
	mustConds(t, "conditions", got, want)
}

// Objects the cache holds as being deleted, each with a finalizer, are
// counted as the cache has them: nothing is deleted or listed again.
func TestHeldObjectsCountedFromCache(t *testing.T) {
	held := object("example.com/v1", "Widget", "w", "example.com/hold")
	held["metadata"].(map[string]any)["deletionTimestamp"] = "2026-11-24T12:00:01Z"
	w := setup(t, []string{"kubernetes"}, []map[string]any{held}, nil)
	if err := w.c.sync(context.Background(), "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatalf("an object is left, yet sync says %v", err)
	}
	want := []string{"get namespaces", "list configmaps in doomed", "update namespaces/status"}
	if v := verbs(w.dyn); !slices.Equal(v, want) {
		t.Fatalf("actions:\n got %q\nwant %q", v, want)
	}
	got := conds(w.namespace(t))
	wantConds := slices.Clone(stuckOnConfigMap)
	wantConds[3].Message = "Some resources are remaining: widgets.example.com has 1 resource instances"
	mustConds(t, "conditions", got, wantConds)

	// One that is not yet being deleted is deleted, and listed after.
	w = setup(t, []string{"kubernetes"}, []map[string]any{held, object("example.com/v1", "Widget", "new")}, nil)
	if err := w.c.sync(context.Background(), "doomed"); !errors.Is(err, controller.Requeue()) {
		t.Fatal(err)
	}
	if v := verbs(w.dyn); !slices.Contains(v, "delete-collection widgets in doomed") || !slices.Contains(v, "list widgets in doomed") {
		t.Fatalf("actions: %q", v)
	}
}
