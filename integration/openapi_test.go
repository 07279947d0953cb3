package integration

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
)

func TestOpenAPIForCRDs(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	dc := discovery.NewDiscoveryClientForConfigOrDie(e.cfg)
	gv := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	// The CRD's group/version document appears, with the schema.
	err := wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		doc, err := openapi3.NewRoot(dc.OpenAPIV3()).GVSpec(gv)
		if err != nil {
			return false, nil
		}
		s, ok := doc.Components.Schemas["com.example.stable.v1.CronTab"]
		return ok && s.Properties["spec"].Properties["cronSpec"].Type[0] == "string", nil
	})
	if err != nil {
		t.Fatal("no OpenAPI v3 document for the CRD")
	}
	// kubectl's check for server-side field validation passes.
	v := resource.NewQueryParamVerifierV3(e.dyn, dc.OpenAPIV3(), resource.QueryParamFieldValidation)
	for _, gvk := range []schema.GroupVersionKind{gv.WithKind("CronTab"), {Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, {Version: "v1", Kind: "Namespace"}} {
		if err := v.HasSupport(gvk); err != nil {
			t.Fatalf("%v: %v", gvk, err)
		}
	}
	// OpenAPI v2 parses.
	if _, err := dc.OpenAPISchema(); err != nil {
		t.Fatal(err)
	}
}
