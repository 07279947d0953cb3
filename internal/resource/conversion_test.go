package resource

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crdserver/crdserver/internal/conversion"
)

// twoVersions: widgets stored in v1 and served in v2 too, through a
// converter that cannot convert (a conversion webhook that is down).
func twoVersions(t *testing.T) (*engine, string) {
	e := newEngine(t)
	e.create(widget("kept", `,"finalizers":["example.com/keep"]`), widget("gone", ""), widget("more", ""))
	v2 := &Version{Name: "v2"}
	e.res.Versions = append(e.res.Versions, v2)
	e.res.Converter = conversion.Failing{Err: errors.New("webhook unreachable")}
	e.ver = v2
	return e, "/apis/example.com/v2/namespaces/default/widgets"
}

func TestConversionDown(t *testing.T) {
	e, v2 := twoVersions(t)
	// Reads and writes that need the conversion fail with it.
	e.do("GET", v2+"/gone", "", "").status(t, 500, metav1.StatusReasonInternalError, "conversion to example.com/v2 failed: webhook unreachable")
	puts := e.store.puts
	e.do("PATCH", v2+"/gone", "application/merge-patch+json", `{"spec":{"size":2}}`).status(t, 500, metav1.StatusReasonInternalError, "conversion to example.com/v2 failed")
	if e.store.puts != puts {
		t.Fatal("a failed conversion wrote")
	}

	// Deleting needs no conversion (kubernetes/kubernetes#71925): the
	// object goes.
	if a := e.do("DELETE", v2+"/gone", "", ""); a.code != http.StatusOK || a.body["kind"] != "Status" || e.stored("gone") != nil {
		t.Fatalf("delete: %d %s", a.code, a.raw)
	}
	// One that a finalizer keeps is marked in the version it is stored
	// in, and answered with a Status, since it cannot be answered in v2.
	// (kube-apiserver marks it too, then fails to encode its answer: a
	// 500. The Status is delete.go's deliberate choice.)
	a := e.do("DELETE", v2+"/kept", "", "")
	if a.code != http.StatusOK || a.body["kind"] != "Status" || a.body["status"] != "Success" {
		t.Fatalf("delete with a finalizer: %d %s", a.code, a.raw)
	}
	stored := e.stored("kept")
	if stored["apiVersion"] != "example.com/v1" || stored["metadata"].(map[string]any)["deletionTimestamp"] != "2026-11-24T12:00:00Z" {
		t.Fatalf("marked: %v", stored)
	}
}

func TestConversionDownDeleteCollection(t *testing.T) {
	e, v2 := twoVersions(t)
	e.cache()
	// The list to delete is read as stored; the answer, which cannot be
	// converted, lists the objects as stored. (kube-apiserver deletes them
	// too, then answers a 500 it cannot encode: deleteCollection's answer
	// is its deliberate choice.)
	a := e.do("DELETE", v2, "", "")
	names, _ := listed(t, a)
	if strings.Join(names, ",") != "gone,kept,more" || e.stored("gone") != nil || e.stored("more") != nil || e.stored("kept") == nil {
		t.Fatalf("deletecollection: %v %s", names, a.raw)
	}
	if a.body["apiVersion"] != "example.com/v2" || a.body["items"].([]any)[0].(map[string]any)["apiVersion"] != "example.com/v1" {
		t.Fatalf("answer: %s", a.raw)
	}
}
