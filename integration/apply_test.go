package integration

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

func TestServerSideApply(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	cts := e.dyn.Resource(crontabs).Namespace("default")
	applyBody := func(image string, replicas int) []byte {
		return []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ssa"},"spec":{"image":"` + image + `","replicas":` + string(rune('0'+replicas)) + `}}`)
	}
	// Apply creates.
	r := e.do("PATCH", ctPath+"/ssa?fieldManager=alice", string(applyBody("a", 1)), "Content-Type", "application/apply-patch+yaml")
	if r.code != http.StatusCreated {
		t.Fatalf("apply create: %d %s", r.code, r.body)
	}
	got, _ := cts.Get(e.ctx, "ssa", metav1.GetOptions{})
	mf := got.GetManagedFields()
	if len(mf) != 1 || mf[0].Manager != "alice" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managedFields %+v", mf)
	}
	// Another manager changing alice's field conflicts.
	_, err := cts.Patch(e.ctx, "ssa", types.ApplyPatchType, applyBody("b", 1), metav1.PatchOptions{FieldManager: "bob"})
	st, ok := err.(interface{ Status() metav1.Status })
	if err == nil || !ok || st.Status().Code != http.StatusConflict || !strings.Contains(err.Error(), `conflict with "alice"`) ||
		len(st.Status().Details.Causes) == 0 || st.Status().Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Fatalf("conflict: %v", err)
	}
	// Force takes it over.
	forced, err := cts.Patch(e.ctx, "ssa", types.ApplyPatchType, []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ssa"},"spec":{"image":"b"}}`), metav1.PatchOptions{FieldManager: "bob", Force: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	if img, _, _ := unstructured.NestedString(forced.Object, "spec", "image"); img != "b" {
		t.Fatalf("forced apply: %v", forced.Object)
	}
	// alice drops replicas from her configuration: the field goes, as no
	// one else owns it.
	if _, err := cts.Patch(e.ctx, "ssa", types.ApplyPatchType, []byte(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ssa"},"spec":{}}`), metav1.PatchOptions{FieldManager: "alice"}); err != nil {
		t.Fatal(err)
	}
	got, _ = cts.Get(e.ctx, "ssa", metav1.GetOptions{})
	if _, found, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); found {
		t.Fatalf("unowned field kept: %v", got.Object)
	}
	// Updates are tracked too.
	got.SetLabels(map[string]string{"x": "y"})
	upd, err := e.dyn.Resource(crontabs).Namespace("default").Update(e.ctx, got, metav1.UpdateOptions{FieldManager: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range upd.GetManagedFields() {
		found = found || (m.Manager == "carol" && m.Operation == metav1.ManagedFieldsOperationUpdate)
	}
	if !found {
		t.Fatalf("update not tracked: %+v", upd.GetManagedFields())
	}
	// Errors.
	expectStatus(t, e.do("PATCH", ctPath+"/ssa", string(applyBody("a", 1)), "Content-Type", "application/apply-patch+yaml"),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "fieldManager: Required value: is required for apply patch")
	expectStatus(t, e.do("PATCH", ctPath+"/ssa?force=true", `{}`, "Content-Type", "application/merge-patch+json"),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "force: Forbidden: may not be specified for non-apply patch")
	expectStatus(t, e.do("PATCH", ctPath+"/ssa?fieldManager=alice", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ssa","managedFields":[{"manager":"x"}]}}`, "Content-Type", "application/apply-patch+yaml"),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, "metadata.managedFields must be nil")
	expectStatus(t, e.do("PATCH", ctPath+"/ssa?fieldManager=alice", `{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ssa"},"spec":{"nope":1}}`, "Content-Type", "application/apply-patch+yaml"),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, ".spec.nope: field not declared in schema")
	expectStatus(t, e.do("PATCH", ctPath+"/other?fieldManager=alice", string(applyBody("a", 1)), "Content-Type", "application/apply-patch+yaml"),
		http.StatusBadRequest, metav1.StatusReasonBadRequest, "does not match the name on the URL")
}
