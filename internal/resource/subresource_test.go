package resource

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/crdserver/crdserver/internal/request"
)

// statusWidgets have a status subresource, with a custom resource's rules:
// the main resource keeps the stored status, the status subresource the
// stored spec; status.size may not be negative.
type statusWidgets struct{ widgetStrategy }

func (s statusWidgets) PrepareForUpdate(ctx context.Context, obj, old *Object) {
	if st, ok := old.Content["status"]; ok {
		obj.Content["status"] = st
	} else {
		delete(obj.Content, "status")
	}
	s.widgetStrategy.PrepareForUpdate(ctx, obj, old)
}

func (statusWidgets) PrepareForStatusUpdate(_ context.Context, obj, old *Object) {
	if sp, ok := old.Content["spec"]; ok {
		obj.Content["spec"] = sp
	}
}

func (statusWidgets) ValidateStatusUpdate(_ context.Context, obj, _ *Object) field.ErrorList {
	st, _ := obj.Content["status"].(map[string]any)
	if n, ok := st["size"].(int64); ok && n < 0 {
		return field.ErrorList{field.Invalid(field.NewPath("status", "size"), n, "must be at least 0")}
	}
	return nil
}

func statusEngine(t *testing.T) *engine {
	e := newEngine(t)
	e.res.Strategy = statusWidgets{}
	e.ver.Status = true
	e.ver.Scale = &Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size", LabelSelectorPath: ".status.selector"}
	e.create(widget("w", ""))
	return e
}

