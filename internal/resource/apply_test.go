package resource

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/conversion"
)

// applyEngine: widgets with field managers (the deduced schema, whose
// field sets name maps themselves, "."), so that writes are tracked in
// managedFields and server-side apply is served.
func applyEngine(t *testing.T) *engine {
	e := newEngine(t)
	e.res.FieldManagers = &FieldManagers{Group: "example.com", Kind: "Widget", Converter: conversion.None{}}
	return e
}

const applyPatch = "application/apply-patch+yaml"

func applied(size int, labels string) string {
	return "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n" + labels + "spec:\n  size: " + itoa(int64(size)) + "\n"
}

// managers returns manager/operation of each managedFields entry (sorted),
// and the
// fields each owns. (Entries are timed by Kubernetes' field manager with
// its own clock: not checked.)
func managers(t *testing.T, md map[string]any) ([]string, map[string]string) {
	t.Helper()
	var out []string
	fields := map[string]string{}
	mf, _ := md["managedFields"].([]any)
	for _, m := range mf {
		e := m.(map[string]any)
		if e["apiVersion"] != "example.com/v1" || e["fieldsType"] != "FieldsV1" {
			t.Fatalf("managedFields entry: %v", e)
		}
		name := e["manager"].(string) + "/" + e["operation"].(string)
		out = append(out, name)
		f, _ := json.Marshal(e["fieldsV1"])
		fields[name] = string(f)
	}
	sort.Strings(out)
	return out, fields
}

func TestApplyCreatesAndTracks(t *testing.T) {
	e := applyEngine(t)
	path := widgetsPath + "/w"
	a := e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(1, ""))
	if a.code != http.StatusCreated || meta(a)["resourceVersion"] != "2" || meta(a)["generation"] != 1.0 || meta(a)["uid"] == nil {
		t.Fatalf("apply of a new object: %d %s", a.code, a.raw)
	}
	names, fields := managers(t, meta(a))
	if strings.Join(names, ",") != "alice/Apply" || fields["alice/Apply"] != `{"f:spec":{".":{},"f:size":{}}}` {
		t.Fatalf("managedFields: %v %v", names, fields)
	}
	if _, stored := managers(t, e.stored("w")["metadata"].(map[string]any)); stored["alice/Apply"] == "" {
		t.Fatal("managedFields not stored")
	}

	// The same configuration again changes nothing.
	puts := e.store.puts
	if a = e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(1, "")); a.code != 200 || e.store.puts != puts || meta(a)["resourceVersion"] != "2" {
		t.Fatalf("a no-op apply: %d %s (%d writes)", a.code, a.raw, e.store.puts-puts)
	}

	// An update is tracked under its fieldManager, as an Update.
	a = e.do("PUT", path+"?fieldManager=carol", "application/json", widget("w", `,"labels":{"by":"carol"},"resourceVersion":"2"`))
	names, fields = managers(t, meta(a))
	if a.code != 200 || strings.Join(names, ",") != "alice/Apply,carol/Update" || fields["carol/Update"] != `{"f:metadata":{"f:labels":{".":{},"f:by":{}}}}` {
		t.Fatalf("update: %d %v %v", a.code, names, fields)
	}
	// Without fieldManager, the manager is the User-Agent up to its "/".
	a = e.send("PATCH", path, map[string]string{"Content-Type": "application/merge-patch+json", "User-Agent": "kubectl/v1.37.2 (linux/amd64)"}, `{"metadata":{"annotations":{"a":"b"}}}`)
	if names, _ = managers(t, meta(a)); a.code != 200 || strings.Join(names, ",") != "alice/Apply,carol/Update,kubectl/Update" {
		t.Fatalf("patch by User-Agent: %d %v", a.code, names)
	}
}

