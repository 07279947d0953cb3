package openapi

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/crdserver/crdserver/internal/apis"
	rbacpolicy "github.com/crdserver/crdserver/internal/auth/rbac"
	"github.com/crdserver/crdserver/internal/resource"
	"github.com/crdserver/crdserver/internal/serviceaccount"
	"github.com/crdserver/crdserver/internal/store"
)

// builtins are the built-in resources of a server, as apis.New makes them
// (with tokens, so serviceaccounts/token is served), over empty caches.
func builtins(testing.TB) []*resource.Resource {
	return allBuiltins()
}

var allBuiltins = sync.OnceValue(func() []*resource.Resource {
	newCache := func(prefix string) *store.Cache { return store.NewFixedCache(prefix, 1) }
	return apis.New(newCache, rbacpolicy.NewStore(), apis.Options{EventTTL: time.Hour, Tokens: &serviceaccount.Tokens{}}).All
})

// documentOf is the v3 document path of a group/version.
func documentOf(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.String()
}

// operations returns the methods of a path item, in GET PUT POST DELETE
// PATCH order, with their operations.
func operations(item *spec3.Path) map[string]*spec3.Operation {
	ops := map[string]*spec3.Operation{}
	for _, m := range []struct {
		name string
		op   *spec3.Operation
	}{{"GET", item.Get}, {"PUT", item.Put}, {"POST", item.Post}, {"DELETE", item.Delete}, {"PATCH", item.Patch}} {
		if m.op != nil {
			ops[m.name] = m.op
		}
	}
	return ops
}

// wantPaths are the paths and methods kube-apiserver's installer
// publishes for r in version v, relative to the group/version's root.
func wantPaths(r *resource.Resource, v *resource.Version) map[string][]string {
	can := func(verb string) bool { return slices.Contains(r.Verbs, verb) }
	want := map[string][]string{}
	add := func(path string, methods ...string) {
		if len(methods) > 0 {
			want[path] = append(want[path], methods...)
		}
	}
	methods := func(pairs ...any) []string {
		var out []string
		for i := 0; i < len(pairs); i += 2 {
			if pairs[i].(bool) {
				out = append(out, pairs[i+1].(string))
			}
		}
		return out
	}
	collection := r.Plural
	if r.Namespaced {
		collection = "namespaces/{namespace}/" + r.Plural
		add(r.Plural, methods(can("list"), "GET")...)
		add("watch/"+r.Plural, methods(can("list") && can("watch"), "GET")...)
	}
	item := collection + "/{name}"
	add(collection, methods(can("list"), "GET", can("create"), "POST", can("deletecollection"), "DELETE")...)
	add("watch/"+collection, methods(can("list") && can("watch"), "GET")...)
	add(item, methods(can("get"), "GET", can("update"), "PUT", can("delete"), "DELETE", can("patch"), "PATCH")...)
	add("watch/"+item, methods(can("watch"), "GET")...)
	if v.Status {
		add(item+"/status", "GET", "PUT", "PATCH")
	}
	if _, ok := r.Strategy.(resource.FinalizeStrategy); ok {
		add(item+"/finalize", "PUT")
	}
	for _, s := range r.Subresources {
		has := func(verb string) bool { return slices.Contains(s.Verbs, verb) }
		add(item+"/"+s.Name, methods(has("get"), "GET", has("update"), "PUT", has("create"), "POST", has("patch"), "PATCH")...)
	}
	return want
}

// resourceOf is the resource a path (relative to its group/version's
// root) is about: "configmaps" for "watch/namespaces/{namespace}/configmaps".
func resourceOf(path string) string {
	path = strings.TrimPrefix(path, "watch/")
	if rest, ok := strings.CutPrefix(path, "namespaces/{namespace}/"); ok {
		path = rest
	}
	first, _, _ := strings.Cut(path, "/")
	return first
}

