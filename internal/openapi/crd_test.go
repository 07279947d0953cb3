package openapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/registry"
)

func TestCRDDocuments(t *testing.T) {
	p := New(builtins(t), nil)
	hidden := cronTab(t, "hidden.example.com", "3")
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1"), hidden}, hidden.Name))

	urls := root(t, p)
	if _, ok := urls["apis/stable.example.com/v1"]; !ok {
		t.Fatalf("root does not list the CronTab group/version: %v", keys(urls))
	}
	if _, ok := urls["apis/hidden.example.com/v1"]; ok {
		t.Errorf("root lists a CRD that is not Established")
	}
	doc := document(t, p, "apis/stable.example.com/v1")
	op := patchOperation(t, doc, "/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}")
	if !hasQueryParam(op, "fieldValidation") {
		t.Errorf("CronTab PATCH has no fieldValidation")
	}
	if got := gvkExtension(t, op.Extensions); got["kind"] != "CronTab" || got["group"] != "stable.example.com" {
		t.Errorf("CronTab PATCH GVK %v", got)
	}
	if _, ok := op.RequestBody.Content[strategicPatch]; ok {
		t.Errorf("CronTab PATCH offers strategic merge patch")
	}
	s := doc.Components.Schemas["com.example.stable.v1.CronTab"]
	if s == nil || s.Properties["spec"].Properties["cronSpec"].Type[0] != "string" {
		t.Errorf("CronTab schema: %+v", s)
	}
}

// countBuilds counts the CRD v3 documents built while the test runs.
func countBuilds(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	orig := buildCRDV3
	buildCRDV3 = func(crd *apiextensionsv1.CustomResourceDefinition, version string, opts builder.Options) (*spec3.OpenAPI, error) {
		n.Add(1)
		return orig(crd, version, opts)
	}
	t.Cleanup(func() { buildCRDV3 = orig })
	return &n
}

func TestOnlyChangedGroupVersionsAreRebuilt(t *testing.T) {
	builds := countBuilds(t)
	p := New(builtins(t), nil)
	stable, other := cronTab(t, "", "1"), cronTab(t, "other.example.com", "2")
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{stable, other}))
	if n := builds.Load(); n != 0 {
		t.Fatalf("%d documents built before any request", n)
	}
	before := root(t, p)
	if n := builds.Load(); n != 0 {
		t.Fatalf("%d documents built for the root, want none", n)
	}
	document(t, p, "apis/stable.example.com/v1")
	document(t, p, "apis/other.example.com/v1")
	if n := builds.Load(); n != 2 {
		t.Fatalf("%d documents built for the two group/versions, want 2", n)
	}

	// A new Index with the same CRDs changes nothing.
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{stable, other}))
	if same := root(t, p); !equalMaps(same, before) || builds.Load() != 2 {
		t.Errorf("unchanged CRDs: builds %d, root %v, was %v", builds.Load(), same, before)
	}

	// A changed CronTab changes its group/version's hash only.
	changed := cronTab(t, "", "5")
	changed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["schedule"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{changed, other}))
	after := root(t, p)
	document(t, p, "apis/stable.example.com/v1")
	document(t, p, "apis/other.example.com/v1")
	if n := builds.Load(); n != 3 {
		t.Errorf("%d documents built after one CRD changed, want 3", n)
	}
	for path, u := range before {
		if changedPath := path == "apis/stable.example.com/v1"; (after[path] != u) != changedPath {
			t.Errorf("%s: hash %s → %s", path, u, after[path])
		}
	}
	if _, ok := document(t, p, "apis/stable.example.com/v1").Components.Schemas["com.example.stable.v1.CronTab"].Properties["spec"].Properties["schedule"]; !ok {
		t.Errorf("the CronTab document does not have the new field")
	}

	// A group/version with no CRD left is gone.
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{other}))
	if _, ok := root(t, p)["apis/stable.example.com/v1"]; ok {
		t.Errorf("root still lists apis/stable.example.com/v1")
	}
	if w := get(t, p, "/openapi/v3/apis/stable.example.com/v1", ""); w.Code != http.StatusNotFound {
		t.Errorf("deleted group/version: %d", w.Code)
	}
}

