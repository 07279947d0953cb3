package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdserver/crdserver/crdtest"
	"github.com/crdserver/crdserver/server"
)

// The benchmarks send requests straight to the server's handler (no
// network), so ns/op and allocs/op are the server's whole work for one
// request: decoding, schema, managed fields, the etcd write and encoding.

// plainServer starts a plain-HTTP server, whose handler benchmarks and
// fuzz targets call directly (plain HTTP trusts every request), with the
// CRD of testdata/crd.yaml installed and established.
func plainServer(b testing.TB, crd string) (*server.Server, context.Context) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	srv := crdtest.Start(b, crdtest.Options{
		CRDs:   []*apiextensionsv1.CustomResourceDefinition{fixtureCRD(b, crd)},
		Server: func(c *server.Config) { c.Insecure = true },
	})
	return srv.Server, ctx
}

// serve sends one request to the handler and checks its status code.
func serve(b *testing.B, h http.Handler, method, path, contentType, accept, body string, want int) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
	}
	return rec
}

// wideObject fills the 50 string fields of testdata/crd-wide.yaml to
// about 2 KiB.
func wideObject(name string, gen int) string {
	fields := make([]string, 50)
	for i := range fields {
		fields[i] = fmt.Sprintf(`"f%02d":"value-%02d-%s"`, i, i, strings.Repeat("x", 22))
	}
	fields[0] = fmt.Sprintf(`"f00":"generation-%d"`, gen)
	return `{"apiVersion":"bench.example.com/v1","kind":"Wide","metadata":{"name":"` + name + `"},"spec":{` + strings.Join(fields, ",") + `}}`
}

// BenchmarkServerSideApply2KiB applies a 2 KiB object that changes one
// field each time: the field manager, the schema and the etcd write.
func BenchmarkServerSideApply2KiB(b *testing.B) {
	srv, _ := plainServer(b, "crd-wide")
	h := srv.Handler()
	const path = "/apis/bench.example.com/v1/namespaces/default/wides/w?fieldManager=bench"
	if n := len(wideObject("w", 0)); n < 2048 {
		b.Fatalf("object of %d bytes", n)
	}
	serve(b, h, "PATCH", path, "application/apply-patch+yaml", "", wideObject("w", 0), http.StatusCreated)
	bodies := make([]string, b.N)
	for i := range bodies {
		bodies[i] = wideObject("w", i+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(b, h, "PATCH", path, "application/apply-patch+yaml", "", bodies[i], http.StatusOK)
	}
}

// BenchmarkMergePatch2KiB is the same write as a merge patch, for
// comparison: what server-side apply costs on top.
func BenchmarkMergePatch2KiB(b *testing.B) {
	srv, _ := plainServer(b, "crd-wide")
	h := srv.Handler()
	serve(b, h, "POST", "/apis/bench.example.com/v1/namespaces/default/wides", "application/json", "", wideObject("w", 0), http.StatusCreated)
	bodies := make([]string, b.N)
	for i := range bodies {
		bodies[i] = wideObject("w", i+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(b, h, "PATCH", "/apis/bench.example.com/v1/namespaces/default/wides/w", "application/merge-patch+json", "", bodies[i], http.StatusOK)
	}
}

// BenchmarkTable500 lists 500 objects as a Table with printer columns, as
// kubectl get asks for them.
func BenchmarkTable500(b *testing.B) {
	srv, _ := plainServer(b, "crd-crontab-columns")
	h := srv.Handler()
	const path = "/apis/stable.example.com/v1/namespaces/default/crontabs"
	for i := 0; i < 500; i++ {
		serve(b, h, "POST", path, "application/json", "",
			fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"ct-%03d"},"spec":{"cronSpec":"*/%d * * * *","image":"image-%d","replicas":%d}}`, i, i%60+1, i, i%7), http.StatusCreated)
	}
	const accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
	rec := serve(b, h, "GET", path+"?limit=500", "", accept, "", http.StatusOK)
	if !strings.Contains(rec.Body.String(), `"kind":"Table"`) || strings.Count(rec.Body.String(), `"cells":`) != 500 {
		b.Fatalf("not a Table of 500 rows: %.300s", rec.Body.String())
	}
	b.ReportAllocs()
	b.SetBytes(int64(rec.Body.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		serve(b, h, "GET", path+"?limit=500", "", accept, "", http.StatusOK)
	}
}