func TestEveryBuiltinResourceIsPublished(t *testing.T) {
	p := New(builtins(t), nil)
	docs := map[string]*spec3.OpenAPI{}
	for _, r := range builtins(t) {
		for _, v := range r.Versions {
			gv := schema.GroupVersion{Group: r.Group, Version: v.Name}
			t.Run(r.String()+"/"+v.Name, func(t *testing.T) {
				path := documentOf(gv)
				if docs[path] == nil {
					docs[path] = document(t, p, path)
				}
				doc := docs[path]
				root := "/" + path + "/"
				want := wantPaths(r, v)
				for full, item := range doc.Paths.Paths {
					rel := strings.TrimPrefix(full, root)
					if resourceOf(rel) != r.Plural {
						continue
					}
					ops := operations(item)
					if got := keys(ops); !sameSet(got, want[rel]) {
						t.Errorf("%s: operations %v, want %v", full, got, want[rel])
					}
					delete(want, rel)
					checkOperations(t, r, gv, rel, ops)
				}
				for rel, methods := range want {
					t.Errorf("no path %s%s (%v)", root, rel, methods)
				}

				// The object's schema, with its group/version/kind.
				name := modelName(typeOf(t, gv.WithKind(r.Kind)))
				s := doc.Components.Schemas[name]
				if s == nil {
					t.Fatalf("no schema %s", name)
				}
				var gvks []map[string]string
				if err := s.Extensions.GetObject(extensionGVK, &gvks); err != nil ||
					!slices.ContainsFunc(gvks, func(m map[string]string) bool {
						return equalMaps(m, map[string]string{"group": gv.Group, "version": gv.Version, "kind": r.Kind})
					}) {
					t.Errorf("%s: x-kubernetes-group-version-kind %v (%v)", name, gvks, err)
				}
				if s.Description == "" || len(s.Properties) == 0 {
					t.Errorf("%s: no description or properties", name)
				}
			})
		}
	}
}

// checkOperations checks the operations of one path of r: their
// group/version/kind, action, and what PATCH accepts.
func checkOperations(t *testing.T, r *resource.Resource, gv schema.GroupVersion, rel string, ops map[string]*spec3.Operation) {
	t.Helper()
	gvk := map[string]string{"group": gv.Group, "version": gv.Version, "kind": r.Kind}
	for _, s := range r.Subresources {
		if strings.HasSuffix(rel, "/"+s.Name) {
			gvk = map[string]string{"group": s.Group, "version": s.Version, "kind": s.Kind}
		}
	}
	for method, op := range ops {
		if got := gvkExtension(t, op.Extensions); !equalMaps(got, gvk) {
			t.Errorf("%s %s: x-kubernetes-group-version-kind %v, want %v", method, rel, got, gvk)
		}
		if a, _ := op.Extensions.GetString("x-kubernetes-action"); a == "" {
			t.Errorf("%s %s: no x-kubernetes-action", method, rel)
		}
		if op.OperationId == "" || len(op.Responses.StatusCodeResponses) == 0 {
			t.Errorf("%s %s: operation %q, responses %v", method, rel, op.OperationId, op.Responses)
		}
	}
	if patch := ops["PATCH"]; patch != nil {
		want := []string{jsonPatch, mergePatch, applyPatch}
		if r.StrategicMergeType != nil {
			want = append(want, strategicPatch)
		}
		if got := keys(patch.RequestBody.Content); !sameSet(got, want) {
			t.Errorf("PATCH %s accepts %v, want %v", rel, got, want)
		}
		if !hasQueryParam(patch, "fieldValidation") {
			t.Errorf("PATCH %s: no fieldValidation", rel)
		}
	}
}

