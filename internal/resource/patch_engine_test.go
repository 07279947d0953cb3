package resource

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPatchAnswers(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"

	// A patch that changes only metadata keeps the generation and gets a
	// new resourceVersion.
	a := e.do("PATCH", path, "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`)
	if a.code != 200 || meta(a)["generation"] != 1.0 || meta(a)["resourceVersion"] != "3" || meta(a)["labels"].(map[string]any)["a"] != "b" {
		t.Fatalf("label patch: %d %s", a.code, a.raw)
	}
	// null removes with a merge patch.
	if a = e.do("PATCH", path, "application/merge-patch+json", `{"metadata":{"labels":null}}`); a.code != 200 || meta(a)["labels"] != nil {
		t.Fatalf("label removal: %d %s", a.code, a.raw)
	}
	// What the server owns cannot be patched away: creationTimestamp and
	// generation keep their values, and nothing is written.
	puts := e.store.puts
	a = e.do("PATCH", path, "application/merge-patch+json", `{"metadata":{"creationTimestamp":"2020-01-01T00:00:00Z","generation":7}}`)
	if a.code != 200 || meta(a)["creationTimestamp"] != "2026-11-24T12:00:00Z" || meta(a)["generation"] != 1.0 || e.store.puts != puts {
		t.Fatalf("server-owned metadata: %d %s (%d writes)", a.code, a.raw, e.store.puts-puts)
	}
	// A patch that names the current resourceVersion is a precondition
	// that holds.
	if a = e.do("PATCH", path, "application/json-patch+json", `[{"op":"add","path":"/metadata/resourceVersion","value":"4"},{"op":"replace","path":"/spec/size","value":2}]`); a.code != 200 || meta(a)["generation"] != 2.0 {
		t.Fatalf("patch with a resourceVersion: %d %s", a.code, a.raw)
	}
}

func TestPatchRefused(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"
	uid := e.stored("w")["metadata"].(map[string]any)["uid"].(string)
	manyOps := "[" + strings.Repeat(`{"op":"test","path":"/spec/size","value":1},`, 10000) + `{"op":"test","path":"/spec/size","value":1}]`
	for _, c := range []struct {
		name, path, ct, body string
		code                 int
		reason               metav1.StatusReason
		msg                  string
	}{
		{"JSON patch not JSON", path, "application/json-patch+json", `{`, 400, metav1.StatusReasonBadRequest, ""},
		{"JSON patch on a missing path", path, "application/json-patch+json", `[{"op":"remove","path":"/spec/nope"}]`, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"},
		{"too many operations", path, "application/json-patch+json", manyOps, 413, metav1.StatusReasonRequestEntityTooLarge, "The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{"merge patch not an object", path, "application/merge-patch+json", `[]`, 400, metav1.StatusReasonBadRequest, ""},
		{"stale resourceVersion", path, "application/merge-patch+json", `{"metadata":{"resourceVersion":"1"}}`, 409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on widgets.example.com "w": the object has been modified; please apply your changes to the latest version and try again`},
		{"uid", path, "application/merge-patch+json", `{"metadata":{"uid":"x"}}`, 422, metav1.StatusReasonInvalid, `Widget.example.com "w" is invalid: metadata.uid: Invalid value: "x": field is immutable`},
		{"name", path, "application/merge-patch+json", `{"metadata":{"name":"x"}}`, 422, metav1.StatusReasonInvalid, `metadata.name: Invalid value: "x": field is immutable`},
		{"namespace", path, "application/merge-patch+json", `{"metadata":{"namespace":"other"}}`, 400, metav1.StatusReasonBadRequest, "the namespace of the provided object does not match the namespace sent on the request"},
		{"kind", path, "application/merge-patch+json", `{"kind":"Gadget"}`, 422, metav1.StatusReasonInvalid, `kind: Invalid value: "Gadget"`},
		{"missing object", widgetsPath + "/nope", "application/merge-patch+json", `{}`, 404, metav1.StatusReasonNotFound, `widgets.example.com "nope" not found`},
		{"a collection", widgetsPath, "application/merge-patch+json", `{}`, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"no patch type", path, "application/json", `{}`, 415, metav1.StatusReasonUnsupportedMediaType, "application/json-patch+json, application/merge-patch+json"},
		{"invalid field manager", path + "?fieldManager=a%01b", "application/merge-patch+json", `{}`, 422, metav1.StatusReasonInvalid, "fieldManager: Invalid value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			puts := e.store.puts
			e.do("PATCH", c.path, c.ct, c.body).status(t, c.code, c.reason, c.msg)
			if e.store.puts != puts {
				t.Fatal("a refused patch stored")
			}
		})
	}
	if got := e.stored("w")["metadata"].(map[string]any)["uid"]; got != uid {
		t.Fatalf("uid changed to %v", got)
	}
}

// A PUT with the object's uid is a precondition: another uid is a
// conflict, the object's own one goes through.
func TestUpdateUIDPrecondition(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	uid := e.stored("w")["metadata"].(map[string]any)["uid"].(string)
	path := widgetsPath + "/w"
	e.do("PUT", path, "application/json", widget("w", `,"resourceVersion":"2","uid":"other"`)).
		status(t, 409, metav1.StatusReasonConflict, "Precondition failed: UID in precondition: other, UID in object meta: "+uid)
	if a := e.do("PUT", path, "application/json", strings.Replace(widget("w", `,"resourceVersion":"2","uid":"`+uid+`"`), `"size":1`, `"size":2`, 1)); a.code != http.StatusOK || meta(a)["generation"] != 2.0 {
		t.Fatalf("update with its uid: %d %s", a.code, a.raw)
	}
	// Namespaces may be updated without a resourceVersion.
	e.res.AllowUnconditionalUpdate = true
	if a := e.do("PUT", path, "application/json", strings.Replace(widget("w", ""), `"size":1`, `"size":3`, 1)); a.code != http.StatusOK || meta(a)["resourceVersion"] != "4" {
		t.Fatalf("unconditional update: %d %s", a.code, a.raw)
	}
	// Leases may be created by a PUT; with a resourceVersion, that is a
	// 404.
	e.res.AllowCreateOnUpdate = true
	if a := e.do("PUT", widgetsPath+"/new", "application/json", widget("new", "")); a.code != http.StatusCreated || e.stored("new") == nil {
		t.Fatalf("create on update: %d %s", a.code, a.raw)
	}
	e.do("PUT", widgetsPath+"/newer", "application/json", widget("newer", `,"resourceVersion":"3"`)).status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "newer" not found`)
}