func TestConcurrentSyncAndRequests(t *testing.T) {
	p := New(builtins(t), nil)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range 20 {
		crds = append(crds, cronTab(t, "", strconv.Itoa(i)))
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for _, crd := range crds[i*5 : i*5+5] {
				p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{crd}))
				get(t, p, "/openapi/v3/apis/stable.example.com/v1", "")
				get(t, p, "/openapi/v2", "")
			}
		})
	}
	wg.Wait()
	if _, ok := root(t, p)["apis/stable.example.com/v1"]; !ok {
		t.Errorf("CronTab group/version missing")
	}
}

// A server's publisher serves the built-in documents from a service shared
// by the process and its CRDs' from its own: it answers exactly as one
// kube-openapi v3 service holding every document would (the oracle):
// the root, its ETag and hashes, each document in JSON and protobuf, with
// hashes, with stale ones. One CRD is in a built-in group/version.
func TestSharedBuiltinsAnswerAsOneService(t *testing.T) {
	p := New(builtins(t), nil)
	if q := New(builtins(t), nil); q.shared != p.shared {
		t.Fatal("two publishers of the same built-in resources do not share their documents")
	}
	inBuiltin := cronTab(t, "coordination.k8s.io", "2")
	check := func(step string) {
		t.Helper()
		oracle := handler3.NewOpenAPIService()
		p.refresh() // what the next request does
		own := p.own.Load()
		for path, v := range p.builtinV3 {
			oracle.UpdateGroupVersionLazy(path, v)
		}
		for path, d := range own.gvs {
			oracle.UpdateGroupVersionLazy(path, cached.Func(func() (*spec3.OpenAPI, string, error) {
				gz, err := d.json.Get()
				if err != nil {
					return nil, "", err
				}
				b, err := gunzipped(gz)
				if err != nil {
					return nil, "", err
				}
				doc := &spec3.OpenAPI{}
				return doc, d.etag, json.Unmarshal(b, doc)
			}))
		}
		mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/openapi/v3" {
				oracle.HandleDiscovery(w, r)
			} else {
				oracle.HandleGroupVersion(w, r)
			}
		})
		// A CRD document's hash is the fingerprint of its CRDs, not the
		// hash of its content: the rest is as the oracle answers.
		crdDoc := func(target string) bool {
			u, _ := url.Parse(target)
			return own.gvs[strings.TrimPrefix(u.Path, "/openapi/v3/")] != nil
		}
		urls, oracleURLs := root(t, p), root(t, mux)
		same := func(target, accept string) {
			t.Helper()
			got, want := get(t, p, target, accept), get(t, mux, target, accept)
			headers := []string{"Etag", "Content-Type", "Location", "Cache-Control", "Vary"}
			if crdDoc(target) {
				headers = []string{"Content-Type", "Vary"}
				if u(t, target).Query().Get("hash") != "" {
					// Compared with the oracle's answer at its own hash.
					want = get(t, mux, oracleURLs[strings.TrimPrefix(u(t, target).Path, "/openapi/v3/")], accept)
					headers = append(headers, "Cache-Control")
				}
			}
			for _, h := range headers {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Errorf("%s: GET %s (%s): %s %q, want %q", step, target, accept, h, got.Header().Get(h), want.Header().Get(h))
				}
			}
			equal := bytes.Equal(got.Body.Bytes(), want.Body.Bytes())
			if crdDoc(target) && got.Header().Get("Content-Type") == "application/json" {
				// The oracle's document went through JSON: the same
				// content, with the keys of extensions in another order.
				equal = sameJSON(got.Body.Bytes(), want.Body.Bytes())
			}
			if got.Code != want.Code || (got.Code == http.StatusOK && !equal) {
				t.Errorf("%s: GET %s (%s): %d, %d bytes; want %d, %d bytes", step, target, accept, got.Code, got.Body.Len(), want.Code, want.Body.Len())
			}
		}
		if len(urls) != len(oracleURLs) {
			t.Errorf("%s: root lists %v, the oracle %v", step, keys(urls), keys(oracleURLs))
		}
		for path, want := range oracleURLs {
			if got := urls[path]; (got != want) != (own.gvs[path] != nil) {
				t.Errorf("%s: root lists %s at %q, the oracle at %q", step, path, got, want)
			}
		}
		for _, path := range []string{"api/v1", "apis/coordination.k8s.io/v1", "apis/stable.example.com/v1", "apis/rbac.authorization.k8s.io/v1"} {
			if _, ok := urls[path]; !ok {
				continue
			}
			same("/openapi/v3/"+path, "application/json")
			same(urls[path], "application/json")
			if own.gvs[path] == nil {
				same("/openapi/v3/"+path, "application/com.github.proto-openapi.spec.v3.v1.0+protobuf")
				same(urls[path], "")
			} else {
				// The protobuf is the served JSON's.
				j := get(t, p, "/openapi/v3/"+path, "application/json").Body.Bytes()
				want, err := handler3.ToV3ProtoBinary(j)
				if err != nil {
					t.Fatal(err)
				}
				if got := get(t, p, "/openapi/v3/"+path, "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"); !bytes.Equal(got.Body.Bytes(), want) {
					t.Errorf("%s: %s in protobuf is not its JSON's", step, path)
				}
			}
			if d := own.gvs[path]; d != nil {
				// The hash is the ETag; a stale one redirects to it, and
				// the hashed URL is immutable.
				w := get(t, p, urls[path], "")
				if w.Header().Get("Etag") != strconv.Quote(d.etag) || u(t, urls[path]).Query().Get("hash") != d.etag || w.Header().Get("Cache-Control") != "public, immutable" {
					t.Errorf("%s: GET %s: Etag %s, Cache-Control %q", step, urls[path], w.Header().Get("Etag"), w.Header().Get("Cache-Control"))
				}
				w = get(t, p, "/openapi/v3/"+path+"?hash=stale", "")
				if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != urls[path] {
					t.Errorf("%s: stale hash of %s: %d, Location %q", step, path, w.Code, w.Header().Get("Location"))
				}
				continue
			}
			same("/openapi/v3/"+path+"?hash=stale", "")
		}
	}
	check("built-in documents only")
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1"), inBuiltin}))
	check("with CRDs, one in a built-in group/version")
	if doc := document(t, p, "apis/coordination.k8s.io/v1"); doc.Paths.Paths["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"] == nil ||
		doc.Paths.Paths["/apis/coordination.k8s.io/v1/namespaces/{namespace}/crontabs"] == nil {
		t.Errorf("apis/coordination.k8s.io/v1 does not have both the Leases and the CronTabs")
	}
	p.Sync(index(nil))
	check("CRDs gone")
	if doc := document(t, p, "apis/coordination.k8s.io/v1"); doc.Paths.Paths["/apis/coordination.k8s.io/v1/namespaces/{namespace}/crontabs"] != nil {
		t.Errorf("apis/coordination.k8s.io/v1 still has the CronTabs")
	}
}