func TestCreateOnlyAndCustomSubresources(t *testing.T) {
	p := New(builtins(t), nil)
	tests := []struct {
		doc, path, method, operation string
		gvk                          string // group/version/kind of the operation
		body                         string // schema of the request and responses
	}{
		{
			"api/v1", "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", "POST", "createCoreV1NamespacedServiceAccountToken",
			"authentication.k8s.io/v1/TokenRequest", "io.k8s.api.authentication.v1.TokenRequest",
		},
		{
			"apis/authentication.k8s.io/v1", "/apis/authentication.k8s.io/v1/selfsubjectreviews", "POST", "createAuthenticationV1SelfSubjectReview",
			"authentication.k8s.io/v1/SelfSubjectReview", "io.k8s.api.authentication.v1.SelfSubjectReview",
		},
		{
			"apis/authorization.k8s.io/v1", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", "POST", "createAuthorizationV1SelfSubjectAccessReview",
			"authorization.k8s.io/v1/SelfSubjectAccessReview", "io.k8s.api.authorization.v1.SelfSubjectAccessReview",
		},
		{
			"apis/authorization.k8s.io/v1", "/apis/authorization.k8s.io/v1/namespaces/{namespace}/localsubjectaccessreviews", "POST", "createAuthorizationV1NamespacedLocalSubjectAccessReview",
			"authorization.k8s.io/v1/LocalSubjectAccessReview", "io.k8s.api.authorization.v1.LocalSubjectAccessReview",
		},
		{
			"apis/authorization.k8s.io/v1", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", "POST", "createAuthorizationV1SelfSubjectRulesReview",
			"authorization.k8s.io/v1/SelfSubjectRulesReview", "io.k8s.api.authorization.v1.SelfSubjectRulesReview",
		},
		{
			"apis/coordination.k8s.io/v1", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", "DELETE", "deleteCoordinationV1CollectionNamespacedLease",
			"coordination.k8s.io/v1/Lease", "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
		},
		{
			"api/v1", "/api/v1/namespaces/{name}/finalize", "PUT", "replaceCoreV1NamespaceFinalize",
			"/v1/Namespace", "io.k8s.api.core.v1.Namespace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			item := document(t, p, tt.doc).Paths.Paths[tt.path]
			if item == nil {
				t.Fatalf("no path %s", tt.path)
			}
			op := operations(item)[tt.method]
			if op == nil {
				t.Fatalf("no %s: %v", tt.method, keys(operations(item)))
			}
			if op.OperationId != tt.operation {
				t.Errorf("operationId %q, want %q", op.OperationId, tt.operation)
			}
			gvk := gvkExtension(t, op.Extensions)
			if got := gvk["group"] + "/" + gvk["version"] + "/" + gvk["kind"]; got != tt.gvk {
				t.Errorf("x-kubernetes-group-version-kind %s, want %s", got, tt.gvk)
			}
			ref := "#/components/schemas/" + tt.body
			if got := op.Responses.StatusCodeResponses[http.StatusOK].Content["application/json"].Schema.Ref.String(); got != ref {
				t.Errorf("200 response %s, want %s", got, ref)
			}
			if tt.method != "DELETE" {
				if got := op.RequestBody.Content["*/*"].Schema.Ref.String(); got != ref {
					t.Errorf("request body %s, want %s", got, ref)
				}
			}
		})
	}
}

// typeOf is the Go type of a built-in kind.
func typeOf(t *testing.T, gvk schema.GroupVersionKind) reflect.Type {
	t.Helper()
	obj, err := builtinScheme().New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.TypeOf(obj).Elem()
}

func TestConcurrentFirstBuilds(t *testing.T) {
	p := New(builtins(t), nil)
	var paths []string
	for _, d := range builtinDocuments(builtins(t)) {
		paths = append(paths, "/openapi/v3/"+d.path)
	}
	paths = append(paths, "/openapi/v2")
	var wg sync.WaitGroup
	codes := make([]int, len(paths))
	for i, path := range paths {
		wg.Go(func() {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			w := httptest.NewRecorder()
			p.ServeHTTP(w, r)
			codes[i] = w.Code
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", paths[i], code)
		}
	}
}

// Servers of one process share the built-in documents: a second server's
// document of the same routes is the one built for the first; another
// set of resources (here one resource fewer) gets its own.
func TestBuiltinDocumentsAreShared(t *testing.T) {
	newCache := func(prefix string) *store.Cache { return store.NewFixedCache(prefix, 1) }
	newBuiltins := func() []*resource.Resource {
		return apis.New(newCache, rbacpolicy.NewStore(), apis.Options{EventTTL: time.Hour, Tokens: &serviceaccount.Tokens{}}).All
	}
	docOf := func(all []*resource.Resource, path string) *spec3.OpenAPI {
		t.Helper()
		for _, d := range builtinDocuments(all) {
			if d.path == path {
				doc, err := buildBuiltinV3(d)
				if err != nil {
					t.Fatal(err)
				}
				return doc
			}
		}
		t.Fatalf("no document %s", path)
		return nil
	}
	first, second := docOf(newBuiltins(), "api/v1"), docOf(newBuiltins(), "api/v1")
	if first != second {
		t.Error("a second server built api/v1 again")
	}
	var fewer []*resource.Resource
	for _, r := range newBuiltins() {
		if r.Group != "" || r.Plural != "secrets" {
			fewer = append(fewer, r)
		}
	}
	other := docOf(fewer, "api/v1")
	if other == first {
		t.Fatal("api/v1 without secrets got the document with them")
	}
	if _, ok := other.Paths.Paths["/api/v1/namespaces/{namespace}/secrets"]; ok {
		t.Error("api/v1 without secrets documents them")
	}
	if _, ok := first.Paths.Paths["/api/v1/namespaces/{namespace}/secrets"]; !ok {
		t.Error("api/v1 does not document secrets")
	}
}
