package resource

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A deletion answers a success Status naming the object, and the object
// is gone from the store.
func TestDeleteAnswersAStatus(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	uid := e.stored("w")["metadata"].(map[string]any)["uid"]
	a := e.do("DELETE", widgetsPath+"/w", "", "")
	if a.code != http.StatusOK || a.body["kind"] != "Status" || a.body["apiVersion"] != "v1" || a.body["status"] != "Success" {
		t.Fatalf("delete: %d %s", a.code, a.raw)
	}
	d := a.body["details"].(map[string]any)
	if d["name"] != "w" || d["group"] != "example.com" || d["kind"] != "widgets" || d["uid"] != uid {
		t.Fatalf("details: %v", d)
	}
	if e.stored("w") != nil {
		t.Fatal("the object is still stored")
	}
	e.do("DELETE", widgetsPath+"/w", "", "").status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "w" not found`)
}

func TestDeletePreconditions(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	m := e.stored("w")["metadata"].(map[string]any)
	uid := m["uid"].(string)
	path := widgetsPath + "/w"
	puts := e.store.puts
	byRV := e.do("DELETE", path, "application/json", `{"preconditions":{"resourceVersion":"1"}}`)
	byRV.status(t, 409, metav1.StatusReasonConflict, "")
	byUID := e.do("DELETE", path, "application/json", `{"preconditions":{"uid":"0000"}}`)
	byUID.status(t, 409, metav1.StatusReasonConflict, "")
	if e.stored("w") == nil || e.store.puts != puts {
		t.Fatal("a failed precondition deleted or wrote the object")
	}
	// Both hold: it goes.
	a := e.do("DELETE", path, "application/json", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"`+uid+`","resourceVersion":"2"}}`)
	if a.code != 200 || e.stored("w") != nil {
		t.Fatalf("delete with preconditions that hold: %d %s", a.code, a.raw)
	}

	// Kubernetes checks the preconditions on the object it has just read,
	// in rest.BeforeDelete, with its own wording (the storage layer's
	// "Precondition failed: ..." is only for an object that changed
	// in between).
	for _, c := range []struct {
		a    answer
		want string
	}{
		{byRV, `Operation cannot be fulfilled on Widget.example.com "w": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (2). The object might have been modified`},
		{byUID, `Operation cannot be fulfilled on Widget.example.com "w": the UID in the precondition (0000) does not match the UID in record (` + uid + `). The object might have been deleted and then recreated`},
	} {
		if c.a.body["message"] != c.want {
			t.Fatalf("a failed delete precondition is worded %q, kube-apiserver's %q", c.a.body["message"], c.want)
		}
	}
}

func TestDeleteOptionsRefused(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"
	e.do("DELETE", path, "application/json", `{"propagationPolicy":"Sometimes"}`).
		status(t, 422, metav1.StatusReasonInvalid, `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil"`)
	e.do("DELETE", path, "application/json", `[]`).status(t, 400, metav1.StatusReasonBadRequest, "")
	e.do("DELETE", path+"?gracePeriodSeconds=x", "", "").status(t, 400, metav1.StatusReasonBadRequest, "")
	if e.stored("w") == nil {
		t.Fatal("a refused delete deleted the object")
	}
}

// Kubernetes names propagationPolicy when both it and orphanDependents
// are set (k8s.io/apimachinery/pkg/apis/meta/v1/validation.ValidateDeleteOptions).
func TestDeleteOrphanDependentsWithPropagationPolicy(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	a := e.do("DELETE", widgetsPath+"/w", "application/json", `{"propagationPolicy":"Background","orphanDependents":true}`)
	a.status(t, 422, metav1.StatusReasonInvalid, "orphanDependents and deletionPropagation cannot be both set")
	if e.stored("w") == nil {
		t.Fatal("a refused delete deleted the object")
	}
	causes := a.body["details"].(map[string]any)["causes"].([]any)
	if f := causes[0].(map[string]any)["field"]; f != "propagationPolicy" {
		t.Fatalf("the cause is on %q, kube-apiserver's on propagationPolicy", f)
	}
}

// A negative grace period is taken as 1s on Kubernetes' delete path
// (k8s.io/apiserver/pkg/registry/rest.BeforeDelete), not refused: an
// object without graceful deletion goes at once.
func TestDeleteNegativeGracePeriod(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	a := e.do("DELETE", widgetsPath+"/w?gracePeriodSeconds=-1", "", "")
	if a.code != http.StatusOK {
		t.Fatalf("gracePeriodSeconds=-1 is answered %d %s; kube-apiserver deletes the object", a.code, a.raw)
	}
	if e.stored("w") != nil {
		t.Fatal("the object is still stored")
	}
}

