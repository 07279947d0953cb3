package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/crdserver/crdserver/server"
)

// Differences from Kubernetes' CRD server found by a differential suite,
// each checked here against the answer the reference server gives.

func widgetCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return fixtureCRD(t, "crd-widget-compat")
}

const widgetsPath = "/apis/compat.example.com/v1/namespaces/default/widgets"

// Writes to /status are validated as writes of the object are: the
// OpenAPI schema and CEL rules of status.
func TestStatusValidated(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	e.mustCreate(widgetsPath, `{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)
	for _, c := range []struct{ body, message string }{
		{`{"status":{"replicas":"many"}}`, `Widget.compat.example.com "w" is invalid: [status.replicas: Invalid value: "string": replicas in body must be of type integer: "string", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`},
		{`{"status":{"replicas":11}}`, `Widget.compat.example.com "w" is invalid: status.replicas: Invalid value: 11: replicas in body should be less than or equal to 10`},
		{`{"status":{"phase":"Broken"}}`, `Widget.compat.example.com "w" is invalid: status.phase: Invalid value: "Broken": phase may not be Broken`},
	} {
		r := e.do("PATCH", widgetsPath+"/w/status", c.body, "Content-Type", "application/merge-patch+json")
		st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
		if st.Message != c.message {
			t.Errorf("%s: %q, want %q", c.body, st.Message, c.message)
		}
	}
	r := e.do("GET", widgetsPath+"/w", "")
	if strings.Contains(string(r.body), `"status"`) {
		t.Fatalf("an invalid status was stored: %s", r.body)
	}
	if r := e.do("PATCH", widgetsPath+"/w/status", `{"status":{"replicas":3,"phase":"Ready"}}`, "Content-Type", "application/merge-patch+json"); r.code != http.StatusOK {
		t.Fatalf("a valid status: %d %s", r.code, r.body)
	}

	// CEL rules ratchet on status writes: a rule added later does not
	// refuse a write that leaves the value it fails as it was.
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "widgets.compat.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	phase := st.Properties["phase"]
	phase.XValidations = append(phase.XValidations, apiextensionsv1.ValidationRule{Rule: "self.startsWith('R2')", Message: "phase must start with R2"})
	st.Properties["phase"] = phase
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = st
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "the new rule in use", func() (bool, error) {
		r := e.do("PATCH", widgetsPath+"/w/status?dryRun=All", `{"status":{"phase":"Ready2"}}`, "Content-Type", "application/merge-patch+json")
		return r.code == http.StatusUnprocessableEntity, nil
	})
	if r := e.do("PATCH", widgetsPath+"/w/status", `{"status":{"replicas":4}}`, "Content-Type", "application/merge-patch+json"); r.code != http.StatusOK {
		t.Fatalf("a status write leaving the failing phase alone: %d %s", r.code, r.body)
	}
}

// A PUT whose metadata.uid is not the stored object's is a failed
// precondition: 409 Conflict, with Kubernetes' storage error text.
func TestUpdateUIDPrecondition(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	e.mustCreate(widgetsPath, `{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)
	cur := e.do("GET", widgetsPath+"/w", "").object(t)
	md := cur["metadata"].(map[string]any)
	uid := md["uid"].(string)
	md["uid"] = "6a4b7e2a-0000-0000-0000-000000000000"
	for _, path := range []string{widgetsPath + "/w", widgetsPath + "/w/status"} {
		st := expectStatus(t, e.do("PUT", path, mustJSON(cur)), http.StatusConflict, metav1.StatusReasonConflict, "")
		want := `Operation cannot be fulfilled on widgets.compat.example.com "w": StorageError: invalid object, Code: 4, Key: /registry/compat.example.com/widgets/default/w, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 6a4b7e2a-0000-0000-0000-000000000000, UID in object meta: ` + uid
		if st.Message != want {
			t.Fatalf("%s: %q\nwant %q", path, st.Message, want)
		}
	}
}

// fieldValidation applies to server-side apply too: a duplicate field in
// the applied YAML is a 400 under Strict and a warning under Warn.
func TestApplyFieldValidation(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	body := func(name string) string {
		return "apiVersion: compat.example.com/v1\nkind: Widget\nmetadata:\n  name: " + name + "\nspec:\n  size: 4\n  size: 5\n"
	}
	apply := func(name, directive string) response {
		return e.do("PATCH", widgetsPath+"/"+name+"?fieldManager=m&fieldValidation="+directive, body(name), "Content-Type", "application/apply-patch+yaml")
	}
	st := expectStatus(t, apply("strict", "Strict"), http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	if want := "error strict decoding patch: error converting YAML to JSON: yaml: unmarshal errors:\n  line 7: key \"size\" already set in map"; st.Message != want {
		t.Fatalf("strict: %q", st.Message)
	}
	if r := e.do("GET", widgetsPath+"/strict", ""); r.code != http.StatusNotFound {
		t.Fatalf("a refused apply stored the object: %d", r.code)
	}
	r := apply("warn", "Warn")
	if r.code != http.StatusCreated || r.header.Get("Warning") != `299 - "line 7: key \"size\" already set in map"` {
		t.Fatalf("warn: %d %v %s", r.code, r.header, r.body)
	}
	if r := apply("ignore", "Ignore"); r.code != http.StatusCreated || r.header.Get("Warning") != "" {
		t.Fatalf("ignore: %d %v", r.code, r.header)
	}
}

// A CRD in a protected group gets KubernetesAPIApprovalPolicyConformant
// from its api-approved.kubernetes.io annotation (Kubernetes' own
// controller); other groups get none.
func TestAPIApprovalCondition(t *testing.T) {
	e := start(t)
	for _, c := range []struct {
		group, annotation string
		status            apiextensionsv1.ConditionStatus
		reason, message   string
	}{
		{"approved.k8s.io", "https://github.com/kubernetes/kubernetes/pull/78458", apiextensionsv1.ConditionTrue, "ApprovedAnnotation", "approved in https://github.com/kubernetes/kubernetes/pull/78458"},
		{"unapproved.kubernetes.io", "unapproved, experimental", apiextensionsv1.ConditionFalse, "UnapprovedAnnotation", "not approved: \"unapproved, experimental\""},
		{"invalid.x-k8s.io", "", "", "", ""},
	} {
		crd := widgetCRD(t)
		crd.Spec.Group = c.group
		crd.Name = "widgets." + c.group
		if c.annotation != "" {
			crd.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: c.annotation}
		}
		got := e.createCRD(crd)
		var cond *apiextensionsv1.CustomResourceDefinitionCondition
		eventually(t, e.ctx, "the approval condition", func() (bool, error) {
			got, _ = e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
			cond = findCondition(got, apiextensionsv1.KubernetesAPIApprovalPolicyConformant)
			return c.status == "" || cond != nil, nil
		})
		if c.status == "" {
			if cond != nil {
				t.Fatalf("%s: %+v", c.group, cond)
			}
			continue
		}
		if cond.Status != c.status || cond.Reason != c.reason || cond.Message != c.message {
			t.Fatalf("%s: %+v", c.group, cond)
		}
	}
	// Without the annotation, or with one that is neither a URL nor
	// "unapproved, …", a protected group is refused.
	bad := widgetCRD(t)
	bad.Spec.Group, bad.Name = "bad.k8s.io", "widgets.bad.k8s.io"
	bad.Annotations = map[string]string{apiextensionsv1.KubeAPIApprovedAnnotation: "not a url"}
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), `Invalid value: "not a url": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved"`) {
		t.Fatalf("invalid annotation: %v", err)
	}
	crd := widgetCRD(t)
	crd.Spec.Group, crd.Name = "none.k8s.io", "widgets.none.k8s.io"
	_, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io"`) {
		t.Fatalf("no annotation: %v", err)
	}
}

