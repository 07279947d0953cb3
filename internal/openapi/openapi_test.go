package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/fixtures"
	"github.com/crdserver/crdserver/internal/registry"
)

const (
	jsonPatch      = "application/json-patch+json"
	mergePatch     = "application/merge-patch+json"
	strategicPatch = "application/strategic-merge-patch+json"
	applyPatch     = "application/apply-patch+yaml"
	v2Protobuf     = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	v3Protobuf     = "application/com.github.proto-openapi.spec.v3@v1.0+protobuf"
)

var (
	namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	crdGVK       = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
	vapGVK       = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}
	cronTabGVK   = schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "CronTab"}
)

// get sends a GET to p and returns the recorded response.
func get(t *testing.T, p http.Handler, target string, accept string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	return w
}

// root returns the serverRelativeURL of every document /openapi/v3 lists.
func root(t *testing.T, p http.Handler) map[string]string {
	t.Helper()
	w := get(t, p, "/openapi/v3", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v3: %d %s", w.Code, w.Body)
	}
	var d handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for path, gv := range d.Paths {
		urls[path] = gv.ServerRelativeURL
	}
	return urls
}

// document fetches and decodes the v3 document at path ("api/v1").
func document(t *testing.T, p http.Handler, path string) *spec3.OpenAPI {
	t.Helper()
	w := get(t, p, "/openapi/v3/"+path, "application/json")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /openapi/v3/%s: %d %s", path, w.Code, w.Body)
	}
	doc := &spec3.OpenAPI{}
	if err := json.Unmarshal(w.Body.Bytes(), doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// patchOperation returns the PATCH operation on path.
func patchOperation(t *testing.T, doc *spec3.OpenAPI, path string) *spec3.Operation {
	t.Helper()
	item := doc.Paths.Paths[path]
	if item == nil || item.Patch == nil {
		t.Fatalf("no PATCH on %s; paths: %v", path, keys(doc.Paths.Paths))
	}
	return item.Patch
}

func hasQueryParam(op *spec3.Operation, name string) bool {
	for _, p := range op.Parameters {
		if p.Name == name && p.In == "query" {
			return true
		}
	}
	return false
}

func gvkExtension(t *testing.T, ext spec.Extensions) map[string]string {
	t.Helper()
	var gvk map[string]string
	if err := ext.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil {
		t.Fatalf("x-kubernetes-group-version-kind: %v", err)
	}
	return gvk
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// cronTab is the README's CronTab CRD (examples/crontab-crd.yaml),
// defaulted and Established, in group (stable.example.com unless given) at
// a resourceVersion.
func cronTab(t *testing.T, group, resourceVersion string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile("../../examples/crontab-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := fixtures.DecodeCRD(t, string(b))
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	if group != "" {
		crd.Spec.Group = group
		crd.Name = crd.Spec.Names.Plural + "." + group
	}
	// Every revision of these CRDs is a new spec (a new generation).
	crd.ResourceVersion = resourceVersion
	crd.Generation, _ = strconv.ParseInt(resourceVersion, 10, 64)
	crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
	return crd
}

// index is a registry Index of CRDs, all Established unless listed in
// notEstablished.
func index(crds []*apiextensionsv1.CustomResourceDefinition, notEstablished ...string) *registry.Index {
	ix := &registry.Index{CRDs: map[string]*apiextensionsv1.CustomResourceDefinition{}, Established: map[string]bool{}}
	for _, crd := range crds {
		ix.CRDs[crd.Name] = crd
		ix.Established[crd.Name] = true
	}
	for _, n := range notEstablished {
		ix.Established[n] = false
	}
	return ix
}

func TestRootListsBuiltinDocuments(t *testing.T) {
	p := New(builtins(t), nil)
	urls := root(t, p)
	want := []string{
		"api", "api/v1", "apis",
		"apis/events.k8s.io", "apis/events.k8s.io/v1",
		"apis/authentication.k8s.io", "apis/authentication.k8s.io/v1",
		"apis/authorization.k8s.io", "apis/authorization.k8s.io/v1",
		"apis/rbac.authorization.k8s.io", "apis/rbac.authorization.k8s.io/v1",
		"apis/admissionregistration.k8s.io", "apis/admissionregistration.k8s.io/v1",
		"apis/apiextensions.k8s.io", "apis/apiextensions.k8s.io/v1",
		"apis/coordination.k8s.io", "apis/coordination.k8s.io/v1",
		"apis/flowcontrol.apiserver.k8s.io", "apis/flowcontrol.apiserver.k8s.io/v1",
		"apis/storagemigration.k8s.io", "apis/storagemigration.k8s.io/v1", "apis/storagemigration.k8s.io/v1beta1",
		"apis/conversion.crdserver.io", "apis/conversion.crdserver.io/v1alpha1",
		"apis/apiregistration.k8s.io", "apis/apiregistration.k8s.io/v1",
		"apis/apps", "apis/apps/v1",
		"apis/batch", "apis/batch/v1", "apis/policy", "apis/policy/v1", "apis/autoscaling", "apis/autoscaling/v2",
		"apis/networking.k8s.io", "apis/networking.k8s.io/v1", "apis/discovery.k8s.io", "apis/discovery.k8s.io/v1",
		"version",
	}
	for _, path := range want {
		u, ok := urls[path]
		if !ok {
			t.Errorf("root does not list %s: %v", path, urls)
			continue
		}
		if !strings.HasPrefix(u, "/openapi/v3/"+path+"?hash=") || len(u) <= len("/openapi/v3/"+path+"?hash=") {
			t.Errorf("%s: serverRelativeURL %q", path, u)
		}
		// The hashed URL is immutable; a stale hash redirects to it.
		w := get(t, p, u, "")
		if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "public, immutable" {
			t.Errorf("GET %s: %d, Cache-Control %q", u, w.Code, w.Header().Get("Cache-Control"))
		}
		w = get(t, p, "/openapi/v3/"+path+"?hash=stale", "")
		if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != u {
			t.Errorf("stale hash of %s: %d, Location %q", path, w.Code, w.Header().Get("Location"))
		}
	}
	if len(urls) != len(want) {
		t.Errorf("root lists %v", keys(urls))
	}
}

func TestBuiltinPatchOperations(t *testing.T) {
	tests := []struct {
		doc, path  string
		gvk        schema.GroupVersionKind
		patchTypes []string
	}{
		{"api/v1", "/api/v1/namespaces/{name}", namespaceGVK, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}},
		{"api/v1", "/api/v1/namespaces/{name}/status", namespaceGVK, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}},
		{"apis/apiextensions.k8s.io/v1", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", crdGVK, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}},
		{"apis/apiextensions.k8s.io/v1", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status", crdGVK, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}},
		{"apis/admissionregistration.k8s.io/v1", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}/status", vapGVK, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}},
	}
	p := New(builtins(t), nil)
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			op := patchOperation(t, document(t, p, tt.doc), tt.path)
			for _, q := range []string{"fieldValidation", "fieldManager", "force", "dryRun"} {
				if !hasQueryParam(op, q) {
					t.Errorf("no %s query parameter", q)
				}
			}
			want := map[string]string{"group": tt.gvk.Group, "version": tt.gvk.Version, "kind": tt.gvk.Kind}
			if got := gvkExtension(t, op.Extensions); !equalMaps(got, want) {
				t.Errorf("x-kubernetes-group-version-kind %v, want %v", got, want)
			}
			if a, _ := op.Extensions.GetString("x-kubernetes-action"); a != "patch" {
				t.Errorf("x-kubernetes-action %q", a)
			}
			if got := keys(op.RequestBody.Content); !sameSet(got, tt.patchTypes) {
				t.Errorf("PATCH content %v, want %v", got, tt.patchTypes)
			}
		})
	}
}

