package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/crdserver/crdserver/crdtest"
)

// thingsStoredIn starts a server with the CRD things.<group>: versions
// old (storage at first, deprecated if so) and v1, one Thing "one"
// created at old, then v1 made the storage version, so that "one" stays
// stored in old. It returns the server and its CRD clientset.
func thingsStoredIn(ctx context.Context, t *testing.T, group, old string, deprecated bool) (*crdtest.Server, apiextensionsclient.Interface) {
	t.Helper()
	srv := crdtest.Start(t, crdtest.Options{})
	ext := apiextensionsclient.NewForConfigOrDie(srv.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(srv.RESTConfig())
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: old, Served: true, Storage: true, Deprecated: deprecated, Schema: schemaProps},
				{Name: "v1", Served: true, Storage: false, Schema: schemaProps},
			},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: old, Resource: "things"}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/" + old, "kind": "Thing", "metadata": map[string]any{"name": "one"}}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, _ := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		c.Spec.Versions[0].Storage, c.Spec.Versions[1].Storage = false, true
		_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, ext
}

func TestMigrateCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, ext := thingsStoredIn(ctx, t, "m.example.com", "v1alpha1", false)
	var out bytes.Buffer
	if err := runMigrate([]string{"things.m.example.com", "--kubeconfig", srv.KubeconfigPath(), "--timeout", "30s"}, &out); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "storageversionmigration.storagemigration.k8s.io/things.m.example.com-") || !strings.Contains(out.String(), "succeeded: migrated 1 objects") {
		t.Fatalf("output:\n%s", out.String())
	}
	c, _ := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "things.m.example.com", metav1.GetOptions{})
	if len(c.Status.StoredVersions) != 1 || c.Status.StoredVersions[0] != "v1" {
		t.Fatalf("storedVersions %v", c.Status.StoredVersions)
	}
	if err := runMigrate([]string{"nodot"}, &out); err == nil {
		t.Fatal("a bad resource name was accepted")
	}
}

func ptr[T any](v T) *T { return &v }
