package filters

import (
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func sized(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(200)
		_, _ = w.Write([]byte(strings.Repeat("a", n)))
	})
}

func TestCompression(t *testing.T) {
	for _, c := range []struct {
		size    int
		accept  string
		gzipped bool
	}{
		{GzipThreshold, "gzip", true},
		{GzipThreshold - 1, "gzip", false},
		{GzipThreshold, "", false},
		{GzipThreshold, "deflate, gzip;q=1.0", true},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", c.accept)
		WithCompression(sized(c.size)).ServeHTTP(w, r)
		got := w.Header().Get("Content-Encoding") == "gzip"
		if got != c.gzipped {
			t.Fatalf("size %d accept %q: gzipped %v", c.size, c.accept, got)
		}
		body := w.Body.Bytes()
		if got {
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if len(body) != c.size {
			t.Fatalf("size %d: body of %d bytes", c.size, len(body))
		}
	}
}

func TestRecovery(t *testing.T) {
	h := WithRecovery(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), slog.New(slog.NewTextHandler(io.Discard, nil)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	if w.Code != 500 || !strings.Contains(w.Body.String(), `"reason":"InternalError"`) {
		t.Fatalf("panic answered %d %s", w.Code, w.Body.String())
	}
}

func TestMetricsLabels(t *testing.T) {
	m := NewMetrics()
	h := WithRequestInfo(m.WithMetrics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(404) })))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/apis/g.io/v1/namespaces/ns/things?watch=1", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("PATCH", "/apis/g.io/v1/things/a/status", nil))
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`apiserver_request_total{code="404",component="apiserver",dry_run="",group="g.io",resource="things",scope="namespace",subresource="",verb="WATCH",version="v1"} 1`,
		`apiserver_request_total{code="404",component="apiserver",dry_run="",group="g.io",resource="things",scope="resource",subresource="status",verb="PATCH",version="v1"} 1`,
	} {
		if !strings.Contains(w.Body.String(), want) {
			t.Fatalf("missing %s", want)
		}
	}
}
