package resource

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/request"
)

// finalizingWidgets have a finalize subresource that writes only
// spec.finalizers, as a namespace's does.
type finalizingWidgets struct{ widgetStrategy }

func (finalizingWidgets) PrepareForFinalize(_ context.Context, obj, old *Object) {
	spec, _ := obj.Content["spec"].(map[string]any)
	next := map[string]any{}
	if o, ok := old.Content["spec"].(map[string]any); ok {
		for k, v := range o {
			next[k] = v
		}
	}
	if f, ok := spec["finalizers"]; ok {
		next["finalizers"] = f
	} else {
		delete(next, "finalizers")
	}
	obj.Content["spec"] = next
}

func TestFinalizeSubresource(t *testing.T) {
	e := newEngine(t)
	e.res.Strategy = finalizingWidgets{}
	e.create(strings.Replace(widget("w", ""), `"size":1`, `"size":1,"finalizers":["kubernetes"]`, 1))
	path := widgetsPath + "/w/finalize"
	// Only spec.finalizers changes through it.
	a := e.do("PUT", path, "application/json", strings.Replace(widget("w", `,"resourceVersion":"2"`), `"size":1`, `"size":5`, 1))
	spec := a.body["spec"].(map[string]any)
	if a.code != 200 || spec["size"] != 1.0 || spec["finalizers"] != nil {
		t.Fatalf("finalize: %d %s", a.code, a.raw)
	}
	e.do("GET", path, "", "").status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	e.do("PATCH", path, "application/merge-patch+json", `{}`).status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	// A resource without the rules has no finalize subresource.
	e.res.Strategy = widgetStrategy{}
	e.do("PUT", path, "application/json", widget("w", `,"resourceVersion":"3"`)).status(t, 404, metav1.StatusReasonNotFound, "")
}

func TestOwnSubresources(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	var served []string
	e.res.Subresources = []*Subresource{{
		Name: "token", Verbs: []string{"create"},
		Serve: func(w http.ResponseWriter, _ *http.Request, info *request.Info, res *Resource, ver *Version) {
			served = append(served, info.Verb+" "+res.Plural+"/"+info.Name+"/"+info.Subresource+" "+ver.Name)
			w.WriteHeader(http.StatusCreated)
		},
	}}
	if a := e.do("POST", widgetsPath+"/w/token", "application/json", `{}`); a.code != http.StatusCreated {
		t.Fatalf("token: %d %s", a.code, a.raw)
	}
	if strings.Join(served, ",") != "create widgets/w/token v1" {
		t.Fatalf("served: %v", served)
	}
	e.do("GET", widgetsPath+"/w/token", "", "").status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	e.do("POST", widgetsPath+"/w/other", "application/json", `{}`).status(t, 404, metav1.StatusReasonNotFound, "")
	if len(served) != 1 {
		t.Fatalf("served: %v", served)
	}
}

func TestClusterScoped(t *testing.T) {
	e := newEngine(t)
	e.res.Namespaced = false
	const path = "/apis/example.com/v1/widgets"
	// A namespace in the body of a cluster-scoped object is dropped.
	a := e.do("POST", path, "application/json", widget("c", `,"namespace":"default"`))
	if a.code != http.StatusCreated || meta(a)["namespace"] != nil {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	if e.store.kvs["/registry/example.com/widgets/c"] == nil {
		t.Fatalf("stored under %v", e.store.kvs)
	}
	if a = e.do("GET", path+"/c", "", ""); a.code != 200 || meta(a)["name"] != "c" {
		t.Fatalf("get: %d %s", a.code, a.raw)
	}
	e.cache()
	if names, _ := listed(t, e.do("GET", path, "", "")); strings.Join(names, ",") != "c" {
		t.Fatalf("list: %v", names)
	}
	// A cluster-scoped resource is not listed in a namespace.
	e.do("GET", widgetsPath, "", "").status(t, 404, metav1.StatusReasonNotFound, "")
	if a = e.do("DELETE", path+"/c", "", ""); a.code != 200 || len(e.store.kvs) != 0 {
		t.Fatalf("delete: %d %s", a.code, a.raw)
	}
}

// A resource that is not stored answers every request itself.
func TestCustomResourceHandler(t *testing.T) {
	e := newEngine(t)
	var verbs []string
	e.res.Custom = func(w http.ResponseWriter, _ *http.Request, info *request.Info, _ *Version) {
		verbs = append(verbs, info.Verb)
		w.WriteHeader(http.StatusTeapot)
	}
	for _, m := range []string{"POST", "GET"} {
		if a := e.do(m, widgetsPath, "application/json", widget("w", "")); a.code != http.StatusTeapot {
			t.Fatalf("%s: %d", m, a.code)
		}
	}
	if strings.Join(verbs, ",") != "create,list" || e.store.puts != 0 {
		t.Fatalf("verbs %v, %d writes", verbs, e.store.puts)
	}
}

// The last finalizer removed by an update of an object being deleted
// deletes it; the answer is the object as last written.
func TestUpdateRemovesTheLastFinalizer(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", `,"finalizers":["a","b"]`))
	e.do("DELETE", widgetsPath+"/w", "", "")
	a := e.do("PUT", widgetsPath+"/w", "application/json", widget("w", `,"finalizers":["b"],"resourceVersion":"3"`))
	if a.code != 200 || meta(a)["deletionTimestamp"] != "2026-11-24T12:00:00Z" || e.stored("w") == nil {
		t.Fatalf("one finalizer removed: %d %s", a.code, a.raw)
	}
	a = e.do("PUT", widgetsPath+"/w", "application/json", widget("w", `,"resourceVersion":"4"`))
	if a.code != 200 || meta(a)["finalizers"] != nil || e.stored("w") != nil {
		t.Fatalf("the last finalizer removed: %d %s", a.code, a.raw)
	}
}
