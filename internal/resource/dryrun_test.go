package resource

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A dry run goes through every step of the write (defaults, validation,
// conflicts) and answers as the write would, but stores nothing.
func TestDryRunStoresNothing(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"
	before := string(e.store.kvs[e.res.Key("default", "w")].Value)
	rev := e.store.rev
	unchanged := func(t *testing.T) {
		t.Helper()
		if e.store.rev != rev || string(e.store.kvs[e.res.Key("default", "w")].Value) != before || len(e.store.kvs) != 1 {
			t.Fatal("a dry run changed the store")
		}
	}

	t.Run("create", func(t *testing.T) {
		a := e.do("POST", widgetsPath+"?dryRun=All", "application/json", widget("new", ""))
		m := meta(a)
		if a.code != http.StatusCreated || m["uid"] == nil || m["generation"] != 1.0 || m["creationTimestamp"] != "2026-11-24T12:00:00Z" {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		unchanged(t)
		e.do("GET", widgetsPath+"/new", "", "").status(t, 404, metav1.StatusReasonNotFound, "")
		// The name is taken, and what is invalid is refused, as without
		// dry run.
		e.do("POST", widgetsPath+"?dryRun=All", "application/json", widget("w", "")).status(t, 409, metav1.StatusReasonAlreadyExists, "")
		e.do("POST", widgetsPath+"?dryRun=All", "application/json", strings.Replace(widget("bad", ""), `"size":1`, `"size":-1`, 1)).
			status(t, 422, metav1.StatusReasonInvalid, "spec.size: Invalid value: -1: must be at least 0")
		unchanged(t)
	})
	t.Run("update", func(t *testing.T) {
		a := e.do("PUT", path+"?dryRun=All", "application/json", strings.Replace(widget("w", `,"resourceVersion":"2"`), `"size":1`, `"size":7`, 1))
		if a.code != 200 || a.body["spec"].(map[string]any)["size"] != 7.0 || meta(a)["generation"] != 2.0 || meta(a)["resourceVersion"] != "2" {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		unchanged(t)
		e.do("PUT", path+"?dryRun=All", "application/json", widget("w", `,"resourceVersion":"1"`)).status(t, 409, metav1.StatusReasonConflict, "the object has been modified")
	})
	t.Run("patch", func(t *testing.T) {
		a := e.do("PATCH", path+"?dryRun=All", "application/merge-patch+json", `{"metadata":{"labels":{"l":"v"}}}`)
		if a.code != 200 || meta(a)["labels"].(map[string]any)["l"] != "v" || meta(a)["generation"] != 1.0 {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		unchanged(t)
		e.do("PATCH", widgetsPath+"/missing?dryRun=All", "application/merge-patch+json", `{}`).status(t, 404, metav1.StatusReasonNotFound, `widgets.example.com "missing" not found`)
	})
	t.Run("delete", func(t *testing.T) {
		a := e.do("DELETE", path+"?dryRun=All", "", "")
		if a.code != 200 || a.body["status"] != "Success" {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		// DeleteOptions in the body may ask for it too.
		if a = e.do("DELETE", path, "application/json", `{"dryRun":["All"]}`); a.code != 200 {
			t.Fatalf("%d %s", a.code, a.raw)
		}
		unchanged(t)
	})
}

// A dryRun other than All is refused before anything is read or written,
// as invalid options of the verb (CreateOptions, UpdateOptions,
// PatchOptions, DeleteOptions: k8s.io/apiserver/pkg/endpoints/handlers).
func TestDryRunValues(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"
	puts := e.store.puts
	for _, c := range []struct {
		method, path, ct, body, kind string
	}{
		{"POST", widgetsPath, "application/json", widget("x", ""), "CreateOptions"},
		{"PUT", path, "application/json", widget("w", `,"resourceVersion":"2"`), "UpdateOptions"},
		{"PATCH", path, "application/merge-patch+json", `{}`, "PatchOptions"},
		{"DELETE", path, "", "", "DeleteOptions"},
	} {
		t.Run(c.method, func(t *testing.T) {
			a := e.do(c.method, c.path+"?dryRun=Some", c.ct, c.body)
			a.status(t, 422, metav1.StatusReasonInvalid, `dryRun: Unsupported value: ["Some"]: supported values: "All"`)
			if e.store.puts != puts || e.stored("w") == nil {
				t.Fatal("a refused dry run wrote")
			}
			if want := c.kind + `.meta.k8s.io "" is invalid`; !strings.HasPrefix(a.body["message"].(string), want) {
				t.Fatalf("%s with dryRun=Some is %q, kube-apiserver names %s", c.method, a.body["message"], c.kind)
			}
		})
	}
	// In the body of a DELETE, it is a DeleteOptions that is invalid too.
	a := e.do("DELETE", path, "application/json", `{"dryRun":["Some"]}`)
	if e.stored("w") == nil {
		t.Fatal("a refused dry run deleted")
	}
	if a.code != 422 || !strings.HasPrefix(a.body["message"].(string), `DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]`) {
		t.Fatalf("dryRun Some in DeleteOptions is answered %d %s; kube-apiserver 422 DeleteOptions invalid", a.code, a.raw)
	}
}
