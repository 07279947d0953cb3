package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// TestGetReadsItsWrites: a GET without resourceVersion is a consistent
// read: right after a write answers, a GET shows it (this server reads it
// from its watch cache, its etcd having no other writer), also when the
// newest write was to another resource, and a deleted object is gone.
func TestGetReadsItsWrites(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	tabs := e.dyn.Resource(crontabs).Namespace("default")
	cms := e.kube.CoreV1().ConfigMaps("default")
	obj, err := tabs.Create(e.ctx, cronTab("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tabs.Get(e.ctx, "a", metav1.GetOptions{}); err != nil || got.GetResourceVersion() != obj.GetResourceVersion() {
		t.Fatalf("GET after the create: %v, %v; want resourceVersion %s", got, err, obj.GetResourceVersion())
	}
	for i := range 100 {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, i)
		obj, err = tabs.Patch(e.ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			// The newest write is to another resource's prefix.
			if _, err := cms.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tabs.Get(e.ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetResourceVersion() != obj.GetResourceVersion() {
			t.Fatalf("GET after patch %d: resourceVersion %s, want %s", i, got.GetResourceVersion(), obj.GetResourceVersion())
		}
		if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != int64(i) {
			t.Fatalf("GET after patch %d: spec.replicas %d", i, r)
		}
	}
	cm, err := cms.Create(e.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cms.Get(e.ctx, "b", metav1.GetOptions{}); err != nil || got.ResourceVersion != cm.ResourceVersion || got.Data["k"] != "v" {
		t.Fatalf("GET of a ConfigMap after its create: %v, %v", got, err)
	}
	if err := tabs.Delete(e.ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tabs.Get(e.ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("GET after the delete: %v, want NotFound", err)
	}
}

// TestGetReadsItsWritesInProcess is the same straight through the
// server's handler, without a network between a write and the next GET:
// a cache that had not yet applied the write would be read at once.
func TestGetReadsItsWritesInProcess(t *testing.T) {
	srv, _ := plainServer(t, "crd-wide")
	h := srv.Handler()
	const coll = "/apis/bench.example.com/v1/namespaces/default/wides"
	do := func(method, path, contentType, body string, want int) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rv := func(obj map[string]any) string {
		s, _, _ := unstructured.NestedString(obj, "metadata", "resourceVersion")
		return s
	}
	for i := range 200 {
		name := fmt.Sprintf("w%d", i)
		created := do("POST", coll, "application/json", wideObject(name, 0), http.StatusCreated)
		if got := do("GET", coll+"/"+name, "", "", http.StatusOK); rv(got) != rv(created) {
			t.Fatalf("GET after create %d: resourceVersion %s, want %s", i, rv(got), rv(created))
		}
		patched := do("PATCH", coll+"/"+name, "application/merge-patch+json", `{"spec":{"f01":"changed"}}`, http.StatusOK)
		if got := do("GET", coll+"/"+name, "", "", http.StatusOK); rv(got) != rv(patched) {
			t.Fatalf("GET after patch %d: resourceVersion %s, want %s", i, rv(got), rv(patched))
		}
		do("DELETE", coll+"/"+name, "", "", http.StatusOK)
		do("GET", coll+"/"+name, "", "", http.StatusNotFound)
	}
}
