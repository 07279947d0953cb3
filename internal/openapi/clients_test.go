package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
)

// serve starts a loopback server with the publisher on /openapi/ and a
// CustomResourceDefinition list (what kubectl's CRD finder reads) of crds.
func serve(t *testing.T, p *Publisher, crds ...*apiextensionsv1.CustomResourceDefinition) *rest.Config {
	t.Helper()
	list := apiextensionsv1.CustomResourceDefinitionList{}
	list.APIVersion, list.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinitionList"
	for _, crd := range crds {
		list.Items = append(list.Items, *crd)
	}
	body, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/openapi/", p)
	mux.HandleFunc("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(mux) // 127.0.0.1
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func TestClientGoReadsDocuments(t *testing.T) {
	p := New(builtins(t), nil)
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1")}))
	dc, err := discovery.NewDiscoveryClientForConfig(serve(t, p))
	if err != nil {
		t.Fatal(err)
	}
	root := openapi3.NewRoot(dc.OpenAPIV3())
	gvs, err := root.GroupVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, gv := range []schema.GroupVersion{namespaceGVK.GroupVersion(), crdGVK.GroupVersion(), cronTabGVK.GroupVersion()} {
		if !slices.Contains(gvs, gv) {
			t.Errorf("openapi3 root has no %v: %v", gv, gvs)
		}
	}
	for _, gv := range gvs {
		doc, err := root.GVSpec(gv)
		if err != nil {
			t.Errorf("GVSpec(%v): %v", gv, err)
			continue
		}
		if len(doc.Paths.Paths) == 0 || len(doc.Components.Schemas) == 0 {
			t.Errorf("GVSpec(%v) is empty", gv)
		}
	}

	// kubectl apply reads /openapi/v2 as protobuf through discovery.
	v2, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	if len(v2.GetDefinitions().GetAdditionalProperties()) == 0 {
		t.Errorf("empty v2 document")
	}
}

func TestFieldValidationVerifier(t *testing.T) {
	p := New(builtins(t), nil)
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1")}))
	// A CRD the finder lists but the documents lack (not Established
	// yet): kubectl checks the Namespace document instead.
	pending := cronTab(t, "pending.example.com", "2")
	cfg := serve(t, p, cronTab(t, "", "1"), pending)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	verifier := resource.NewQueryParamVerifierV3(dyn, dc.OpenAPIV3(), resource.QueryParamFieldValidation)

	tests := []struct {
		gvk       schema.GroupVersionKind
		supported bool
	}{
		{crdGVK, true},
		{namespaceGVK, true},
		{cronTabGVK, true},
		{schema.GroupVersionKind{Group: "pending.example.com", Version: "v1", Kind: "CronTab"}, true},
		{schema.GroupVersionKind{Group: "unknown.example.com", Version: "v1", Kind: "Thing"}, false},
	}
	for _, tt := range tests {
		if err := verifier.HasSupport(tt.gvk); (err == nil) != tt.supported {
			t.Errorf("HasSupport(%v) = %v, want supported %v", tt.gvk, err, tt.supported)
		}
	}
}
