package crdtest_test

import (
	"context"
	"fmt"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdserver/crdserver/crdtest"
)

// A server with the CRDs of a directory, used with client-go. In a test,
// crdtest.Start(t, ...) does the same and closes the server when the test
// ends.
func Example() {
	srv, err := crdtest.New(crdtest.Options{CRDPaths: []string{"testdata"}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	fmt.Println("installed:", srv.CRDs[0].Name)

	ctx := context.Background()
	widgets := dynamic.NewForConfigOrDie(srv.Config).Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).Namespace("default")
	_, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"size": int64(3)},
	}}, metav1.CreateOptions{})
	if err != nil {
		panic(err)
	}
	// The CRD's schema applies, as on Kubernetes.
	_, err = widgets.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "bad"},
		"spec":     map[string]any{"size": int64(0)},
	}}, metav1.CreateOptions{})
	fmt.Println(err)
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	for _, w := range list.Items {
		size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size")
		fmt.Println(w.GetName(), size)
	}
	// Output:
	// installed: widgets.example.com
	// Widget.example.com "bad" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1
	// w 3
}

// CRDs that something other than crdtest creates (here the test's own
// client; kubectl, a Helm chart or a controller alike) are waited for
// with WaitEstablished before their resources are used.
func ExampleWaitEstablished() {
	srv, err := crdtest.New(crdtest.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	crds, err := crdtest.ReadCRDs([]string{"testdata/widgets.yaml"}, true)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	client := apiextensionsclient.NewForConfigOrDie(srv.Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := client.Create(ctx, crds[0], metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	established, err := crdtest.WaitEstablished(ctx, srv.Config, "widgets.example.com")
	if err != nil {
		panic(err)
	}
	fmt.Println(established[0].Name, "served as", established[0].Status.AcceptedNames.Kind)
	// Output:
	// widgets.example.com served as Widget
}