// A conversion webhook with an invalid caBundle leaves the CRD not
// Established, with reason InvalidCABundle.
func TestInvalidCABundleCondition(t *testing.T) {
	e := start(t)
	crd := widgetCRD(t)
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
		ClientConfig:             &apiextensionsv1.WebhookClientConfig{CABundle: []byte("Cg=="), Service: &apiextensionsv1.ServiceReference{Namespace: "default", Name: "example"}},
		ConversionReviewVersions: []string{"v1"},
	}}
	if _, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Create(e.ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "Established=False InvalidCABundle", func() (bool, error) {
		got, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
		cond := findCondition(got, apiextensionsv1.Established)
		return cond != nil && cond.Status == apiextensionsv1.ConditionFalse && cond.Reason == "InvalidCABundle" && cond.Message == "The conversion webhook CABundle is invalid", nil
	})
	// And it stays so: the controllers do not write the CRD again and
	// again (they once flipped Established between Installing and
	// InvalidCABundle hundreds of times a second).
	first, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	again, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != first.ResourceVersion {
		t.Errorf("the CRD was written again: resourceVersion %s, then %s, Established %+v", first.ResourceVersion, again.ResourceVersion, findCondition(again, apiextensionsv1.Established))
	}
}

func findCondition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinitionCondition {
	if crd == nil {
		return nil
	}
	for i := range crd.Status.Conditions {
		if crd.Status.Conditions[i].Type == typ {
			return &crd.Status.Conditions[i]
		}
	}
	return nil
}

