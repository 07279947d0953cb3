// Package embed shows how a Go program or test suite outside crdserver's
// module embeds it: a go.mod with a replace directive to a checkout of
// crdserver (the module is not on the Go module proxy), then server.Start.
package embed

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/server"
)

func TestEmbeddedServer(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Config{DataDir: t.TempDir()}) // a random loopback port
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := srv.RESTConfig() // HTTPS, as the admin

	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}},
					},
				}},
			}},
		},
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gizmos := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gizmos"}).Namespace("default")
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Gizmo",
		"metadata": map[string]any{"name": "g1"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	// The resource is served as soon as the CRD is Established.
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := gizmos.Create(ctx, g, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the Gizmo could not be created")
	}
	got, err := gizmos.Get(ctx, "g1", metav1.GetOptions{})
	if size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); err != nil || size != 3 {
		t.Fatalf("got %v %v", got, err)
	}
}
