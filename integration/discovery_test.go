package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/crdserver/crdserver/internal/store"
	"github.com/crdserver/crdserver/server"
)

func TestDiscovery(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Spec.Names.Categories = []string{"all", "cron"}
	e.createCRD(crd)

	// client-go asks for aggregated discovery first, as kubectl does.
	dc := discovery.NewDiscoveryClientForConfigOrDie(e.cfg)
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, g := range groups {
		names = append(names, g.Name)
	}
	if !slices.Equal(names, []string{"", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "autoscaling", "batch", "networking.k8s.io", "policy", "rbac.authorization.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io", "coordination.k8s.io", "discovery.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io", "conversion.crdserver.io", "crdserver.io", "stable.example.com"}) {
		t.Fatalf("groups %v", names)
	}
	var found *metav1.APIResource
	for _, rl := range resources {
		if rl.GroupVersion != "stable.example.com/v1" {
			continue
		}
		for i := range rl.APIResources {
			if rl.APIResources[i].Name == "crontabs" {
				found = &rl.APIResources[i]
			}
		}
	}
	if found == nil || found.Kind != "CronTab" || !found.Namespaced || found.SingularName != "crontab" ||
		!slices.Equal(found.ShortNames, []string{"ct"}) || !slices.Equal(found.Categories, []string{"all", "cron"}) || !slices.Contains(found.Verbs, "watch") {
		t.Fatalf("crontabs in discovery: %+v", found)
	}

	// The aggregated document itself.
	r := e.do("GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if r.code != 200 || r.header.Get("Content-Type") != "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" || r.header.Get("ETag") == "" {
		t.Fatalf("aggregated: %d %v", r.code, r.header)
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(r.body, &agg); err != nil || len(agg.Items) != 19 || agg.Items[18].Versions[0].Resources[0].Scope != apidiscoveryv2.ScopeNamespace {
		t.Fatalf("aggregated body: %v %s", err, r.body)
	}
	if r2 := e.do("GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", "If-None-Match", r.header.Get("ETag")); r2.code != http.StatusNotModified {
		t.Fatalf("ETag not honoured: %d", r2.code)
	}
	// Legacy documents.
	for path, want := range map[string]string{
		"/api":                          `"kind":"APIVersions"`,
		"/api/v1":                       `"name":"namespaces"`,
		"/apis":                         `"kind":"APIGroupList"`,
		"/apis/stable.example.com":      `"preferredVersion":{"groupVersion":"stable.example.com/v1","version":"v1"}`,
		"/apis/stable.example.com/v1":   `"storageVersionHash":"`,
		"/apis/apiextensions.k8s.io/v1": `"name":"customresourcedefinitions/status"`,
	} {
		if r := e.do("GET", path, ""); r.code != 200 || !contains(r.body, want) {
			t.Fatalf("%s: %d %s", path, r.code, r.body)
		}
	}
	expectStatus(t, e.do("GET", "/apis/nope.example.com", ""), http.StatusNotFound, metav1.StatusReasonNotFound, "")
	expectStatus(t, e.do("GET", "/apis/stable.example.com/v9", ""), http.StatusNotFound, metav1.StatusReasonNotFound, "")

	// /version.
	v, err := dc.ServerVersion()
	if err != nil || v.Major != "1" || v.Minor != "37" {
		t.Fatalf("version %+v %v", v, err)
	}

	// A deleted CRD leaves discovery.
	if err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Delete(e.ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, err := dc.ServerResourcesForGroupVersion("stable.example.com/v1")
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatal("deleted CRD still in discovery")
	}
}

func TestEncodings(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	yamlBody := "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: ytab\nspec:\n  image: img\n"
	r := e.do("POST", ctPath, yamlBody, "Content-Type", "application/yaml", "Accept", "application/yaml")
	if r.code != 201 || r.header.Get("Content-Type") != "application/yaml" || !strings.HasPrefix(string(r.body), "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n") {
		t.Fatalf("YAML create: %d %s %s", r.code, r.header.Get("Content-Type"), r.body)
	}
	var m map[string]any
	if err := yaml.Unmarshal(r.body, &m); err != nil || m["spec"].(map[string]any)["image"] != "img" {
		t.Fatalf("YAML body: %v", err)
	}
	// Malformed YAML: 400.
	expectStatus(t, e.do("POST", ctPath, "a: [b", "Content-Type", "application/yaml"), 400, metav1.StatusReasonBadRequest, "the object provided is unrecognized (must be of type CronTab)")
	// Accept lists fall back to what is served.
	for _, accept := range []string{"*/*", "application/*", "application/vnd.kubernetes.protobuf, application/json", "application/json;as=Table;v=v9;g=meta.k8s.io, application/json"} {
		if r := e.do("GET", ctPath+"/ytab", "", "Accept", accept); r.code != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("Accept %q: %d %s", accept, r.code, r.header.Get("Content-Type"))
		}
	}
	// A custom resource has no protobuf form: 406, the Status itself in
	// protobuf as the client asked (as Kubernetes answers).
	if r := e.do("GET", ctPath+"/ytab", "", "Accept", "application/vnd.kubernetes.protobuf"); r.code != http.StatusNotAcceptable ||
		r.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" ||
		!strings.Contains(string(r.body), "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf") {
		t.Fatalf("protobuf only: %d %v %q", r.code, r.header, r.body)
	}
	expectStatus(t, e.do("GET", ctPath+"/ytab", "", "Accept", "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"), http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		"only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")
	// ?pretty indents.
	if r := e.do("GET", ctPath+"/ytab?pretty=true", ""); !strings.Contains(string(r.body), "\n  \"kind\": \"CronTab\"") {
		t.Fatalf("pretty: %s", r.body)
	}
	// Method not allowed on a resource path.
	expectStatus(t, e.do("PUT", ctPath, "{}"), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "")
}

