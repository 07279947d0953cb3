package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/server"
)

// The benchmarks send requests straight to the server's handler (no
// network), so ns/op and allocs/op are the server's whole work for one
// request: decoding, schema, managed fields, the etcd write and encoding.

// plainServer starts a plain-HTTP server, whose handler benchmarks and
// fuzz targets call directly (plain HTTP trusts every request), with the
// CRD of crdYAML installed and established.
func plainServer(b testing.TB, crdYAML string) (*server.Server, context.Context) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	srv, err := server.Start(ctx, server.Config{DataDir: b.TempDir(), ShutdownTimeout: 5 * time.Second, Insecure: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	if err := srv.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(crdYAML), crd); err != nil {
		b.Fatal(err)
	}
	ext := apiextensionsclient.NewForConfigOrDie(srv.RESTConfig())
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return srv, ctx
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

// wideCRD has 50 string fields under spec; wideObject fills them to about
// 2 KiB.
func wideCRD() string {
	var props strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&props, "                f%02d: {type: string}\n", i)
	}
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: wides.bench.example.com}
spec:
  group: bench.example.com
  scope: Namespaced
  names: {plural: wides, kind: Wide}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
` + props.String()
}

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
	srv, _ := plainServer(b, wideCRD())
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
	srv, _ := plainServer(b, wideCRD())
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
	srv, _ := plainServer(b, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: crontabs, singular: crontab, kind: CronTab}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string}
              image: {type: string}
              replicas: {type: integer}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Image, type: string, jsonPath: .spec.image, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`)
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