// The in-process client lists the same paths as /openapi/v3 without
// building a document, changes a path's URL when its document changes,
// and serves the documents as GET does.
func TestClient(t *testing.T) {
	builds := countBuilds(t)
	p := New(builtins(t), nil)
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1")}))
	c := p.Client()
	paths, err := c.Paths()
	if err != nil {
		t.Fatal(err)
	}
	if n := builds.Load(); n != 0 {
		t.Errorf("Paths built %d CRD documents", n)
	}
	urls := root(t, p)
	if len(paths) != len(urls) {
		t.Errorf("the client lists %d paths, /openapi/v3 %d", len(paths), len(urls))
	}
	for path := range urls {
		if paths[path] == nil {
			t.Errorf("the client does not list %s", path)
		}
	}
	for _, path := range []string{"api/v1", "apis/stable.example.com/v1"} {
		got, err := paths[path].Schema("application/json")
		if err != nil {
			t.Fatal(err)
		}
		if want := get(t, p, "/openapi/v3/"+path, "application/json"); !bytes.Equal(got, want.Body.Bytes()) {
			t.Errorf("%s: the client's document differs from GET's", path)
		}
	}
	before := paths["apis/stable.example.com/v1"].ServerRelativeURL()
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "2")}))
	again, _ := c.Paths()
	if again["apis/stable.example.com/v1"].ServerRelativeURL() == before {
		t.Error("a changed CRD's path kept its URL")
	}
	if again["api/v1"].ServerRelativeURL() != paths["api/v1"].ServerRelativeURL() {
		t.Error("an unchanged path's URL changed")
	}
	gone := groupVersion{p: p, path: "apis/nothing.example.com/v1"}
	if _, err := gone.Schema("application/json"); err == nil {
		t.Error("a path without a document gave a schema")
	}
}