func TestGzip(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	// A list over the 128 KiB threshold is compressed; a small one is not.
	pad := strings.Repeat("x", 2000)
	for i := 0; i < 80; i++ {
		if r := e.do("POST", ctPath, fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"g%d"},"spec":{"image":%q}}`, i, pad)); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	get := func(path string) *http.Response {
		req, _ := http.NewRequest("GET", e.srv.URL()+path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := e.rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := get(ctPath)
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("large list not compressed: %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(zr)
	var l map[string]any
	if err := json.Unmarshal(body, &l); err != nil || len(l["items"].([]any)) != 80 {
		t.Fatalf("decompressed list: %v", err)
	}
	if small := get(ctPath + "/g1"); small.Header.Get("Content-Encoding") != "" {
		t.Fatal("small response compressed")
	}
}

func TestHealthAndMetrics(t *testing.T) {
	e := start(t)
	for _, ep := range []string{"livez", "readyz", "healthz"} {
		r := e.do("GET", "/"+ep, "")
		if r.code != 200 || string(r.body) != "ok" || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("%s: %d %q %v", ep, r.code, r.body, r.header)
		}
		r = e.do("GET", "/"+ep+"?verbose", "")
		if !strings.Contains(string(r.body), "[+]ping ok\n") || !strings.Contains(string(r.body), "[+]etcd ok\n") || !strings.HasSuffix(string(r.body), ep+" check passed\n") {
			t.Fatalf("%s verbose: %s", ep, r.body)
		}
	}
	r := e.do("GET", "/readyz?verbose&exclude=etcd&exclude=nope", "")
	if !strings.Contains(string(r.body), "[+]etcd excluded: ok\n") || !strings.Contains(string(r.body), "[+]shutdown ok\n") ||
		!strings.Contains(string(r.body), `warn: some health checks cannot be excluded: no matches for "nope"`) {
		t.Fatalf("exclude: %s", r.body)
	}
	if r := e.do("GET", "/readyz/poststarthook/crd-informer-synced", ""); r.code != 200 || string(r.body) != "ok" {
		t.Fatalf("single check: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/livez/etcd", ""); r.code != 200 {
		t.Fatalf("livez/etcd: %d", r.code)
	}

	e.createCRD(cronTabCRD(t))
	e.do("GET", ctPath, "")
	e.do("GET", ctPath+"/missing", "")
	m := e.do("GET", "/metrics", "")
	for _, want := range []string{
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="stable.example.com",resource="crontabs",scope="namespace",subresource="",verb="LIST",version="v1"}`,
		`apiserver_request_total{code="404",component="apiserver",dry_run="",group="stable.example.com",resource="crontabs",scope="resource",subresource="",verb="GET",version="v1"}`,
		`apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="stable.example.com",resource="crontabs",scope="namespace",subresource="",verb="LIST",version="v1",le="0.005"}`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

func TestHealthFailsWhenShuttingDown(t *testing.T) {
	e := start(t)
	handler := e.srv.Handler()
	go func() { _ = e.srv.Close() }()
	err := wait.PollUntilContextTimeout(e.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest("GET", "/readyz", nil)
		handler.ServeHTTP(rec, req)
		return rec.code == 500 && strings.Contains(rec.body.String(), "[-]shutdown failed: reason withheld") &&
			strings.HasSuffix(rec.body.String(), "readyz check failed\n"), nil
	})
	if err != nil {
		t.Fatal("readyz did not fail during shutdown")
	}
}