func TestApplyConflicts(t *testing.T) {
	e := applyEngine(t)
	path := widgetsPath + "/w"
	if a := e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(1, "")); a.code != 201 {
		t.Fatalf("%d %s", a.code, a.raw)
	}
	puts := e.store.puts
	a := e.do("PATCH", path+"?fieldManager=bob", applyPatch, applied(2, ""))
	a.status(t, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "alice": .spec.size`)
	causes := a.body["details"].(map[string]any)["causes"].([]any)
	if len(causes) != 1 {
		t.Fatalf("causes: %s", a.raw)
	}
	if c := causes[0].(map[string]any); c["reason"] != string(metav1.CauseTypeFieldManagerConflict) || c["message"] != `conflict with "alice"` || c["field"] != ".spec.size" {
		t.Fatalf("cause: %v", c)
	}
	if e.store.puts != puts {
		t.Fatal("a conflicting apply wrote")
	}
	// Applying the value alice has is no conflict: both own it.
	a = e.do("PATCH", path+"?fieldManager=bob", applyPatch, applied(1, ""))
	if names, _ := managers(t, meta(a)); a.code != 200 || strings.Join(names, ",") != "alice/Apply,bob/Apply" {
		t.Fatalf("shared ownership: %d %v", a.code, names)
	}
	// force takes the field: alice owns it no more.
	a = e.do("PATCH", path+"?fieldManager=bob&force=true", applyPatch, applied(3, ""))
	_, fields := managers(t, meta(a))
	if a.code != 200 || a.body["spec"].(map[string]any)["size"] != 3.0 || strings.Contains(fields["alice/Apply"], "f:size") || !strings.Contains(fields["bob/Apply"], "f:size") || meta(a)["generation"] != 2.0 {
		t.Fatalf("forced apply: %d %v %s", a.code, fields, a.raw)
	}
	// An update does not conflict; it takes the fields it changes.
	a = e.do("PATCH", path+"?fieldManager=carol", "application/merge-patch+json", `{"spec":{"size":4}}`)
	if _, fields = managers(t, meta(a)); a.code != 200 || fields["carol/Update"] != `{"f:spec":{"f:size":{}}}` || strings.Contains(fields["bob/Apply"], "f:size") {
		t.Fatalf("update after apply: %d %v", a.code, fields)
	}
}

func TestApplyRefused(t *testing.T) {
	e := applyEngine(t)
	e.res.Versions[0].Status = true
	path := widgetsPath + "/w"
	for _, c := range []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		msg              string
	}{
		{"no field manager", path, applied(1, ""), 422, metav1.StatusReasonInvalid, `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"force not a boolean", path + "?fieldManager=a&force=maybe", applied(1, ""), 400, metav1.StatusReasonBadRequest, ""},
		{"another name", path + "?fieldManager=a", strings.Replace(applied(1, ""), "name: w", "name: v", 1), 400, metav1.StatusReasonBadRequest, "the name of the object (v) does not match the name on the URL (w)"},
		{"field manager too long", path + "?fieldManager=" + strings.Repeat("m", 129), applied(1, ""), 422, metav1.StatusReasonInvalid, "fieldManager: Too long: may not be more than 128 bytes"},
		{"not YAML", path + "?fieldManager=a", "{", 400, metav1.StatusReasonBadRequest, ""},
		{"invalid object", path + "?fieldManager=a", applied(-1, ""), 422, metav1.StatusReasonInvalid, "spec.size: Invalid value: -1: must be at least 0"},
		{"status of a missing object", path + "/status?fieldManager=a", applied(1, ""), 404, metav1.StatusReasonNotFound, `widgets.example.com "w" not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("PATCH", c.path, applyPatch, c.body).status(t, c.code, c.reason, c.msg)
			if e.store.puts != 0 {
				t.Fatal("a refused apply stored")
			}
		})
	}
	// A dry run answers the object it would create.
	if a := e.do("PATCH", path+"?fieldManager=a&dryRun=All", applyPatch, applied(1, "")); a.code != 201 || e.store.puts != 0 {
		t.Fatalf("dry-run apply: %d %s", a.code, a.raw)
	}
	// Without field managers there is no apply.
	e.res.FieldManagers = nil
	e.do("PATCH", path+"?fieldManager=a", applyPatch, applied(1, "")).status(t, 415, metav1.StatusReasonUnsupportedMediaType, "")
}

// An object that goes or comes between apply's read and its write is
// applied again: created if gone, updated if there, never 404 or 409
// AlreadyExists (the robustness suite saw a 404 when a delete came
// between them).
func TestApplyRacesDeleteAndCreate(t *testing.T) {
	e := applyEngine(t)
	path := widgetsPath + "/w"
	if a := e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(1, "")); a.code != http.StatusCreated {
		t.Fatalf("apply: %d %s", a.code, a.raw)
	}
	key := e.res.Key("default", "w")
	once := func(f func()) func(string) {
		done := false
		return func(k string) {
			if k == key && !done {
				done = true
				f()
			}
		}
	}
	// Deleted right after apply read it.
	e.store.afterGet = once(func() {
		e.store.mu.Lock()
		delete(e.store.kvs, key)
		e.store.rev++
		e.store.mu.Unlock()
	})
	if a := e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(2, "")); a.code != http.StatusCreated {
		t.Fatalf("apply while the object is deleted: want 201, got %d %s", a.code, a.raw)
	}
	if got := e.stored("w"); got == nil || got["spec"].(map[string]any)["size"] != 2.0 {
		t.Fatalf("stored: %v", got)
	}
	// Deleted before apply read it, created again right after.
	e.store.mu.Lock()
	saved := *e.store.kvs[key]
	delete(e.store.kvs, key)
	e.store.mu.Unlock()
	e.store.afterGet = once(func() {
		e.store.mu.Lock()
		e.store.rev++
		saved.ModRevision = e.store.rev
		e.store.kvs[key] = &saved
		e.store.mu.Unlock()
	})
	if a := e.do("PATCH", path+"?fieldManager=alice", applyPatch, applied(3, "")); a.code != http.StatusOK {
		t.Fatalf("apply while the object is created: want 200, got %d %s", a.code, a.raw)
	}
	if got := e.stored("w"); got["spec"].(map[string]any)["size"] != 3.0 {
		t.Fatalf("stored: %v", got)
	}
}
