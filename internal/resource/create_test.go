package resource

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCreateMetadata(t *testing.T) {
	e := newEngine(t)
	// What the server owns is set by the server, whatever the client sent.
	a := e.do("POST", widgetsPath, "application/json", widget("w", `,"uid":"mine","generation":5,"creationTimestamp":"2000-01-01T00:00:00Z","deletionTimestamp":"2000-01-01T00:00:00Z","deletionGracePeriodSeconds":30`))
	m := meta(a)
	if a.code != http.StatusCreated || m["uid"] == "mine" || m["generation"] != 1.0 || m["creationTimestamp"] != "2026-11-24T12:00:00Z" || m["deletionTimestamp"] != nil || m["deletionGracePeriodSeconds"] != nil {
		t.Fatalf("server-owned metadata: %d %s", a.code, a.raw)
	}
	if a.header.Get("Content-Type") != "application/json" {
		t.Fatalf("Content-Type %q", a.header.Get("Content-Type"))
	}
	// A generated name: the prefix cut to leave room for 5 characters.
	long := strings.Repeat("g", 70)
	a = e.do("POST", widgetsPath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"generateName":"`+long+`"}}`)
	if name, _ := meta(a)["name"].(string); a.code != http.StatusCreated || len(name) != 63 || !strings.HasPrefix(name, long[:58]) || meta(a)["generateName"] != long {
		t.Fatalf("long generateName: %d %s", a.code, a.raw)
	}
	puts := e.store.puts
	for _, c := range []struct {
		name, body string
		code       int
		reason     metav1.StatusReason
		msg        string
	}{
		{"no name", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{}}`, 422, metav1.StatusReasonInvalid, "metadata.name: Required value: name or generateName is required"},
		{"no kind", `{"apiVersion":"example.com/v1","metadata":{"name":"k"}}`, 400, metav1.StatusReasonBadRequest, "Object 'Kind' is missing"},
		{"bad label", widget("l", `,"labels":{"a":"-x-"}`), 422, metav1.StatusReasonInvalid, `metadata.labels: Invalid value: "-x-"`},
		{"labels of the wrong type", widget("l", `,"labels":{"a":1}`), 400, metav1.StatusReasonBadRequest, `Widget in version "v1" cannot be handled as a Widget`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.do("POST", widgetsPath, "application/json", c.body).status(t, c.code, c.reason, c.msg)
			if e.store.puts != puts {
				t.Fatal("a refused create stored")
			}
		})
	}
}

