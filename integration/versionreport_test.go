package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdserver/crdserver/internal/apis/versionreport"
)

// gizmosCRD: v1beta1 (deprecated) and v1, stored in storage.
func gizmosCRD(storage string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	schemaOf := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: &preserve},
		}}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.retire.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "retire.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1beta1", Served: true, Storage: storage == "v1beta1", Deprecated: true, Schema: schemaOf},
				{Name: "v1", Served: true, Storage: storage == "v1", Schema: schemaOf},
			},
		},
	}
}

// TestVersionReports: a VersionReport names everything that keeps
// v1beta1 of a CRD from being removed: its clients, the objects stored in
// it, managedFields entries and ownerReferences at it, a webhook that
// lists only it, status.storedVersions; and says v1, the storage version,
// cannot be.
func TestVersionReports(t *testing.T) {
	e := start(t)
	e.createCRD(gizmosCRD("v1beta1"))
	beta := schema.GroupVersionResource{Group: "retire.example.com", Version: "v1beta1", Resource: "gizmos"}
	// Stored in v1beta1, applied there (managedFields at v1beta1).
	for _, name := range []string{"a", "b"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "retire.example.com/v1beta1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": map[string]any{"size": 1}}}
		if _, err := e.dyn.Resource(beta).Namespace("default").Apply(e.ctx, name, obj, metav1.ApplyOptions{FieldManager: "old-tool"}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := e.dyn.Resource(beta).Namespace("default").Get(e.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Owned through v1beta1.
	if _, err := e.kube.CoreV1().ConfigMaps("default").Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "retire.example.com/v1beta1", Kind: "Gizmo", Name: "a", UID: a.GetUID()}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A webhook that lists only v1beta1, for deletes.
	exact, ignore, none := admissionregistrationv1.Exact, admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:1/never"
	if _, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(e.ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmo-guard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "guard.retire.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"retire.example.com"}, APIVersions: []string{"v1beta1"}, Resources: []string{"gizmos"}}}},
			MatchPolicy: &exact, FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1 becomes the storage version; the objects stay stored in v1beta1.
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "gizmos.retire.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := e.do("GET", "/apis/crdserver.io/v1alpha1/versionreports/v1beta1.gizmos.retire.example.com", "")
	if r.code != http.StatusOK {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	var rep versionreport.VersionReport
	if err := json.Unmarshal(r.body, &rep); err != nil {
		t.Fatal(err)
	}
	st := rep.Status
	if !st.Served || st.Storage || !st.Deprecated || st.StorageVersion != "v1" || !st.InStoredVersions || st.Objects != 2 ||
		!slices.Equal(st.ObjectNames, []string{"default/a", "default/b"}) || st.Removable {
		t.Fatalf("v1beta1: %+v", st)
	}
	if len(st.Clients) != 1 || st.Clients[0].Requests["patch"] != 2 || st.Clients[0].Requests["get"] != 1 || st.Clients[0].User == "" {
		t.Errorf("clients: %+v", st.Clients)
	}
	refs := st.References
	if len(refs.ManagedFields) != 1 || refs.ManagedFields[0].Manager != "old-tool" || refs.ManagedFields[0].Objects != 2 {
		t.Errorf("managedFields: %+v", refs.ManagedFields)
	}
	if len(refs.OwnerReferences) != 1 || refs.OwnerReferences[0].Resource != "configmaps" || refs.OwnerReferences[0].Names[0] != "default/owned" {
		t.Errorf("ownerReferences: %+v", refs.OwnerReferences)
	}
	if len(refs.Admission) != 1 || refs.Admission[0].Name != "gizmo-guard" || refs.Admission[0].Webhook != "guard.retire.example.com" {
		t.Errorf("admission: %+v", refs.Admission)
	}
	var reasons []string
	for _, b := range st.Blockers {
		reasons = append(reasons, b.Reason)
		if b.Fix == "" || b.Message == "" {
			t.Errorf("blocker without its message or fix: %+v", b)
		}
	}
	want := []string{"Clients", "StoredObjects", "ManagedFields", "OwnerReferences", "Admission", "StoredVersions"}
	if !slices.Equal(reasons, want) {
		t.Errorf("blockers %v, want %v", reasons, want)
	}

	// The list, by the CRD's label; and as kubectl gets it, a Table.
	r = e.do("GET", "/apis/crdserver.io/v1alpha1/versionreports?labelSelector=crdserver.io/crd%3Dgizmos.retire.example.com", "",
		"Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	var tbl metav1.Table
	if r.code != http.StatusOK || json.Unmarshal(r.body, &tbl) != nil || len(tbl.Rows) != 2 {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
	row := func(i int) string {
		var cells []string
		for _, c := range tbl.Rows[i].Cells {
			b, _ := json.Marshal(c)
			cells = append(cells, string(b))
		}
		return strings.Join(cells, " ")
	}
	if got := row(0); got != `"v1beta1.gizmos.retire.example.com" true false true 2 1 3 false "Clients,StoredObjects,ManagedFields,OwnerReferences,Admission,StoredVersions"` {
		t.Errorf("v1beta1 row: %s", got)
	}
	if got := row(1); got != `"v1.gizmos.retire.example.com" true true false 0 0 0 false "StorageVersion,StoredVersions"` {
		t.Errorf("v1 row: %s", got)
	}
	// Read-only.
	if r := e.do("DELETE", "/apis/crdserver.io/v1alpha1/versionreports/v1.gizmos.retire.example.com", ""); r.code != http.StatusMethodNotAllowed {
		t.Errorf("delete: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/apis/crdserver.io/v1alpha1/versionreports/v9.gizmos.retire.example.com", ""); r.code != http.StatusNotFound {
		t.Errorf("an unknown version: %d %s", r.code, r.body)
	}
}