func TestDeleteWithFinalizers(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", `,"finalizers":["example.com/keep"]`))
	path := widgetsPath + "/w"

	// A dry run answers the object as it would be marked, and stores
	// nothing.
	puts := e.store.puts
	a := e.do("DELETE", path+"?dryRun=All", "", "")
	if a.code != 200 || meta(a)["deletionTimestamp"] != "2026-11-24T12:00:00Z" || e.store.puts != puts {
		t.Fatalf("dry run: %d %s (%d writes)", a.code, a.raw, e.store.puts-puts)
	}
	if e.stored("w")["metadata"].(map[string]any)["deletionTimestamp"] != nil {
		t.Fatal("a dry run marked the stored object")
	}

	// Foreground propagation adds its finalizer to those that keep it.
	a = e.do("DELETE", path, "application/json", `{"propagationPolicy":"Foreground"}`)
	m := meta(a)
	if a.code != 200 || m["deletionTimestamp"] != "2026-11-24T12:00:00Z" || m["deletionGracePeriodSeconds"] != 0.0 || m["generation"] != 2.0 {
		t.Fatalf("marked deleted: %d %s", a.code, a.raw)
	}
	if f := m["finalizers"].([]any); len(f) != 2 || f[0] != "example.com/keep" || f[1] != "foregroundDeletion" {
		t.Fatalf("finalizers: %v", f)
	}
	stored := e.stored("w")["metadata"].(map[string]any)
	if stored["deletionTimestamp"] != "2026-11-24T12:00:00Z" || m["resourceVersion"] != "3" {
		t.Fatalf("stored: %v, answered %v", stored, m)
	}

	// Deleting it again changes nothing: no write, the same generation.
	puts = e.store.puts
	e.h.Now = func() time.Time { return time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC) }
	a = e.do("DELETE", path, "", "")
	if a.code != 200 || meta(a)["deletionTimestamp"] != "2026-11-24T12:00:00Z" || meta(a)["generation"] != 2.0 || meta(a)["resourceVersion"] != "3" || e.store.puts != puts {
		t.Fatalf("deleted again: %d %s (%d writes)", a.code, a.raw, e.store.puts-puts)
	}

	// An object being deleted takes no new finalizers.
	e.do("PATCH", path, "application/json-patch+json", `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/more"}]`).
		status(t, 422, metav1.StatusReasonInvalid, "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted")
}

func TestDeleteCollection(t *testing.T) {
	e := fiveWidgets(t)
	e.create(widget("kept", `,"labels":{"tier":"db"},"finalizers":["example.com/keep"]`))
	e.cache()

	// A dry run deletes nothing but answers what it would.
	a := e.do("DELETE", widgetsPath+"?labelSelector=tier%3Ddb&dryRun=All", "", "")
	names, _ := listed(t, a)
	if strings.Join(names, ",") != "b,d,kept" || e.stored("b") == nil || e.stored("d") == nil {
		t.Fatalf("dry run: %v", names)
	}

	a = e.do("DELETE", widgetsPath+"?labelSelector=tier%3Ddb", "", "")
	names, md := listed(t, a)
	if strings.Join(names, ",") != "b,d,kept" || a.body["kind"] != "WidgetList" || md["resourceVersion"] != "7" {
		t.Fatalf("deleted: %v %v", names, md)
	}
	if e.stored("b") != nil || e.stored("d") != nil || e.stored("a") == nil || e.stored("c") == nil {
		t.Fatal("deleted the wrong objects")
	}
	// The one a finalizer keeps is marked, and answered so.
	if e.stored("kept")["metadata"].(map[string]any)["deletionTimestamp"] == nil {
		t.Fatal("the kept object is not marked deleted")
	}
	if it := a.body["items"].([]any)[2].(map[string]any)["metadata"].(map[string]any); it["deletionTimestamp"] == nil {
		t.Fatalf("the kept object as answered: %v", it)
	}
	// The other namespace is untouched.
	if e.store.kvs[e.res.Key("other", "x")] == nil {
		t.Fatal("deleted across namespaces")
	}
	e.do("DELETE", widgetsPath+"?fieldSelector=spec.size%3D1", "", "").status(t, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.size")
}
