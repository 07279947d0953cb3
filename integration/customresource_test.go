package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

const ctPath = "/apis/stable.example.com/v1/namespaces/default/crontabs"

func TestCustomResourceCreateGet(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	body := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"my-new-cron-object","uid":"x","generation":7,"creationTimestamp":"2000-01-01T00:00:00Z"},"spec":{"cronSpec":"* * * * */5","image":"my-awesome-cron-image"}}`
	r := e.do("POST", ctPath, body)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	obj := &unstructured.Unstructured{Object: r.object(t)}
	if obj.GetUID() == "x" || obj.GetUID() == "" || obj.GetGeneration() != 1 || obj.GetNamespace() != "default" ||
		obj.GetResourceVersion() == "" || obj.GetCreationTimestamp().Year() == 2000 {
		t.Fatalf("server fields not set: %s", r.body)
	}
	if obj.GetAPIVersion() != "stable.example.com/v1" || obj.GetKind() != "CronTab" {
		t.Fatalf("type meta: %s", r.body)
	}
	got := e.do("GET", ctPath+"/my-new-cron-object", "")
	if got.code != http.StatusOK || compact(string(got.body)) != compact(string(r.body)) {
		t.Fatalf("get: %d %s\nwant %s", got.code, got.body, r.body)
	}
	// Same name again: 409 AlreadyExists.
	st := expectStatus(t, e.do("POST", ctPath, body), http.StatusConflict, metav1.StatusReasonAlreadyExists,
		`crontabs.stable.example.com "my-new-cron-object" already exists`)
	if st.Details.Name != "my-new-cron-object" || st.Details.Group != "stable.example.com" || st.Details.Kind != "crontabs" {
		t.Fatalf("details %+v", st.Details)
	}
	// Missing: 404 NotFound.
	expectStatus(t, e.do("GET", ctPath+"/nope", ""), http.StatusNotFound, metav1.StatusReasonNotFound, `crontabs.stable.example.com "nope" not found`)
	// generateName.
	r = e.do("POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"generateName":"gen-"}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("generateName: %d %s", r.code, r.body)
	}
	name := (&unstructured.Unstructured{Object: r.object(t)}).GetName()
	if !strings.HasPrefix(name, "gen-") || len(name) != len("gen-")+5 {
		t.Fatalf("generated name %q", name)
	}
}

func TestCustomResourceBadInput(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cases := []struct {
		name, method, path, body string
		code                     int
		reason                   metav1.StatusReason
		msg                      string
	}{
		{"malformed JSON", "POST", ctPath, `{bad`, 400, metav1.StatusReasonBadRequest, "the object provided is unrecognized (must be of type CronTab): couldn't get version/kind; json parse error"},
		{"wrong apiVersion", "POST", ctPath, `{"apiVersion":"stable.example.com/v2","kind":"CronTab","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "the API version in the data (stable.example.com/v2) does not match the expected API version (stable.example.com/v1)"},
		{"wrong kind", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"Other","metadata":{"name":"x"}}`, 422, metav1.StatusReasonInvalid, `Other.stable.example.com "x" is invalid: kind: Invalid value: "Other": must be CronTab`},
		{"namespace mismatch", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x","namespace":"other"}}`, 400, metav1.StatusReasonBadRequest, "the namespace of the provided object does not match the namespace sent on the request"},
		{"invalid name", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"Not_Valid"}}`, 422, metav1.StatusReasonInvalid, "metadata.name: Invalid value: \"Not_Valid\""},
		{"no name", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{}}`, 422, metav1.StatusReasonInvalid, "metadata.name: Required value: name or generateName is required"},
		{"bad label", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x","labels":{"a b":"c"}}}`, 422, metav1.StatusReasonInvalid, "metadata.labels: Invalid value: \"a b\""},
		{"metadata not an object", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":"x"}`, 422, metav1.StatusReasonInvalid, "metadata: Invalid value"},
		{"resourceVersion on create", "POST", ctPath, `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x","resourceVersion":"5"}}`, 400, metav1.StatusReasonBadRequest, "resourceVersion should not be set on objects to be created"},
		{"namespace missing", "POST", "/apis/stable.example.com/v1/namespaces/nope/crontabs", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"x"}}`, 404, metav1.StatusReasonNotFound, `namespaces "nope" not found`},
		{"text body", "POST", ctPath, `x`, 415, metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{"unknown resource", "GET", "/apis/stable.example.com/v1/namespaces/default/foos", "", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"unknown group", "GET", "/apis/nope.example.com/v1/foos", "", 404, metav1.StatusReasonNotFound, "the server could not find the requested resource"},
		{"unknown subresource", "GET", ctPath + "/x/foo", "", 404, metav1.StatusReasonNotFound, ""},
		{"namespaced without namespace", "GET", "/apis/stable.example.com/v1/crontabs/x", "", 404, metav1.StatusReasonNotFound, ""},
		{"POST to an object", "POST", ctPath + "/x", `{}`, 405, metav1.StatusReasonMethodNotAllowed, "create is not supported on resources of kind \"crontabs.stable.example.com\""},
		{"bad resourceVersion", "GET", ctPath + "/x?resourceVersion=abc", "", 400, metav1.StatusReasonBadRequest, "invalid resource version"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := []string{}
			if c.name == "text body" {
				headers = []string{"Content-Type", "text/plain"}
			}
			expectStatus(t, e.do(c.method, c.path, c.body, headers...), c.code, c.reason, c.msg)
		})
	}
	// Nothing malformed was stored.
	l, err := e.dyn.Resource(crontabs).List(e.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 0 {
		t.Fatalf("bad input stored something: %v %d", err, len(l.Items))
	}
}

func TestCustomResourceBodyTooLarge(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	big := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"big"},"spec":{"image":"` + strings.Repeat("x", 3*1024*1024) + `"}}`
	expectStatus(t, e.do("POST", ctPath, big), http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728")
	// Under the request limit but over the stored object limit.
	large := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"large"},"spec":{"image":"` + strings.Repeat("x", 2*1024*1024) + `"}}`
	expectStatus(t, e.do("POST", ctPath, large), http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "limit is")
}

func TestCustomResourceUpdate(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	created, err := cts.Create(e.ctx, cronTab("u", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A metadata-only change keeps the generation.
	obj := created.DeepCopy()
	obj.SetLabels(map[string]string{"a": "b"})
	upd, err := cts.Update(e.ctx, obj, metav1.UpdateOptions{})
	if err != nil || upd.GetGeneration() != 1 || upd.GetResourceVersion() == created.GetResourceVersion() {
		t.Fatalf("label update: %v gen %d", err, upd.GetGeneration())
	}
	// A spec change bumps it; server fields keep their values.
	obj = upd.DeepCopy()
	_ = unstructured.SetNestedField(obj.Object, "other", "spec", "image")
	obj.SetCreationTimestamp(metav1.NewTime(time.Unix(0, 0)))
	obj.SetUID("")
	upd2, err := cts.Update(e.ctx, obj, metav1.UpdateOptions{})
	if err != nil || upd2.GetGeneration() != 2 || upd2.GetUID() != created.GetUID() || !upd2.GetCreationTimestamp().Time.Equal(created.GetCreationTimestamp().Time) {
		t.Fatalf("spec update: %v %+v", err, upd2)
	}
	// An update that changes nothing writes nothing.
	same, err := cts.Update(e.ctx, upd2, metav1.UpdateOptions{})
	if err != nil || same.GetResourceVersion() != upd2.GetResourceVersion() {
		t.Fatalf("no-op update moved resourceVersion: %v %s -> %s", err, upd2.GetResourceVersion(), same.GetResourceVersion())
	}
	// Stale resourceVersion: 409 Conflict.
	_, err = cts.Update(e.ctx, upd, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v", err)
	}
	// No resourceVersion: 422, custom resources need one.
	noRV := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"u"},"spec":{}}`
	expectStatus(t, e.do("PUT", ctPath+"/u", noRV), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`crontabs.stable.example.com "u" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`)
	// Name in body and URL differ: 400.
	expectStatus(t, e.do("PUT", ctPath+"/u", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"v","resourceVersion":"1"}}`),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, "the name of the object (v) does not match the name on the URL (u)")
	// Missing object: 404 (no create on update).
	expectStatus(t, e.do("PUT", ctPath+"/missing", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"missing","resourceVersion":"1"}}`),
		http.StatusNotFound, metav1.StatusReasonNotFound, `crontabs.stable.example.com "missing" not found`)
}