// Built-in types answer in protobuf when a client reads only protobuf, as
// generated clientsets and kube-controller-manager ask; custom resources
// have no protobuf form (406).
func TestProtobufResponses(t *testing.T) {
	e := start(t)
	cfg := rest.CopyConfig(e.cfg)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	kube := kubernetes.NewForConfigOrDie(cfg)
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	ctx := e.ctx

	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, widgetCRD(t), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a CRD in protobuf: %v", err)
	}
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("get a CRD in protobuf: %v", err)
	}
	e.waitEstablished(crd.Name) // its widgets are created below
	cms := kube.CoreV1().ConfigMaps("default")
	before, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list in protobuf: %v", err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatalf("watch in protobuf: %v", err)
	}
	defer w.Stop()
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Data: map[string]string{"a": "b"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != "ADDED" || !ok || cm.Name != "p" || cm.Data["a"] != "b" {
			t.Fatalf("watch event %v %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) < 1 {
		t.Fatalf("list in protobuf: %v %+v", err, list)
	}
	// Errors come as a protobuf Status.
	if _, err := cms.Get(ctx, "nope", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `configmaps "nope" not found` {
		t.Fatalf("not found in protobuf: %v", err)
	}
	r := e.do("GET", "/api/v1/namespaces/default/configmaps/p", "", "Accept", runtime.ContentTypeProtobuf)
	if r.code != http.StatusOK || r.header.Get("Content-Type") != runtime.ContentTypeProtobuf || !strings.HasPrefix(string(r.body), "k8s\x00") {
		t.Fatalf("raw protobuf get: %d %v %q", r.code, r.header, r.body)
	}
	// Custom resources: 406; a Table cannot be protobuf either.
	e.mustCreate(widgetsPath, `{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)
	// (The Status itself comes in protobuf, as Kubernetes sends it.)
	if r := e.do("GET", widgetsPath+"/w", "", "Accept", runtime.ContentTypeProtobuf); r.code != http.StatusNotAcceptable ||
		r.header.Get("Content-Type") != runtime.ContentTypeProtobuf || !strings.Contains(string(r.body), "NotAcceptable") {
		t.Fatalf("a custom resource in protobuf: %d %v %q", r.code, r.header, r.body)
	}
	expectStatus(t, e.do("GET", "/api/v1/namespaces/default/configmaps", "", "Accept", runtime.ContentTypeProtobuf+";as=Table;g=meta.k8s.io;v=v1"), http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "")
	// Metadata-only reads, as the metadata client asks for them.
	md := metadata.NewForConfigOrDie(e.cfg)
	pl, err := md.Resource(corev1.SchemeGroupVersion.WithResource("configmaps")).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(pl.Items) < 1 {
		t.Fatalf("metadata list: %v", err)
	}
}

// CRD changes that break the deprecation policy or existing clients are
// Warning headers, and refused with one cause per finding where enforced.
func TestCRDChangeChecks(t *testing.T) {
	e := start(t)
	e.createCRD(widgetCRD(t))
	e.mustCreate(widgetsPath, `{"apiVersion":"compat.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}`)
	update := func(edit func(crd *apiextensionsv1.CustomResourceDefinition)) response {
		t.Helper()
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "widgets.compat.example.com", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		edit(crd)
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		return e.do("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+crd.Name, mustJSON(crd))
	}
	// A removed field: a warning naming the rule, version and path.
	r := update(func(crd *apiextensionsv1.CustomResourceDefinition) {
		delete(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties, "phase")
	})
	if r.code != http.StatusOK || !strings.Contains(strings.Join(r.header.Values("Warning"), "\n"), `field-removed version=v1 path=.status.phase`) {
		t.Fatalf("a removed field: %d %v %s", r.code, r.header.Values("Warning"), r.body)
	}
	// A maximum that the stored object does not fail is no finding; one it
	// fails is.
	r = update(func(crd *apiextensionsv1.CustomResourceDefinition) {
		max := 10.0
		p := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		size := p.Properties["size"]
		size.Maximum = &max
		p.Properties["size"] = size
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = p
	})
	if r.code != http.StatusOK || len(r.header.Values("Warning")) != 0 {
		t.Fatalf("a maximum no object exceeds: %d %v", r.code, r.header.Values("Warning"))
	}
	// Enforced by the annotation: refused, one cause per finding.
	r = update(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Annotations = map[string]string{"crdserver.io/enforce-compatibility": "true"}
		max := 2.0
		p := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		size := p.Properties["size"]
		size.Maximum = &max
		p.Properties["size"] = size
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = p
	})
	st := expectStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if st.Details == nil || len(st.Details.Causes) < 1 || !strings.Contains(st.Message, "maximum-lowered version=v1 path=.spec.size") {
		t.Fatalf("enforced: %+v", st)
	}
}

// TestStrategicMergePatchOfBuiltins: every built-in type Kubernetes
// patches with its strategic merge patch is patched so here too — CRDs
// (also their status), RBAC objects, StorageVersionMigrations.
func TestStrategicMergePatchOfBuiltins(t *testing.T) {
	e := start(t)
	crd := e.createCRD(widgetCRD(t))
	smp := func(path, body string) response {
		return e.do("PATCH", path, body, "Content-Type", "application/strategic-merge-patch+json")
	}
	crdPath := "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd.Name
	if r := smp(crdPath, `{"metadata":{"labels":{"a":"b"}}}`); r.code != http.StatusOK || !strings.Contains(string(r.body), `"a":"b"`) {
		t.Fatalf("CRD: %d %s", r.code, r.body)
	}
	// As kube's own test does: a patch of status that changes nothing there.
	if r := smp(crdPath+"/status", `{"labels":{"test-label":"dummy"}}`); r.code != http.StatusOK {
		t.Fatalf("CRD status: %d %s", r.code, r.body)
	}
	e.mustCreate("/apis/rbac.authorization.k8s.io/v1/clusterroles", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"smp"},"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}]}`)
	if r := smp("/apis/rbac.authorization.k8s.io/v1/clusterroles/smp", `{"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}]}`); r.code != http.StatusOK || !strings.Contains(string(r.body), `"secrets"`) {
		t.Fatalf("ClusterRole: %d %s", r.code, r.body)
	}
	// Custom resources keep answering 415, as in Kubernetes.
	if r := smp("/apis/"+crd.Spec.Group+"/v1/namespaces/default/"+crd.Spec.Names.Plural+"/x", `{}`); r.code != http.StatusUnsupportedMediaType {
		t.Fatalf("custom resource: %d %s", r.code, r.body)
	}
}

// TestMistypedMetadata: metadata that does not fit ObjectMeta is a body
// that cannot be decoded, 400 as Kubernetes' decoder words it; through a
// patch, 422 on "patch" with the patched object, as Kubernetes answers.
func TestMistypedMetadata(t *testing.T) {
	e := start(t)
	crd := e.createCRD(widgetCRD(t))
	coll := "/apis/" + crd.Spec.Group + "/v1/namespaces/default/" + crd.Spec.Names.Plural
	obj := func(meta string) string {
		return `{"apiVersion":"` + crd.Spec.Group + `/v1","kind":"` + crd.Spec.Names.Kind + `","metadata":` + meta + `}`
	}
	kind := crd.Spec.Names.Kind
	for _, c := range []struct{ meta, want string }{
		{`{"name":"a","labels":{"foo":42,"bar":"abc"}}`, "json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string"},
		{`{"name":"a","annotations":{"foo":42}}`, "json: cannot unmarshal number into Go struct field ObjectMeta.annotations of type string"},
		{`{"name":"a","finalizers":"abc"}`, "json: cannot unmarshal string into Go struct field ObjectMeta.finalizers of type []string"},
	} {
		st := expectStatus(t, e.do("POST", coll, obj(c.meta)), http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
		if want := kind + ` in version "v1" cannot be handled as a ` + kind + ": " + c.want; st.Message != want {
			t.Errorf("POST %s:\n got %s\nwant %s", c.meta, st.Message, want)
		}
	}
	e.mustCreate(coll, obj(`{"name":"b"}`))
	st := expectStatus(t, e.do("PUT", coll+"/b", obj(`{"name":"b","labels":{"a":1}}`)), http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	if !strings.HasSuffix(st.Message, "cannot unmarshal number into Go struct field ObjectMeta.labels of type string") {
		t.Errorf("PUT: %s", st.Message)
	}
	st = expectStatus(t, e.do("PATCH", coll+"/b", `{"metadata":{"labels":{"a":1}}}`, "Content-Type", "application/merge-patch+json"),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	if !strings.HasPrefix(st.Message, ` "" is invalid: patch: Invalid value: "{`) || !strings.HasSuffix(st.Message, `": json: cannot unmarshal number into Go struct field ObjectMeta.labels of type string`) {
		t.Errorf("PATCH: %s", st.Message)
	}
}

// CRDs are stored in etcd as apiextensions.k8s.io/v1beta1, as Kubernetes
// stores them, and served as v1; a v1beta1 CRD written into etcd by
// another server (top-level validation, as v1beta1 had it) is served as
// v1, and an update that changes nothing writes nothing.
func TestCRDsStoredAsV1beta1(t *testing.T) {
	endpoint := startExternalEtcd(t)
	e := start(t, func(c *server.Config) { c.EtcdServers = []string{endpoint} })
	crd := e.createCRD(widgetCRD(t))
	raw := etcdGet(t, endpoint, "/registry/apiextensions.k8s.io/customresourcedefinitions/"+crd.Name)
	if !strings.Contains(raw, `"apiVersion":"apiextensions.k8s.io/v1beta1"`) || !strings.Contains(raw, `"kind":"CustomResourceDefinition"`) {
		t.Fatalf("etcd holds %s", raw)
	}
	got, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, crd.Name, metav1.GetOptions{})
	if err != nil || got.APIVersion != "" && got.APIVersion != "apiextensions.k8s.io/v1" || got.Spec.Versions[0].Schema == nil ||
		got.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["replicas"].Maximum == nil {
		t.Fatalf("read back: %v %+v", err, got)
	}
	// An update that changes nothing keeps the resourceVersion.
	again, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Update(e.ctx, got, metav1.UpdateOptions{})
	if err != nil || again.ResourceVersion != got.ResourceVersion {
		t.Fatalf("no-op update: %v, resourceVersion %s → %s", err, got.ResourceVersion, again.ResourceVersion)
	}

	// A v1beta1 CRD as an older server stored it.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	beta := `{"apiVersion":"apiextensions.k8s.io/v1beta1","kind":"CustomResourceDefinition","metadata":{"name":"olds.compat.example.com","uid":"0b7a3c3e-5f7e-4d0a-9b1e-2f6a1c0d9e11","creationTimestamp":"2020-01-01T00:00:00Z"},` +
		`"spec":{"group":"compat.example.com","version":"v1","names":{"plural":"olds","singular":"old","kind":"Old","listKind":"OldList"},"scope":"Namespaced",` +
		`"validation":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{"n":{"type":"integer"}}}}}},"preserveUnknownFields":false,` +
		`"versions":[{"name":"v1","served":true,"storage":true}]},"status":{"storedVersions":["v1"]}}`
	if _, err := cli.Put(e.ctx, "/registry/apiextensions.k8s.io/customresourcedefinitions/olds.compat.example.com", beta); err != nil {
		t.Fatal(err)
	}
	eventually(t, e.ctx, "the stored v1beta1 CRD served", func() (bool, error) {
		old, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(e.ctx, "olds.compat.example.com", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		s := old.Spec.Versions[0].Schema
		return s != nil && s.OpenAPIV3Schema.Properties["spec"].Properties["n"].Type == "integer", nil
	})
	eventually(t, e.ctx, "its objects validated by the schema it had at the top", func() (bool, error) {
		r := e.do("POST", "/apis/compat.example.com/v1/namespaces/default/olds", `{"apiVersion":"compat.example.com/v1","kind":"Old","metadata":{"name":"o"},"spec":{"n":"x"}}`)
		return r.code == http.StatusUnprocessableEntity, nil
	})
}
