package filters

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithStackRoom: requests, watches included, reach the handler.
func TestWithStackRoom(t *testing.T) {
	served := 0
	h := WithRequestInfo(WithStackRoom(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served++
		w.WriteHeader(http.StatusTeapot)
	})))
	for _, path := range []string{"/api/v1/namespaces/a/configmaps/b", "/api/v1/configmaps?watch=true", "/version"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusTeapot {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	if served != 3 {
		t.Errorf("served %d of 3", served)
	}
}
