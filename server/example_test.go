package server_test

import (
	"context"
	"fmt"
	"os"
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

// Start a whole server in-process, install a CRD and use it with client-go:
// what a controller's test does.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "crdserver-example")
	defer os.RemoveAll(dir)

	srv, err := server.Start(ctx, server.Config{DataDir: dir}) // a random loopback port, embedded etcd in dir
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	if err := srv.WaitReady(ctx); err != nil {
		panic(err)
	}

	// The admin's client-go config (HTTPS, a client certificate of group
	// system:masters).
	cfg := srv.RESTConfig()
	crds := apiextensionsclient.NewForConfigOrDie(cfg).ApiextensionsV1().CustomResourceDefinitions()
	_, err = crds.Create(ctx, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
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
	}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	// Established within milliseconds.
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, "widgets.example.com", metav1.GetOptions{})
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, err
	})

	widgets := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	_, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"},
		"spec":     map[string]any{"size": 3, "color": "pruned: not in the schema"},
	}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	for _, w := range list.Items {
		fmt.Println(w.GetName(), w.Object["spec"])
	}
	// Output:
	// w1 map[size:3]
}