func ptr[T any](v T) *T { return &v }

func TestCustomResourcePatch(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["list"] = apiextensionsv1.JSONSchemaProps{
		Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}},
	}
	e.createCRD(crd)
	cts := e.dyn.Resource(crontabs).Namespace("default")
	ct := cronTab("p", nil)
	_ = unstructured.SetNestedStringSlice(ct.Object, []string{"a", "b"}, "spec", "list")
	if _, err := cts.Create(e.ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cts.Patch(e.ctx, "p", types.MergePatchType, []byte(`{"spec":{"replicas":3,"image":null,"list":["c"]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if spec["replicas"] != int64(3) || spec["image"] != nil || len(spec["list"].([]any)) != 1 || got.GetGeneration() != 2 {
		t.Fatalf("merge patch: %v gen %d", spec, got.GetGeneration())
	}
	got, err = cts.Patch(e.ctx, "p", types.JSONPatchType, []byte(`[{"op":"test","path":"/spec/replicas","value":3},{"op":"replace","path":"/spec/replicas","value":4}]`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 4 {
		t.Fatalf("json patch: %d", r)
	}
	// A failed test op: 422.
	r := e.do("PATCH", ctPath+"/p", `[{"op":"test","path":"/spec/replicas","value":3}]`, "Content-Type", "application/json-patch+json")
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("failed test op: %d %s", r.code, r.body)
	}
	// Malformed patch: 400.
	r = e.do("PATCH", ctPath+"/p", `{`, "Content-Type", "application/merge-patch+json")
	expectStatus(t, r, http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	// Strategic merge patch: 415 for custom resources.
	r = e.do("PATCH", ctPath+"/p", `{}`, "Content-Type", "application/strategic-merge-patch+json")
	expectStatus(t, r, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
	// A patch that pins a stale resourceVersion: 409.
	r = e.do("PATCH", ctPath+"/p", `{"metadata":{"resourceVersion":"1"}}`, "Content-Type", "application/merge-patch+json")
	expectStatus(t, r, http.StatusConflict, metav1.StatusReasonConflict, "the object has been modified")
	// Patch of a missing object: 404.
	r = e.do("PATCH", ctPath+"/missing", `{}`, "Content-Type", "application/merge-patch+json")
	expectStatus(t, r, http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
	// Too many operations: 413.
	ops := "[" + strings.TrimSuffix(strings.Repeat(`{"op":"test","path":"/kind","value":"CronTab"},`, 10001), ",") + "]"
	r = e.do("PATCH", ctPath+"/p", ops, "Content-Type", "application/json-patch+json")
	expectStatus(t, r, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "The allowed maximum operations in a JSON patch is 10000, got 10001")
}

func TestCustomResourceDelete(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	created, err := cts.Create(e.ctx, cronTab("d", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A wrong uid precondition: 409, worded as kube-apiserver words it
	// (the resource named by its kind).
	r := e.do("DELETE", ctPath+"/d", `{"preconditions":{"uid":"nope"}}`)
	expectStatus(t, r, http.StatusConflict, metav1.StatusReasonConflict, `Operation cannot be fulfilled on CronTab.stable.example.com "d": the UID in the precondition (nope) does not match the UID in record (`+string(created.GetUID())+`). The object might have been deleted and then recreated`)
	r = e.do("DELETE", ctPath+"/d", "")
	if r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	st := r.status(t)
	if st.Status != metav1.StatusSuccess || st.Details.Name != "d" || st.Details.Kind != "crontabs" || st.Details.Group != "stable.example.com" || st.Details.UID != created.GetUID() {
		t.Fatalf("delete status %+v", st)
	}
	expectStatus(t, e.do("DELETE", ctPath+"/d", ""), http.StatusNotFound, metav1.StatusReasonNotFound, "not found")

	// With a finalizer: marked, kept, then gone when the finalizer is removed.
	ct := cronTab("f", nil)
	ct.SetFinalizers([]string{"example.com/f"})
	if _, err := cts.Create(e.ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.do("DELETE", ctPath+"/f", "")
	marked := &unstructured.Unstructured{Object: r.object(t)}
	if r.code != http.StatusOK || marked.GetDeletionTimestamp() == nil || marked.GetDeletionGracePeriodSeconds() == nil || *marked.GetDeletionGracePeriodSeconds() != 0 {
		t.Fatalf("delete with finalizer: %d %s", r.code, r.body)
	}
	// Finalizers cannot be added while terminating.
	marked.SetFinalizers([]string{"example.com/f", "example.com/g"})
	if _, err := cts.Update(e.ctx, marked, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("adding a finalizer while terminating: %v", err)
	}
	// Removing the last finalizer deletes the object in place of the
	// update, as kube-apiserver does: watchers see it DELETED as it was
	// stored (finalizer and all), with no update before; the answer is
	// the object as the update made it.
	w, err := cts.Watch(e.ctx, metav1.ListOptions{ResourceVersion: marked.GetResourceVersion(), FieldSelector: "metadata.name=f"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	marked.SetFinalizers(nil)
	answer, err := cts.Update(e.ctx, marked, metav1.UpdateOptions{})
	if err != nil || len(answer.GetFinalizers()) != 0 || answer.GetResourceVersion() != marked.GetResourceVersion() {
		t.Fatalf("update removing the last finalizer: %v %v", err, answer)
	}
	select {
	case ev := <-w.ResultChan():
		if u, ok := ev.Object.(*unstructured.Unstructured); ev.Type != watch.Deleted || !ok || len(u.GetFinalizers()) != 1 {
			t.Fatalf("first event after the last finalizer went: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no watch event for the deletion")
	}
	if _, err := cts.Get(e.ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("object with its last finalizer removed still there: %v", err)
	}

	// deletecollection with a label selector.
	for i, color := range []string{"red", "red", "blue"} {
		if _, err := cts.Create(e.ctx, cronTab("c"+string(rune('0'+i)), map[string]string{"color": color}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cts.DeleteCollection(e.ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "color=red"}); err != nil {
		t.Fatal(err)
	}
	l, _ := cts.List(e.ctx, metav1.ListOptions{})
	if len(l.Items) != 1 || l.Items[0].GetLabels()["color"] != "blue" {
		t.Fatalf("after deletecollection: %d items", len(l.Items))
	}
}

func TestCustomResourceDryRun(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	r := e.do("POST", ctPath+"?dryRun=All", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"generateName":"dry-"}}`)
	obj := &unstructured.Unstructured{Object: r.object(t)}
	if r.code != http.StatusCreated || obj.GetUID() == "" || !strings.HasPrefix(obj.GetName(), "dry-") {
		t.Fatalf("dry-run create: %d %s", r.code, r.body)
	}
	expectStatus(t, e.do("GET", ctPath+"/"+obj.GetName(), ""), http.StatusNotFound, metav1.StatusReasonNotFound, "")
	expectStatus(t, e.do("POST", ctPath+"?dryRun=Some", `{}`), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `dryRun: Unsupported value`)
}

func TestClusterScopedCustomResource(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	e.createCRD(crd)
	r := e.do("POST", "/apis/stable.example.com/v1/crontabs", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"c","namespace":"ignored"}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if ns := (&unstructured.Unstructured{Object: r.object(t)}).GetNamespace(); ns != "" {
		t.Fatalf("cluster-scoped object has namespace %q", ns)
	}
	if r := e.do("GET", "/apis/stable.example.com/v1/crontabs/c", ""); r.code != http.StatusOK {
		t.Fatalf("get: %d", r.code)
	}
	expectStatus(t, e.do("GET", "/apis/stable.example.com/v1/namespaces/default/crontabs/c", ""), http.StatusNotFound, metav1.StatusReasonNotFound, "")
}

func TestStatusSubresource(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	e.createCRD(crd)
	cts := e.dyn.Resource(crontabs).Namespace("default")
	ct := cronTab("s", nil)
	ct.Object["status"] = map[string]any{"ready": true}
	created, err := cts.Create(e.ctx, ct, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := created.Object["status"]; ok {
		t.Fatal("create kept status")
	}
	created.Object["status"] = map[string]any{"ready": true}
	_ = unstructured.SetNestedField(created.Object, "changed", "spec", "image")
	st, err := cts.UpdateStatus(e.ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img, _, _ := unstructured.NestedString(st.Object, "spec", "image"); img != "my-awesome-cron-image" || st.GetGeneration() != 1 {
		t.Fatalf("status update changed spec: %s gen %d", img, st.GetGeneration())
	}
	if ready, _, _ := unstructured.NestedBool(st.Object, "status", "ready"); !ready {
		t.Fatal("status not written")
	}
	// The main resource ignores status.
	st.Object["status"] = map[string]any{"ready": false}
	main, err := cts.Update(e.ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ready, _, _ := unstructured.NestedBool(main.Object, "status", "ready"); !ready || main.GetGeneration() != 1 {
		t.Fatalf("main resource changed status: gen %d", main.GetGeneration())
	}
	if r := e.do("GET", ctPath+"/s/status", ""); r.code != http.StatusOK {
		t.Fatalf("get status: %d", r.code)
	}
	if r := e.do("GET", ctPath+"/s/scale", ""); r.code != http.StatusNotFound {
		t.Fatalf("scale without the subresource: %d", r.code)
	}
}

func TestScaleSubresource(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	replicas := spec.Properties["replicas"]
	replicas.Maximum = ptr(10.0)
	spec.Properties["replicas"] = replicas
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}
	crd.Spec.Versions[0].Subresources = &apiextensionsv1.CustomResourceSubresources{
		Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr(".status.labelSelector")},
	}
	e.createCRD(crd)
	ct := cronTab("s", nil)
	_ = unstructured.SetNestedField(ct.Object, int64(3), "spec", "replicas")
	if _, err := e.dyn.Resource(crontabs).Namespace("default").Create(e.ctx, ct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := ctPath + "/s/scale"
	r := e.do("GET", scale, "")
	var s autoscalingv1.Scale
	if err := json.Unmarshal(r.body, &s); err != nil || r.code != 200 || s.Kind != "Scale" || s.APIVersion != "autoscaling/v1" || s.Spec.Replicas != 3 || s.Status.Replicas != 0 || s.Name != "s" {
		t.Fatalf("get scale: %d %s", r.code, r.body)
	}
	r = e.do("PATCH", scale, `{"spec":{"replicas":5}}`, "Content-Type", "application/merge-patch+json")
	if err := json.Unmarshal(r.body, &s); err != nil || r.code != 200 || s.Spec.Replicas != 5 {
		t.Fatalf("patch scale: %d %s", r.code, r.body)
	}
	got, _ := e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "s", metav1.GetOptions{})
	if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 5 || got.GetGeneration() != 2 {
		t.Fatalf("object after scale: replicas %d generation %d", n, got.GetGeneration())
	}
	s.Spec.Replicas = 7
	r = e.do("PUT", scale, mustJSON(s))
	if r.code != 200 {
		t.Fatalf("put scale: %d %s", r.code, r.body)
	}
	// The old resourceVersion now conflicts; the schema's maximum applies; negative is refused.
	expectStatus(t, e.do("PUT", scale, mustJSON(s)), http.StatusConflict, metav1.StatusReasonConflict, "")
	expectStatus(t, e.do("PATCH", scale, `{"spec":{"replicas":15}}`, "Content-Type", "application/merge-patch+json"), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10")
	expectStatus(t, e.do("PATCH", scale, `{"spec":{"replicas":-1}}`, "Content-Type", "application/merge-patch+json"), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `CronTab.stable.example.com "s" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer`)
	// JSON patches of the Scale: applied as on the object, failures 422.
	if r := e.do("PATCH", scale, `[{"op":"test","path":"/kind","value":"Scale"},{"op":"replace","path":"/spec/replicas","value":6},{"op":"test","path":"/spec/replicas","value":6},{"op":"replace","path":"/spec/replicas","value":7}]`, "Content-Type", "application/json-patch+json"); r.code != http.StatusOK || !contains(r.body, `"spec":{"replicas":7}`) {
		t.Fatalf("JSON patch of scale: %d %s", r.code, r.body)
	}
	for _, p := range []string{`[{"op":"test","path":"/spec/replicas","value":99}]`, `[{"op":"test","path":""}]`} {
		expectStatus(t, e.do("PATCH", scale, p, "Content-Type", "application/json-patch+json"), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request")
	}
	expectStatus(t, e.do("PATCH", scale, `{"op":"test"}`, "Content-Type", "application/json-patch+json"), http.StatusBadRequest, metav1.StatusReasonBadRequest, "")
	// Status replicas and the selector come from status.
	got, _ = e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "s", metav1.GetOptions{})
	got.Object["status"] = map[string]any{"replicas": int64(2), "labelSelector": "app=cron"}
	if _, err := e.dyn.Resource(crontabs).Namespace("default").UpdateStatus(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = e.do("GET", scale, "")
	if err := json.Unmarshal(r.body, &s); err != nil || s.Status.Replicas != 2 || s.Status.Selector != "app=cron" || s.Spec.Replicas != 7 {
		t.Fatalf("scale status: %s", r.body)
	}
	// Discovery names the subresource as autoscaling/v1 Scale.
	if r := e.do("GET", "/apis/stable.example.com/v1", ""); !contains(r.body, `"name":"crontabs/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale"`) {
		t.Fatalf("discovery: %s", r.body)
	}

	// managedFields as Kubernetes' scale handler keeps them (checked
	// against kube-apiserver): the applier's replicas pass to the scaler,
	// an Update of the scale subresource without a time, so listed before
	// timed Updates; the applier, left with nothing, goes.
	apply := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"m"},"spec":{"replicas":3}}`
	if r := e.do("PATCH", ctPath+"/m?fieldManager=applier", apply, "Content-Type", "application/apply-patch+yaml"); r.code != http.StatusCreated {
		t.Fatalf("apply: %d %s", r.code, r.body)
	}
	if r := e.do("PATCH", ctPath+"/m?fieldManager=labeller", `{"metadata":{"labels":{"a":"b"}}}`, "Content-Type", "application/merge-patch+json"); r.code != http.StatusOK {
		t.Fatalf("label: %d %s", r.code, r.body)
	}
	if r := e.do("PATCH", ctPath+"/m/scale?fieldManager=scaler", `{"spec":{"replicas":5}}`, "Content-Type", "application/merge-patch+json"); r.code != http.StatusOK {
		t.Fatalf("scale: %d %s", r.code, r.body)
	}
	m, _ := e.dyn.Resource(crontabs).Namespace("default").Get(e.ctx, "m", metav1.GetOptions{})
	mf := m.GetManagedFields()
	if len(mf) != 2 ||
		mf[0].Manager != "scaler" || mf[0].Operation != "Update" || mf[0].Subresource != "scale" || mf[0].Time != nil ||
		mf[0].FieldsV1.GetRawString() != `{"f:spec":{"f:replicas":{}}}` || mf[0].APIVersion != "stable.example.com/v1" ||
		mf[1].Manager != "labeller" {
		t.Fatalf("managedFields after scale: %s", mustJSON(mf))
	}
	// Scaling to the same replicas writes nothing.
	rv := m.GetResourceVersion()
	if r := e.do("PATCH", ctPath+"/m/scale?fieldManager=scaler", `{"spec":{"replicas":5}}`, "Content-Type", "application/merge-patch+json"); r.code != http.StatusOK || !contains(r.body, `"resourceVersion":"`+rv+`"`) {
		t.Fatalf("scale again: %d %s", r.code, r.body)
	}

	// Server-side apply of the Scale with client-go: the scaler owns the
	// replicas, so another manager's apply conflicts, and force takes them.
	sc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale",
		"metadata": map[string]any{"name": "m"}, "spec": map[string]any{"replicas": int64(6)}}}
	cts := e.dyn.Resource(crontabs).Namespace("default")
	if _, err := cts.Apply(e.ctx, "m", sc, metav1.ApplyOptions{FieldManager: "hpa"}, "scale"); !apierrors.IsConflict(err) ||
		err.Error() != `Apply failed with 1 conflict: conflict with "scaler" with subresource "scale" using autoscaling/v1: .spec.replicas` {
		t.Fatalf("apply of the scale over the scaler's replicas: %v", err)
	}
	out, err := cts.Apply(e.ctx, "m", sc, metav1.ApplyOptions{FieldManager: "hpa", Force: true}, "scale")
	if err != nil || out.GetKind() != "Scale" || out.Object["spec"].(map[string]any)["replicas"] != int64(6) {
		t.Fatalf("forced apply of the scale: %v %v", err, out)
	}
	m, _ = cts.Get(e.ctx, "m", metav1.GetOptions{})
	if r, _, _ := unstructured.NestedInt64(m.Object, "spec", "replicas"); r != 6 {
		t.Fatalf("replicas after the apply: %v", m.Object)
	}
	if mf := m.GetManagedFields(); len(mf) != 2 || mf[0].Manager != "hpa" || mf[0].Operation != "Apply" ||
		mf[0].Subresource != "scale" || mf[0].FieldsV1.GetRawString() != `{"f:spec":{"f:replicas":{}}}` || mf[1].Manager != "labeller" {
		t.Fatalf("managedFields after the apply: %s", mustJSON(mf))
	}
}

// A write's answer is negotiated before the write with the transforms of
// a read, as kube-apiserver negotiates it: a create asked for as a Table
// answers 201 with the new object's Table, and one whose answer the server
// cannot give is refused (406) without being made.
func TestWriteAnsweredAsTable(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	body := `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"t"},"spec":{"cronSpec":"* * * * */5"}}`
	r := e.do("POST", ctPath, body, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io", "Content-Type", "application/json")
	tbl := r.object(t)
	if r.code != http.StatusCreated || tbl["kind"] != "Table" {
		t.Fatalf("create as a Table: %d %s", r.code, r.body)
	}
	rows, _ := tbl["rows"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["cells"].([]any)[0] != "t" {
		t.Fatalf("rows: %v", tbl["rows"])
	}
	r = e.do("POST", ctPath, strings.Replace(body, `"t"`, `"x"`, 1), "Accept", "application/xml", "Content-Type", "application/json")
	expectStatus(t, r, http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "")
	expectStatus(t, e.do("GET", ctPath+"/x", ""), http.StatusNotFound, metav1.StatusReasonNotFound, "")
}
