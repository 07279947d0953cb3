package resource

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// coercingWidgets have a schema: spec holds size only; anything else in
// spec is an unknown field, dropped (and reported when tracked), as a
// CRD's structural schema prunes.
type coercingWidgets struct{ widgetStrategy }

func (coercingWidgets) Coerce(content map[string]any, track bool) ([]string, error) {
	spec, _ := content["spec"].(map[string]any)
	var unknown []string
	for k := range spec {
		if k != "size" {
			delete(spec, k)
			if track {
				unknown = append(unknown, "spec."+k)
			}
		}
	}
	return unknown, nil
}

func schemaEngine(t *testing.T) *engine {
	e := newEngine(t)
	e.res.Strategy = coercingWidgets{}
	return e
}

const colored = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"red"}}`

func TestFieldValidationOnCreate(t *testing.T) {
	t.Run("Strict", func(t *testing.T) {
		e := schemaEngine(t)
		e.do("POST", widgetsPath+"?fieldValidation=Strict", "application/json", colored).
			status(t, 400, metav1.StatusReasonBadRequest, `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.color"`)
		if e.store.puts != 0 {
			t.Fatal("a strict create stored an object with an unknown field")
		}
		// Duplicate fields too.
		dup := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"size":2}}`
		e.do("POST", widgetsPath+"?fieldValidation=Strict", "application/json", dup).
			status(t, 400, metav1.StatusReasonBadRequest, `Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.size"`)
	})
	for _, c := range []struct{ query, warning string }{
		{"", `299 - "unknown field \"spec.color\""`},
		{"?fieldValidation=Warn", `299 - "unknown field \"spec.color\""`},
		{"?fieldValidation=Ignore", ""},
	} {
		t.Run("directive"+c.query, func(t *testing.T) {
			e := schemaEngine(t)
			a := e.do("POST", widgetsPath+c.query, "application/json", colored)
			if a.code != http.StatusCreated {
				t.Fatalf("%d %s", a.code, a.raw)
			}
			if got := strings.Join(a.header.Values("Warning"), "|"); got != c.warning {
				t.Fatalf("Warning: %q, want %q", got, c.warning)
			}
			// The unknown field is dropped, from the answer and the store.
			if strings.Contains(a.raw, "color") || e.stored("w")["spec"].(map[string]any)["color"] != nil {
				t.Fatalf("unknown field kept: %s", a.raw)
			}
		})
	}
	e := schemaEngine(t)
	e.do("POST", widgetsPath+"?fieldValidation=Loose", "application/json", colored).
		status(t, 422, metav1.StatusReasonInvalid, `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": supported values: "", "Ignore", "Strict", "Warn"`)
	if e.store.puts != 0 {
		t.Fatal("stored")
	}
}

func TestFieldValidationOnUpdate(t *testing.T) {
	e := schemaEngine(t)
	e.create(widget("w", ""))
	body := strings.Replace(colored, `"name":"w"`, `"name":"w","resourceVersion":"2"`, 1)
	puts := e.store.puts
	e.do("PUT", widgetsPath+"/w?fieldValidation=Strict", "application/json", body).
		status(t, 400, metav1.StatusReasonBadRequest, `Widget in version "v1" cannot be handled as a Widget: strict decoding error: unknown field "spec.color"`)
	e.do("PUT", widgetsPath+"/w?fieldValidation=Loose", "application/json", body).
		status(t, 422, metav1.StatusReasonInvalid, `UpdateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose"`)
	if e.store.puts != puts {
		t.Fatal("a refused update stored")
	}
	// Warn: the update goes through, with a warning; it changes nothing
	// once the field is dropped, so nothing is written.
	a := e.do("PUT", widgetsPath+"/w", "application/json", body)
	if a.code != 200 || a.header.Get("Warning") != `299 - "unknown field \"spec.color\""` || e.store.puts != puts {
		t.Fatalf("%d %s %v", a.code, a.raw, a.header)
	}
}

func TestFieldValidationOnPatch(t *testing.T) {
	e := schemaEngine(t)
	e.create(widget("w", ""))
	path := widgetsPath + "/w"
	puts := e.store.puts
	for _, c := range []struct{ name, ct, body string }{
		{"merge", "application/merge-patch+json", `{"spec":{"color":"red"}}`},
		{"json", "application/json-patch+json", `[{"op":"add","path":"/spec/color","value":"red"}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Strict: the patched object is invalid, on the field "patch".
			a := e.do("PATCH", path+"?fieldValidation=Strict", c.ct, c.body)
			a.status(t, 422, metav1.StatusReasonInvalid, `strict decoding error: unknown field "spec.color"`)
			causes := a.body["details"].(map[string]any)["causes"].([]any)
			if len(causes) != 1 || causes[0].(map[string]any)["field"] != "patch" || !strings.HasPrefix(a.body["message"].(string), ` "" is invalid: patch: Invalid value: "{`) {
				t.Fatalf("causes: %s", a.raw)
			}
			// Warn: a warning, and nothing to write.
			a = e.do("PATCH", path, c.ct, c.body)
			if a.code != 200 || a.header.Get("Warning") != `299 - "unknown field \"spec.color\""` {
				t.Fatalf("Warn: %d %s %v", a.code, a.raw, a.header)
			}
			// Ignore: no warning.
			if a = e.do("PATCH", path+"?fieldValidation=Ignore", c.ct, c.body); a.code != 200 || a.header.Get("Warning") != "" {
				t.Fatalf("Ignore: %d %s %v", a.code, a.raw, a.header)
			}
		})
	}
	// A duplicate field in a merge patch counts as well.
	e.do("PATCH", path+"?fieldValidation=Strict", "application/merge-patch+json", `{"spec":{"size":2,"size":3}}`).
		status(t, 422, metav1.StatusReasonInvalid, `strict decoding error: duplicate field "spec.size"`)
	e.do("PATCH", path+"?fieldValidation=Loose", "application/merge-patch+json", `{}`).
		status(t, 422, metav1.StatusReasonInvalid, `PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose"`)
	if e.store.puts != puts {
		t.Fatal("a patch that changed nothing but unknown fields wrote")
	}
}
