package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/crdserver/crdserver/internal/apis/versionreport"
)

func TestVersionsCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := crdtest.Start(t, crdtest.Options{})
	ext := apiextensionsclient.NewForConfigOrDie(srv.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(srv.RESTConfig())
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "things.v.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "v.example.com", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "things", Kind: "Thing"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Storage: true, Deprecated: true, Schema: schemaProps},
				{Name: "v1", Served: true, Schema: schemaProps},
			},
		},
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	beta := schema.GroupVersionResource{Group: "v.example.com", Version: "v1beta1", Resource: "things"}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(beta).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v.example.com/v1beta1", "kind": "Thing", "metadata": map[string]any{"name": "one"}}}, metav1.CreateOptions{})
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
	kc := srv.KubeconfigPath()
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := runVersions(append(args, "--kubeconfig", kc), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	// The table of every CRD's versions.
	code, out, errOut := run()
	if code != 0 || !strings.Contains(out, "CRD") || !strings.Contains(out, "things.v.example.com   v1beta1   true     false     true         1         1") {
		t.Fatalf("table (%d):\n%s%s", code, out, errOut)
	}
	// What keeps v1beta1: exit 1, each blocker with its fix.
	code, out, _ = run("things.v.example.com", "--check-remove", "v1beta1")
	if code != 1 || !strings.Contains(out, "v1beta1 of things.v.example.com cannot be removed yet:") ||
		!strings.Contains(out, "- Clients: 1 clients called v1beta1") || !strings.Contains(out, "- StoredObjects: 1 objects are stored in v1beta1: one") ||
		!strings.Contains(out, "- StoredVersions:") || !strings.Contains(out, "  fix: migrate them to v1") {
		t.Fatalf("check-remove v1beta1 (%d):\n%s", code, out)
	}
	// As JSON, the report itself.
	code, out, _ = run("things.v.example.com", "--check-remove", "v1", "-o", "json")
	var list versionreport.VersionReportList
	if code != 1 || json.Unmarshal([]byte(out), &list) != nil || len(list.Items) != 1 || list.Items[0].Status.Blockers[0].Reason != versionreport.ReasonStorageVersion {
		t.Fatalf("check-remove v1 -o json (%d):\n%s", code, out)
	}
	// Usage errors: 2.
	for _, args := range [][]string{{"--check-remove", "v1"}, {"nodot"}, {"-o", "wide"},
		{"--retire", "v1beta1"}, {"things.v.example.com", "--dry-run"}, {"things.v.example.com", "--remove"},
		{"things.v.example.com", "--retire", "v1beta1", "--check-remove", "v1beta1"}} {
		if code, _, _ := run(args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// The storage version is not retired; nothing changes.
	if code, out, _ := run("things.v.example.com", "--retire", "v1"); code != 1 || !strings.Contains(out, "storage version: STOPPED: v1 is the storage version of things.v.example.com") {
		t.Errorf("retire v1 (%d):\n%s", code, out)
	}
	if code, _, errOut := run("things.v.example.com", "--retire", "v2"); code != 1 || !strings.Contains(errOut, "has no version v2") {
		t.Errorf("retire v2 (%d): %s", code, errOut)
	}
	if code, _, errOut := run("absent.v.example.com"); code != 1 || !strings.Contains(errOut, "no CRD absent.v.example.com") {
		t.Errorf("an absent CRD: %d %s", code, errOut)
	}
}