type recorder struct {
	header http.Header
	code   int
	body   strings.Builder
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}

func TestRestartKeepsObjects(t *testing.T) {
	dir := t.TempDir()
	e := start(t, func(c *server.Config) { c.DataDir = dir })
	e.createCRD(cronTabCRD(t))
	e.seed("default", 3)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := start(t, func(c *server.Config) { c.DataDir = dir })
	e2.waitEstablished("crontabs.stable.example.com")
	l, err := e2.dyn.Resource(crontabs).Namespace("default").List(e2.ctx, metav1.ListOptions{})
	if err != nil || len(l.Items) != 3 {
		t.Fatalf("after restart: %v %d", err, len(l.Items))
	}
}

func TestTables(t *testing.T) {
	e := start(t)
	crd := cronTabCRD(t)
	crd.Spec.Versions[0].AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Spec", Type: "string", JSONPath: ".spec.cronSpec"},
		{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
		{Name: "Image", Type: "string", JSONPath: ".spec.image", Priority: 1},
	}
	e.createCRD(crd)
	e.seed("default", 2)
	table := "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	r := e.do("GET", ctPath, "", "Accept", table)
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); err != nil || tbl.Kind != "Table" || tbl.APIVersion != "meta.k8s.io/v1" {
		t.Fatalf("table: %v %s", err, r.body)
	}
	cols := []string{}
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, fmt.Sprintf("%s:%s:%d", c.Name, c.Type, c.Priority))
	}
	if strings.Join(cols, " ") != "Name:string:0 Spec:string:0 Replicas:integer:0 Image:string:1" || len(tbl.Rows) != 2 || tbl.ResourceVersion == "" {
		t.Fatalf("columns %v rows %d", cols, len(tbl.Rows))
	}
	if tbl.Rows[0].Cells[0] != "ct-000" || tbl.Rows[0].Cells[1] != "* * * * */5" || tbl.Rows[0].Cells[3] != "my-awesome-cron-image" {
		t.Fatalf("cells %v", tbl.Rows[0].Cells)
	}
	if !strings.Contains(string(tbl.Rows[0].Object.Raw), `"kind":"PartialObjectMetadata"`) {
		t.Fatalf("row object %s", tbl.Rows[0].Object.Raw)
	}
	// includeObject.
	r = e.do("GET", ctPath+"/ct-000?includeObject=Object", "", "Accept", table)
	if err := json.Unmarshal(r.body, &tbl); err != nil || len(tbl.Rows) != 1 || !strings.Contains(string(tbl.Rows[0].Object.Raw), `"kind":"CronTab"`) {
		t.Fatalf("includeObject=Object: %s", r.body)
	}
	r = e.do("GET", ctPath+"?includeObject=None", "", "Accept", table)
	if !contains(r.body, `"object":null`) {
		t.Fatalf("includeObject=None: %s", r.body)
	}
	expectStatus(t, e.do("GET", ctPath+"?includeObject=Some", "", "Accept", table), http.StatusBadRequest, metav1.StatusReasonBadRequest, `unrecognized includeObject value: "Some"`)
	// Without printer columns: Name and Age; the CRD list has its own.
	r = e.do("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "", "Accept", table)
	if !contains(r.body, `"name":"Scope"`) || !contains(r.body, `"v1(storage)"`) {
		t.Fatalf("CRD table: %s", r.body)
	}
	r = e.do("GET", "/api/v1/namespaces/default", "", "Accept", table)
	if !contains(r.body, `"cells":["default","Active",`) {
		t.Fatalf("namespace table: %s", r.body)
	}
	// Metadata only.
	r = e.do("GET", ctPath, "", "Accept", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
	if r.code != 200 || !contains(r.body, `"kind":"PartialObjectMetadataList"`) || contains(r.body, `"spec":`) {
		t.Fatalf("metadata list: %s", r.body)
	}
	expectStatus(t, e.do("GET", ctPath, "", "Accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"), http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "")
}

// TestLargeListStreamed: a list over a mebibyte is written as it is
// encoded; what the client reads is the same list, whole, with its
// Content-Length, compressed or not.
func TestLargeListStreamed(t *testing.T) {
	e := start(t)
	e.createCRD(cronTabCRD(t))
	pad := strings.Repeat("y", 4000)
	const n = 300
	for i := range n {
		if r := e.do("POST", ctPath, fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"s%03d"},"spec":{"image":%q}}`, i, pad)); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	get := func(gz bool) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", e.srv.URL()+ctPath, nil)
		req.Header.Set("Accept-Encoding", "identity")
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := e.rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rd io.Reader = resp.Body
		if gz {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			rd = zr
		}
		body, err := io.ReadAll(rd)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	plain, body := get(false)
	if plain.StatusCode != 200 || plain.ContentLength != int64(len(body)) || len(body) < 1<<20 || plain.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("plain list: %d, Content-Length %d, %d bytes read, %v", plain.StatusCode, plain.ContentLength, len(body), plain.Header)
	}
	var l struct {
		APIVersion, Kind string
		Metadata         struct {
			ResourceVersion string
			Continue        *string
		}
		Items []struct {
			Metadata struct{ Name, ResourceVersion string }
			Spec     struct{ Image string }
		}
	}
	if err := json.Unmarshal(body, &l); err != nil {
		t.Fatalf("streamed list: %v", err)
	}
	if l.APIVersion != "stable.example.com/v1" || l.Kind != "CronTabList" || l.Metadata.ResourceVersion == "" || l.Metadata.Continue == nil || *l.Metadata.Continue != "" || len(l.Items) != n {
		t.Fatalf("streamed list: %s %s %+v, %d items", l.APIVersion, l.Kind, l.Metadata, len(l.Items))
	}
	for i, it := range l.Items {
		if it.Metadata.Name != fmt.Sprintf("s%03d", i) || it.Spec.Image != pad || it.Metadata.ResourceVersion == "" {
			t.Fatalf("item %d: %s %q", i, it.Metadata.Name, it.Metadata.ResourceVersion)
		}
	}
	// Compressed, the same items (the list's resourceVersion is etcd's
	// newest revision, which other writes, such as leases, move).
	items := func(b []byte) string {
		var l struct{ Items json.RawMessage }
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return string(l.Items)
	}
	zipped, zbody := get(true)
	if zipped.Header.Get("Content-Encoding") != "gzip" || items(zbody) != items(body) {
		t.Fatalf("gzipped list: %v, same items %v", zipped.Header, items(zbody) == items(body))
	}
	// A list within one page of a paged walk is the same items.
	if r := e.do("GET", ctPath+"?limit=299", ""); r.code != 200 || !bytes.Contains(body, []byte(`"name":"s298"`)) {
		t.Fatalf("page: %d", r.code)
	}
}

// TestPackedObjectsListed: objects a cold cache keeps compressed are
// listed, paged, got and watched as written, and a list of them over a
// mebibyte streams them whole.
func TestPackedObjectsListed(t *testing.T) {
	defer store.PackAfterForTests(32)()
	e := start(t)
	e.createCRD(cronTabCRD(t))
	const n = 400
	want := map[string]string{}
	for i := range n {
		image := fmt.Sprintf("registry.example.com/team-%d/app-%d:%x", i%7, i%13, i*7919) + strings.Repeat("-x", 1200)
		want[fmt.Sprintf("p%03d", i)] = image
		if r := e.do("POST", ctPath, fmt.Sprintf(`{"apiVersion":"stable.example.com/v1","kind":"CronTab","metadata":{"name":"p%03d","labels":{"team":"t%d"}},"spec":{"image":%q}}`, i, i%7, image)); r.code != 201 {
			t.Fatalf("create: %d %s", r.code, r.body)
		}
	}
	check := func(what string, body []byte) {
		t.Helper()
		var l struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     struct{ Image string }
			}
		}
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, it := range l.Items {
			if want[it.Metadata.Name] != it.Spec.Image {
				t.Fatalf("%s: %s has image %q, want %q", what, it.Metadata.Name, it.Spec.Image, want[it.Metadata.Name])
			}
		}
		if what == "list" && len(l.Items) != n {
			t.Fatalf("list: %d items", len(l.Items))
		}
	}
	r := e.do("GET", ctPath, "")
	if r.code != 200 || len(r.body) < 1<<20 {
		t.Fatalf("list: %d, %d bytes", r.code, len(r.body))
	}
	check("list", r.body)
	check("page", e.do("GET", ctPath+"?limit=150", "").body)
	check("selected", e.do("GET", ctPath+"?labelSelector=team%3Dt3", "").body)
	if r := e.do("GET", ctPath+"/p399", ""); r.code != 200 || !strings.Contains(string(r.body), want["p399"]) {
		t.Fatalf("get: %d %.200s", r.code, r.body)
	}
}