func withStatus(rv, spec, status string) string {
	return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"` + rv + `"},"spec":` + spec + `,"status":` + status + `}`
}

func TestStatusSubresource(t *testing.T) {
	e := statusEngine(t)
	path := widgetsPath + "/w/status"

	// GET answers the whole object.
	if a := e.do("GET", path, "", ""); a.code != 200 || a.body["kind"] != "Widget" || meta(a)["name"] != "w" {
		t.Fatalf("get status: %d %s", a.code, a.raw)
	}
	// PUT writes the status only: the spec change is dropped, and the
	// generation (which counts spec changes) stays.
	a := e.do("PUT", path, "application/json", withStatus("2", `{"size":9}`, `{"size":1,"selector":"app=w"}`))
	if a.code != 200 || a.body["spec"].(map[string]any)["size"] != 1.0 || a.body["status"].(map[string]any)["size"] != 1.0 || meta(a)["generation"] != 1.0 || meta(a)["resourceVersion"] != "3" {
		t.Fatalf("status update: %d %s", a.code, a.raw)
	}
	// The main resource drops status changes.
	a = e.do("PUT", widgetsPath+"/w", "application/json", withStatus("3", `{"size":2}`, `{"size":5}`))
	if a.code != 200 || a.body["status"].(map[string]any)["size"] != 1.0 || meta(a)["generation"] != 2.0 {
		t.Fatalf("main resource update: %d %s", a.code, a.raw)
	}
	// A status patch, validated by the status rules.
	if a = e.do("PATCH", path, "application/merge-patch+json", `{"status":{"size":3}}`); a.code != 200 || a.body["status"].(map[string]any)["size"] != 3.0 {
		t.Fatalf("status patch: %d %s", a.code, a.raw)
	}
	puts := e.store.puts
	e.do("PATCH", path, "application/merge-patch+json", `{"status":{"size":-3}}`).
		status(t, 422, metav1.StatusReasonInvalid, `Widget.example.com "w" is invalid: status.size: Invalid value: -3: must be at least 0`)
	e.do("PUT", path, "application/json", withStatus("2", `{"size":1}`, `{"size":1}`)).status(t, 409, metav1.StatusReasonConflict, "the object has been modified")
	// Other verbs are not served on status.
	e.do("DELETE", path, "", "").status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	e.do("POST", path, "application/json", widget("w", "")).status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	if e.store.puts != puts {
		t.Fatal("a refused status write stored")
	}
	// A version without the subresource has no status.
	e.ver.Status = false
	e.do("GET", path, "", "").status(t, 404, metav1.StatusReasonNotFound, "")
}

// scaleOf decodes a Scale answer.
func scaleOf(t *testing.T, a answer) (spec, status float64, selector, rv string) {
	t.Helper()
	if a.body["kind"] != "Scale" || a.body["apiVersion"] != "autoscaling/v1" {
		t.Fatalf("not a Scale: %d %s", a.code, a.raw)
	}
	sp, _ := a.body["spec"].(map[string]any)
	st, _ := a.body["status"].(map[string]any)
	spec, _ = sp["replicas"].(float64)
	status, _ = st["replicas"].(float64)
	selector, _ = st["selector"].(string)
	return spec, status, selector, meta(a)["resourceVersion"].(string)
}

func TestScaleSubresource(t *testing.T) {
	e := statusEngine(t)
	e.do("PUT", widgetsPath+"/w/status", "application/json", withStatus("2", `{"size":1}`, `{"size":1,"selector":"app=w"}`))
	path := widgetsPath + "/w/scale"

	a := e.do("GET", path, "", "")
	spec, status, sel, rv := scaleOf(t, a)
	if a.code != 200 || spec != 1 || status != 1 || sel != "app=w" || rv != "3" || meta(a)["name"] != "w" || meta(a)["namespace"] != "default" || meta(a)["uid"] != e.stored("w")["metadata"].(map[string]any)["uid"] {
		t.Fatalf("get scale: %d %s", a.code, a.raw)
	}

	// PUT: the replicas go to spec.size, through the object's rules.
	a = e.do("PUT", path, "application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"w","resourceVersion":"3"},"spec":{"replicas":4}}`)
	if spec, _, _, rv = scaleOf(t, a); a.code != 200 || spec != 4 || rv != "4" {
		t.Fatalf("put scale: %d %s", a.code, a.raw)
	}
	if obj := e.stored("w"); obj["spec"].(map[string]any)["size"] != 4.0 || obj["metadata"].(map[string]any)["generation"] != 2.0 {
		t.Fatalf("stored after scale: %v", obj)
	}
	// Merge and JSON patches of the Scale.
	a = e.do("PATCH", path, "application/merge-patch+json", `{"spec":{"replicas":5}}`)
	if spec, _, _, _ = scaleOf(t, a); a.code != 200 || spec != 5 {
		t.Fatalf("merge patch: %d %s", a.code, a.raw)
	}
	a = e.do("PATCH", path, "application/json-patch+json", `[{"op":"replace","path":"/spec/replicas","value":6}]`)
	if spec, _, _, _ = scaleOf(t, a); a.code != 200 || spec != 6 {
		t.Fatalf("JSON patch: %d %s", a.code, a.raw)
	}
	// A dry run stores nothing.
	puts := e.store.puts
	a = e.do("PATCH", path+"?dryRun=All", "application/merge-patch+json", `{"spec":{"replicas":8}}`)
	if spec, _, _, _ = scaleOf(t, a); a.code != 200 || spec != 8 || e.store.puts != puts {
		t.Fatalf("dry run: %d %s", a.code, a.raw)
	}

	// Refusals.
	e.do("PUT", path, "application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"w","resourceVersion":"3"},"spec":{"replicas":4}}`).
		status(t, 409, metav1.StatusReasonConflict, "the object has been modified")
	e.do("PATCH", path, "application/merge-patch+json", `{"spec":{"replicas":-1}}`).
		status(t, 422, metav1.StatusReasonInvalid, "spec.size: Invalid value: -1: must be at least 0")
	e.do("PUT", path, "application/json", `{"kind":"Widget","spec":{"replicas":4}}`).status(t, 400, metav1.StatusReasonBadRequest, "")
	e.do("PATCH", path, "application/strategic-merge-patch+json", `{}`).status(t, 415, metav1.StatusReasonUnsupportedMediaType, "")
	e.do("GET", widgetsPath+"/missing/scale", "", "").status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "missing" not found`)
	e.do("DELETE", path, "", "").status(t, 405, metav1.StatusReasonMethodNotAllowed, "")
	if e.store.puts != puts {
		t.Fatal("a refused scale write stored")
	}
}

// Server-side apply of a custom resource's scale: kube-apiserver takes
// apply-patch+yaml there, with the object's managedFields seen as the
// Scale's (the owner of the replicas path owns .spec.replicas), so an
// apply that changes replicas another manager set conflicts, and force
// takes them over. (kube-apiserver v1.37 answers such a forced apply 500
// "request to convert CR to an invalid group/version: autoscaling/v1";
// crdserver applies it.)
func TestScaleApply(t *testing.T) {
	e := newEngine(t)
	e.res.Strategy = statusWidgets{}
	e.ver.Status = true
	e.ver.Scale = &Scale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size", LabelSelectorPath: ".status.selector"}
	e.res.FieldManagers = applyEngine(t).res.FieldManagers
	if a := e.do("POST", widgetsPath+"?fieldManager=creator", "application/json", widget("w", "")); a.code != 201 {
		t.Fatalf("create: %d %s", a.code, a.raw)
	}
	path := widgetsPath + "/w/scale"
	scale := func(name string, replicas int) string {
		return "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: " + name + "\nspec:\n  replicas: " + itoa(int64(replicas)) + "\n"
	}
	puts := e.store.puts
	e.do("PATCH", path+"?fieldManager=hpa", applyPatch, scale("w", 7)).
		status(t, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "creator" using autoscaling/v1: .spec.replicas`)
	e.do("PATCH", path, applyPatch, scale("w", 7)).
		status(t, 422, metav1.StatusReasonInvalid, `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`)
	e.do("PATCH", path+"?fieldManager=hpa", applyPatch, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n").
		status(t, 400, metav1.StatusReasonBadRequest, "invalid object type: example.com/v1, Kind=Widget")
	e.do("PATCH", path+"?fieldManager=hpa", applyPatch, scale("x", 7)).
		status(t, 400, metav1.StatusReasonBadRequest, "the name of the object (x) does not match the name on the URL (w)")
	e.do("PATCH", path, request.StrategicMergePatch, `{}`).
		status(t, 415, metav1.StatusReasonUnsupportedMediaType, "accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
	if e.store.puts != puts {
		t.Fatal("a refused apply stored")
	}

	a := e.do("PATCH", path+"?fieldManager=hpa&force=true", applyPatch, scale("w", 7))
	if spec, _, _, _ := scaleOf(t, a); a.code != 200 || spec != 7 {
		t.Fatalf("forced apply: %d %s", a.code, a.raw)
	}
	obj := e.do("GET", widgetsPath+"/w", "", "")
	if size := obj.body["spec"].(map[string]any)["size"]; size != float64(7) {
		t.Fatalf("object after apply: %s", obj.raw)
	}
	names, owned := managers(t, meta(obj))
	if strings.Join(names, ",") != "creator/Update,hpa/Apply" || !strings.Contains(owned["hpa/Apply"], "f:size") || strings.Contains(owned["creator/Update"], "f:size") {
		t.Fatalf("managers: %v %v\n%s", names, owned, obj.raw)
	}
	for _, m := range meta(obj)["managedFields"].([]any) {
		if m := m.(map[string]any); m["manager"] == "hpa" && m["subresource"] != "scale" {
			t.Fatalf("the apply's entry: %v", m)
		}
	}
	// The same apply again changes nothing and conflicts with no one.
	if a := e.do("PATCH", path+"?fieldManager=hpa", applyPatch, scale("w", 7)); a.code != 200 {
		t.Fatalf("re-apply: %d %s", a.code, a.raw)
	}
}

// Writes through the status and scale subresources are tracked in
// managedFields as writes of that subresource.
func TestSubresourceManagedFields(t *testing.T) {
	e := statusEngine(t)
	e.res.FieldManagers = applyEngine(t).res.FieldManagers
	// Created again, tracked: Kubernetes' field manager does not start
	// tracking an object on an update.
	e.do("DELETE", widgetsPath+"/w", "", "")
	e.do("POST", widgetsPath+"?fieldManager=maker", "application/json", widget("w", ""))
	e.do("PATCH", widgetsPath+"/w/status?fieldManager=ctrl", "application/merge-patch+json", `{"status":{"size":1}}`)
	e.do("PATCH", widgetsPath+"/w/scale?fieldManager=hpa", "application/merge-patch+json", `{"spec":{"replicas":2}}`)
	var mf []map[string]any
	b, _ := json.Marshal(e.stored("w")["metadata"].(map[string]any)["managedFields"])
	_ = json.Unmarshal(b, &mf)
	got := []string{}
	for _, m := range mf {
		s, _ := m["subresource"].(string)
		f, _ := json.Marshal(m["fieldsV1"])
		got = append(got, m["manager"].(string)+"/"+m["operation"].(string)+"/"+s+"="+string(f))
	}
	sort.Strings(got)
	// The scale's writer takes spec.size from the object's creator.
	want := []string{
		`ctrl/Update/status={"f:status":{".":{},"f:size":{}}}`,
		`hpa/Update/scale={"f:spec":{"f:size":{}}}`,
		`maker/Update/={"f:spec":{}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("managedFields:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
