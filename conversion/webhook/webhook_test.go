package webhook_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/crdserver/crdserver/examples/crontab-conversion/crontab"
)

func review(version, desired string, objs ...string) string {
	r := apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/" + version, Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "uid-1", DesiredAPIVersion: desired},
	}
	for _, o := range objs {
		r.Request.Objects = append(r.Request.Objects, runtime.RawExtension{Raw: []byte(o)})
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func post(t *testing.T, h http.Handler, body string) (int, apiextensionsv1.ConversionReview) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/convert", strings.NewReader(body)))
	var out apiextensionsv1.ConversionReview
	if w.Code == 200 {
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer is not a ConversionReview: %s", w.Body.String())
		}
	}
	return w.Code, out
}

const (
	betaObj = `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a","namespace":"default","uid":"u1","resourceVersion":"7","labels":{"x":"y"}},"hostPort":"localhost:1234","spec":{"image":"i"}}`
	v1Obj   = `{"apiVersion":"example.com/v1","kind":"CronTab","metadata":{"name":"b","namespace":"default"},"host":"example.com","port":"2345"}`
)

func TestHubAndSpoke(t *testing.T) {
	s := crontab.NewScheme()
	for _, version := range []string{"v1", "v1beta1"} {
		code, out := post(t, s, review(version, "example.com/v1", betaObj, v1Obj))
		if code != 200 || out.APIVersion != "apiextensions.k8s.io/"+version || out.Response == nil || out.Response.UID != "uid-1" || out.Response.Result.Status != metav1.StatusSuccess {
			t.Fatalf("%s: %d %+v", version, code, out)
		}
		objs := out.Response.ConvertedObjects
		if len(objs) != 2 {
			t.Fatalf("%d objects", len(objs))
		}
		var first, second map[string]any
		_ = json.Unmarshal(objs[0].Raw, &first)
		_ = json.Unmarshal(objs[1].Raw, &second)
		md := first["metadata"].(map[string]any)
		if first["apiVersion"] != "example.com/v1" || first["kind"] != "CronTab" || first["host"] != "localhost" || first["port"] != "1234" || first["hostPort"] != nil ||
			md["resourceVersion"] != "7" || md["uid"] != "u1" || md["labels"].(map[string]any)["x"] != "y" || first["spec"].(map[string]any)["image"] != "i" {
			t.Fatalf("converted %v", first)
		}
		if second["host"] != "example.com" || second["metadata"].(map[string]any)["name"] != "b" {
			t.Fatalf("already in v1: %v", second)
		}
	}
	// And back.
	out, err := s.Convert([]byte(v1Obj), "example.com/v1beta1")
	if err != nil || !strings.Contains(string(out), `"hostPort":"example.com:2345"`) {
		t.Fatalf("to v1beta1: %s %v", out, err)
	}
}

func TestFailures(t *testing.T) {
	s := crontab.NewScheme()
	code, out := post(t, s, review("v1", "example.com/v1", `{"apiVersion":"example.com/v1beta1","kind":"CronTab","metadata":{"name":"a"},"hostPort":"nocolon"}`))
	if code != 200 || out.Response.Result.Status != metav1.StatusFailure || !strings.Contains(out.Response.Result.Message, `hostPort "nocolon" is not host:port`) || out.Response.UID != "uid-1" {
		t.Fatalf("failed conversion: %+v", out.Response)
	}
	code, out = post(t, s, review("v1", "example.com/v9", betaObj))
	if out.Response.Result.Status != metav1.StatusFailure || !strings.Contains(out.Response.Result.Message, `unknown desired apiVersion "example.com/v9"`) {
		t.Fatalf("unknown version: %d %+v", code, out.Response)
	}
	if code, _ := post(t, s, `{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v2","request":{}}`); code != http.StatusBadRequest {
		t.Fatalf("unknown review version: %d", code)
	}
	if code, _ := post(t, s, `not json`); code != http.StatusBadRequest {
		t.Fatalf("malformed: %d", code)
	}
}