// An object larger than etcd takes (1.5 MiB by default) is not stored.
// kube-apiserver passes etcd's error on: 500 "etcdserver: request is too
// large" (the 413 it has is for bodies over 3 MiB); crdserver answers the
// client's mistake with 413 (README, Known differences).
func TestCreateTooLarge(t *testing.T) {
	e := newEngine(t)
	a := e.do("POST", widgetsPath, "application/json", strings.Replace(widget("big", ""), `"size":1`, `"size":1,"blob":"`+strings.Repeat("x", 3*1024*1024/2)+`"`, 1))
	if a.code < 400 || e.store.puts != 0 {
		t.Fatalf("stored: %d", a.code)
	}
	a.status(t, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 1572864")
}

// A resource whose CRD is being deleted takes no new objects, as
// apiextensions-apiserver's forbidCreateAdmission answers; its objects
// may still change.
func TestCreateWhileTerminating(t *testing.T) {
	e := newEngine(t)
	e.create(widget("w", ""))
	e.res.Terminating = true
	e.do("POST", widgetsPath, "application/json", widget("n", "")).
		status(t, 403, metav1.StatusReasonForbidden, `widgets.example.com "n" is forbidden: create not allowed while custom resource definition is terminating`)
	if e.stored("n") != nil {
		t.Fatal("created")
	}
	if a := e.do("PATCH", widgetsPath+"/w", "application/merge-patch+json", `{"spec":{"size":2}}`); a.code != 200 {
		t.Fatalf("patch while terminating: %d %s", a.code, a.raw)
	}
	if a := e.do("DELETE", widgetsPath+"/w", "", ""); a.code != 200 {
		t.Fatalf("delete while terminating: %d %s", a.code, a.raw)
	}
}

// noNamespace is NamespaceLifecycle with one namespace being deleted.
type noNamespace struct{}

func (noNamespace) CheckCreate(_ context.Context, gr schema.GroupResource, name, namespace string) error {
	if namespace == "closing" {
		return apierrors.NewForbidden(gr, name, errors.New("unable to create new content in namespace closing because it is being terminated"))
	}
	return nil
}

func TestCreateInANamespaceBeingDeleted(t *testing.T) {
	e := newEngine(t)
	e.h.Namespaces = noNamespace{}
	e.do("POST", "/apis/example.com/v1/namespaces/closing/widgets", "application/json", widget("w", "")).status(t, 403, metav1.StatusReasonForbidden, `widgets.example.com "w" is forbidden: unable to create new content in namespace closing because it is being terminated`)
	if e.store.puts != 0 {
		t.Fatal("created")
	}
	e.create(widget("w", ""))
}

// warningWidgets warn about big widgets, and refuse to be given to
// anybody but their owner.
type warningWidgets struct{ widgetStrategy }

func (warningWidgets) WarningsOnCreate(_ context.Context, obj *Object) []string {
	if spec, _ := obj.Content["spec"].(map[string]any); spec["size"] == int64(10) {
		return []string{"spec.size: 10 is big", "consider two widgets"}
	}
	return nil
}

func (warningWidgets) WarningsOnUpdate(_ context.Context, obj, _ *Object) []string {
	return []string{"updated " + obj.Meta.Name}
}

func (warningWidgets) Admit(_ context.Context, obj, _ *Object) error {
	if obj.Meta.Labels["owner"] == "mallory" {
		return apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, obj.Meta.Name, errNotOwner)
	}
	return nil
}

var errNotOwner = errors.New("not the owner")

func TestCreateWarningsAndAdmission(t *testing.T) {
	e := newEngine(t)
	e.res.Strategy = warningWidgets{}
	e.res.TTL = time.Hour
	a := e.do("POST", widgetsPath, "application/json", strings.Replace(widget("w", ""), `"size":1`, `"size":10`, 1))
	if got := a.header.Values("Warning"); a.code != 201 || len(got) != 2 || got[0] != `299 - "spec.size: 10 is big"` || got[1] != `299 - "consider two widgets"` {
		t.Fatalf("create warnings: %d %q", a.code, got)
	}
	// The resource's TTL goes with its writes.
	if e.store.opts.TTL != time.Hour {
		t.Fatalf("TTL: %v", e.store.opts.TTL)
	}
	if a = e.do("PATCH", widgetsPath+"/w", "application/merge-patch+json", `{"spec":{"size":2}}`); a.header.Get("Warning") != `299 - "updated w"` {
		t.Fatalf("update warnings: %d %v", a.code, a.header)
	}
	// A create that does not warn has no Warning header.
	if a = e.do("POST", widgetsPath, "application/json", widget("quiet", "")); a.code != 201 || len(a.header.Values("Warning")) != 0 {
		t.Fatalf("no warnings: %d %v", a.code, a.header)
	}
	puts := e.store.puts
	e.do("POST", widgetsPath, "application/json", widget("m", `,"labels":{"owner":"mallory"}`)).status(t, 403, metav1.StatusReasonForbidden, `widgets.example.com "m" is forbidden: not the owner`)
	e.do("PATCH", widgetsPath+"/w", "application/merge-patch+json", `{"metadata":{"labels":{"owner":"mallory"}}}`).status(t, 403, metav1.StatusReasonForbidden, `widgets.example.com "w" is forbidden: not the owner`)
	if e.store.puts != puts {
		t.Fatal("a refused write stored")
	}
}