// The publisher keeps no Index but the latest: an older one holds the
// resources, and the watch caches, of CRDs deleted since.
func TestOldIndexIsReleased(t *testing.T) {
	p := New(builtins(t), nil)
	gone := func() weak.Pointer[registry.Index] {
		old := index([]*apiextensionsv1.CustomResourceDefinition{cronTab(t, "", "1")})
		p.Sync(old)
		root(t, p) // applies it
		return weak.Make(old)
	}()
	p.Sync(index(nil))
	runtime.GC()
	if gone.Value() != nil {
		t.Error("the publisher still holds an Index it was given before the latest")
	}
	runtime.KeepAlive(p)
}

func u(t *testing.T, target string) *url.URL {
	t.Helper()
	parsed, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

// A CRD's documents are made of its spec: a change of its status or
// metadata (a new resourceVersion, the same generation) keeps their hash
// and builds nothing again.
func TestStatusChangeKeepsDocuments(t *testing.T) {
	builds := countBuilds(t)
	p := New(builtins(t), nil)
	crd := cronTab(t, "", "1")
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{crd}))
	before := root(t, p)["apis/stable.example.com/v1"]
	document(t, p, "apis/stable.example.com/v1")
	status := crd.DeepCopy()
	status.ResourceVersion = "7"
	status.Status.AcceptedNames = status.Spec.Names
	p.Sync(index([]*apiextensionsv1.CustomResourceDefinition{status}))
	if after := root(t, p)["apis/stable.example.com/v1"]; after != before {
		t.Errorf("a status change moved the hash: %s → %s", before, after)
	}
	document(t, p, "apis/stable.example.com/v1")
	if n := builds.Load(); n != 1 {
		t.Errorf("%d documents built, want 1", n)
	}
}

// Documents released by a full budget pool are built again, the same.
func TestDocumentsReleasedAndRebuilt(t *testing.T) {
	builds := countBuilds(t)
	p := New(builtins(t), budget.New(1))
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, g := range []string{"a.example.com", "b.example.com", "c.example.com"} {
		crds = append(crds, cronTab(t, g, "1"))
	}
	p.Sync(index(crds))
	first := get(t, p, "/openapi/v3/apis/a.example.com/v1", "application/json").Body.String()
	for _, g := range []string{"b", "c"} {
		document(t, p, "apis/"+g+".example.com/v1")
	}
	again := get(t, p, "/openapi/v3/apis/a.example.com/v1", "application/json").Body.String()
	if again != first {
		t.Error("a document built again differs")
	}
	if n := builds.Load(); n != 4 {
		t.Errorf("%d documents built, want 4 (a twice: the pool holds one thing at a time)", n)
	}
	v2 := get(t, p, "/openapi/v2", "application/json")
	if v2.Code != http.StatusOK || !strings.Contains(v2.Body.String(), "com.example.c.v1.CronTab") {
		t.Errorf("/openapi/v2: %d", v2.Code)
	}
}