func TestBuiltinOperationsAndDefinitions(t *testing.T) {
	p := New(builtins(t), nil)
	core := document(t, p, "api/v1")
	ext := document(t, p, "apis/apiextensions.k8s.io/v1")
	tests := []struct {
		doc     *spec3.OpenAPI
		path    string
		methods string // the operations the path has, in GET PUT POST DELETE PATCH order
	}{
		{core, "/api/v1/namespaces", "GET POST"},
		{core, "/api/v1/namespaces/{name}", "GET PUT DELETE PATCH"},
		{core, "/api/v1/namespaces/{name}/status", "GET PUT PATCH"},
		{core, "/api/v1/namespaces/{name}/finalize", "PUT"},
		{core, "/api/v1/watch/namespaces", "GET"},
		{core, "/api/v1/watch/namespaces/{name}", "GET"},
		{core, "/api/v1/", "GET"},
		{ext, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "GET POST DELETE"},
		{ext, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", "GET PUT DELETE PATCH"},
		{ext, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status", "GET PUT PATCH"},
		{ext, "/apis/apiextensions.k8s.io/v1/watch/customresourcedefinitions", "GET"},
		{ext, "/apis/apiextensions.k8s.io/v1/watch/customresourcedefinitions/{name}", "GET"},
	}
	for _, tt := range tests {
		item := tt.doc.Paths.Paths[tt.path]
		if item == nil {
			t.Errorf("no path %s", tt.path)
			continue
		}
		var got []string
		for _, m := range []struct {
			name string
			op   *spec3.Operation
		}{{"GET", item.Get}, {"PUT", item.Put}, {"POST", item.Post}, {"DELETE", item.Delete}, {"PATCH", item.Patch}} {
			if m.op != nil {
				got = append(got, m.name)
			}
		}
		if strings.Join(got, " ") != tt.methods {
			t.Errorf("%s: operations %v, want %s", tt.path, got, tt.methods)
		}
	}
	if len(ext.Paths.Paths) != 6 {
		t.Errorf("paths: %v", keys(ext.Paths.Paths))
	}
	if id := core.Paths.Paths["/api/v1/namespaces"].Get.OperationId; id != "listCoreV1Namespace" {
		t.Errorf("operationId %q", id)
	}

	defs := []struct {
		doc  *spec3.OpenAPI
		name string
		gvk  schema.GroupVersionKind
	}{
		{core, "io.k8s.api.core.v1.Namespace", namespaceGVK},
		{core, "io.k8s.api.core.v1.NamespaceList", namespaceGVK.GroupVersion().WithKind("NamespaceList")},
		{ext, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", crdGVK},
		{ext, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionList", crdGVK.GroupVersion().WithKind("CustomResourceDefinitionList")},
	}
	for _, d := range defs {
		s := d.doc.Components.Schemas[d.name]
		if s == nil {
			t.Errorf("no schema %s", d.name)
			continue
		}
		var gvks []map[string]string
		if err := s.Extensions.GetObject("x-kubernetes-group-version-kind", &gvks); err != nil || len(gvks) != 1 ||
			!equalMaps(gvks[0], map[string]string{"group": d.gvk.Group, "version": d.gvk.Version, "kind": d.gvk.Kind}) {
			t.Errorf("%s: x-kubernetes-group-version-kind %v (%v)", d.name, gvks, err)
		}
	}
	status := core.Components.Schemas["io.k8s.api.core.v1.NamespaceStatus"]
	if phase := status.Properties["phase"]; len(phase.Enum) != 2 || !strings.Contains(phase.Description, "Possible enum values") {
		t.Errorf("NamespaceStatus.phase: %+v", phase)
	}
	// WatchEvent keeps only its own group/version and core/v1.
	var watch []map[string]string
	if err := ext.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"].Extensions.GetObject("x-kubernetes-group-version-kind", &watch); err != nil || len(watch) != 2 {
		t.Errorf("WatchEvent GVKs %v (%v)", watch, err)
	}
}

func TestNotFound(t *testing.T) {
	p := New(builtins(t), nil)
	for _, target := range []string{"/openapi/v3/apis/nope.example.com/v1", "/openapi/v3/", "/openapi/v1", "/openapi/v3/api/v1/extra"} {
		if w := get(t, p, target, ""); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d", target, w.Code)
		}
	}
}

func TestV3Protobuf(t *testing.T) {
	p := New(builtins(t), nil)
	w := get(t, p, "/openapi/v3/api/v1", v3Protobuf)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/com.github.proto-openapi.spec.v3.v1.0+protobuf" {
		t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

func TestV2(t *testing.T) {
	p := New(builtins(t), nil)
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1")}))

	w := get(t, p, "/openapi/v2", "application/json")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("JSON: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var doc spec.Swagger
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	patch := doc.Paths.Paths["/api/v1/namespaces/{name}"].Patch
	if patch == nil || !sameSet(patch.Consumes, []string{jsonPatch, mergePatch, strategicPatch, applyPatch}) {
		t.Errorf("namespace PATCH: %+v", patch)
	}
	if _, ok := doc.Paths.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]; !ok {
		t.Errorf("no CronTab path in v2")
	}

	w = get(t, p, "/openapi/v2", v2Protobuf)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" {
		t.Fatalf("protobuf: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	pb := &openapi_v2.Document{}
	if err := proto.Unmarshal(w.Body.Bytes(), pb); err != nil {
		t.Fatal(err)
	}
	// kubectl parses the protobuf document into models.
	models, err := openapiproto.NewOpenAPIData(pb)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"io.k8s.api.core.v1.Namespace", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition", "com.example.stable.v1.CronTab"} {
		if models.LookupModel(name) == nil {
			t.Errorf("v2 has no model %s", name)
		}
	}
	for _, name := range models.ListModels() {
		if models.LookupModel(name) == nil {
			t.Errorf("v2 lists model %s but has none", name)
		}
	}
	// kubectl explain configmap, explain lease.spec.
	if data := field(t, models.LookupModel("io.k8s.api.core.v1.ConfigMap"), "data"); data != nil {
		if m, ok := data.(*openapiproto.Map); !ok || m.GetDescription() == "" {
			t.Errorf("ConfigMap.data: %#v", data)
		}
	}
	if spec := field(t, models.LookupModel("io.k8s.api.coordination.v1.Lease"), "spec"); spec != nil {
		ref, ok := spec.(openapiproto.Reference)
		if !ok {
			t.Fatalf("Lease.spec: %#v", spec)
		}
		if holder := field(t, ref.SubSchema(), "holderIdentity"); holder == nil || holder.GetDescription() == "" {
			t.Errorf("Lease.spec.holderIdentity: %#v", holder)
		}
	}
}

// field returns the field of a kind model (kubectl's view of an object
// definition).
func field(t *testing.T, model openapiproto.Schema, name string) openapiproto.Schema {
	t.Helper()
	kind, ok := model.(*openapiproto.Kind)
	if !ok {
		t.Errorf("model %v is not a kind: %#v", model, model)
		return nil
	}
	f := kind.Fields[name]
	if f == nil {
		t.Errorf("%s has no field %s: %v", kind.GetPath(), name, kind.Keys())
	}
	return f
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	for _, s := range b {
		if !seen[s] {
			return false
		}
	}
	return true
}
