package review

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func serve(t *testing.T, body []byte, convert Func) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	Serve(w, httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body)), convert)
	return w
}

func TestServeAnswersInTheVersionAsked(t *testing.T) {
	upper := func(objs [][]byte, to string) ([][]byte, error) {
		out := make([][]byte, len(objs))
		for i, o := range objs {
			out[i] = bytes.ReplaceAll(o, []byte(`"v1"`), []byte(`"`+to+`"`))
		}
		return out, nil
	}
	for _, version := range []string{"apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1"} {
		body, err := EncodeRequest(version, "uid-1", "v2", [][]byte{[]byte(`{"apiVersion":"v1"}`)})
		if err != nil {
			t.Fatal(err)
		}
		w := serve(t, body, upper)
		answer, err := DecodeResponse(w.Body.Bytes())
		if w.Code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %v %s", version, w.Code, err, w.Body)
		}
		r := answer.Response
		if answer.APIVersion != version || answer.Kind != Kind || answer.Request != nil || r == nil || r.UID != "uid-1" ||
			r.Result.Status != metav1.StatusSuccess || len(r.ConvertedObjects) != 1 || string(r.ConvertedObjects[0].Raw) != `{"apiVersion":"v2"}` {
			t.Fatalf("%s: %s", version, w.Body)
		}
	}
}

func TestServeFailures(t *testing.T) {
	body, _ := EncodeRequest("apiextensions.k8s.io/v1", "u", "v2", [][]byte{[]byte(`{}`)})
	w := serve(t, body, func([][]byte, string) ([][]byte, error) { return nil, errors.New("no way") })
	answer, err := DecodeResponse(w.Body.Bytes())
	if err != nil || answer.Response.Result.Status != metav1.StatusFailure || answer.Response.Result.Message != "no way" || answer.Response.ConvertedObjects != nil {
		t.Fatalf("failed conversion: %s", w.Body)
	}
	w = serve(t, body, func([][]byte, string) ([][]byte, error) { return nil, nil })
	if answer, _ := DecodeResponse(w.Body.Bytes()); answer.Response.Result.Status != metav1.StatusFailure {
		t.Fatalf("too few objects: %s", w.Body)
	}
	defer func(n int64) { maxBodyBytes = n }(maxBodyBytes)
	maxBodyBytes = int64(len(body))
	for name, tc := range map[string]struct {
		body []byte
		code int
	}{
		"too large":  {append(body, ' '), http.StatusRequestEntityTooLarge},
		"not JSON":   {[]byte("not json"), http.StatusBadRequest},
		"v2":         {[]byte(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v2","request":{}}`), http.StatusBadRequest},
		"no request": {[]byte(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}`), http.StatusBadRequest},
	} {
		if w := serve(t, tc.body, nil); w.Code != tc.code {
			t.Errorf("%s: %d %s", name, w.Code, strings.TrimSpace(w.Body.String()))
		}
	}
	w = httptest.NewRecorder()
	Serve(w, httptest.NewRequest(http.MethodGet, "/convert", nil), nil)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", w.Code)
	}
}
