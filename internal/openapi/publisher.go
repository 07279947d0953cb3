package openapi

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/registry"
	"github.com/crdserver/crdserver/internal/request"
	"github.com/crdserver/crdserver/internal/resource"
)

// Publisher serves /openapi/v2 and /openapi/v3 for the built-in APIs and
// the Established CRDs of the latest registry Index.
type Publisher struct {
	// latest is the Index given to Sync, with its number; applied is the
	// number of the one the documents describe (not the Index: an old
	// Index holds the resources, and the watch caches, of deleted CRDs).
	// They are reconciled on the next request.
	latest  atomic.Pointer[syncedIndex]
	syncs   atomic.Uint64
	applied atomic.Uint64

	// shared serves the built-in documents, for every server of the
	// process with the same built-in resources; v3 serves this server's
	// group/versions that hold CRDs (merged with a built-in document when
	// a CRD is in a built-in group/version); ownPaths are those paths.
	shared   *handler3.OpenAPIService
	v3       *handler3.OpenAPIService
	ownPaths atomic.Pointer[map[string]bool]
	// root is the last /openapi/v3 answer merged from shared's and v3's.
	rootMu sync.Mutex
	root   *v3Root

	v2 *handler.OpenAPIService
	// v2Handler is the v2 service's handler (content negotiation, gzip).
	v2Handler http.Handler

	// builtinV3 are the built-in documents by path ("api/v1"); builtinV2
	// is the built-in v2 document CRDs are merged onto.
	builtinV3 map[string]cached.Value[*spec3.OpenAPI]
	builtinV2 cached.Value[*spec.Swagger]

	mu sync.Mutex // guards what follows, and updates of v2 and v3
	// crds are the documents of the Established CRDs, by name.
	crds map[string]*crdDocs
	// v3Fingerprints are the fingerprints of the published CRD
	// group/versions; v2Fingerprint that of the CRDs in the v2 document.
	v3Fingerprints map[schema.GroupVersion]string
	v2Fingerprint  string
	// ownValues are the documents given to v3, by path.
	ownValues map[string]cached.Value[*spec3.OpenAPI]
}

// New returns a publisher of the documents of the built-in resources
// builtins (a server's Builtin.All). Nothing is built until a document is
// asked for. Call Sync with every registry Index (reg.Subscribe(p.Sync))
// to publish CRDs.
func New(builtins []*resource.Resource) *Publisher {
	set := sharedBuiltinSet(builtinDocuments(builtins))
	p := &Publisher{
		shared:         set.v3,
		v3:             handler3.NewOpenAPIService(),
		builtinV3:      set.docs,
		builtinV2:      set.v2,
		crds:           map[string]*crdDocs{},
		v3Fingerprints: map[schema.GroupVersion]string{},
		v2Fingerprint:  fingerprint(nil, nil),
		ownValues:      map[string]cached.Value[*spec3.OpenAPI]{},
	}
	p.ownPaths.Store(&map[string]bool{})
	p.v2 = handler.NewOpenAPIServiceLazy(p.builtinV2)
	p.v2.RegisterOpenAPIVersionedService("/openapi/v2", captureHandler(func(h http.Handler) { p.v2Handler = h }))
	return p
}

// builtinSet is what every server of a process with the same built-in
// documents shares: the documents, built when first asked for, and a v3
// service that serves them, which keeps their JSON, protobuf and hashes
// (the v3 service holds those per document; made per server, they were
// most of a test server's start-up CPU, as the mutating admission policy
// plugin reads /openapi/v3 at once, and megabytes of its heap).
type builtinSet struct {
	v3   *handler3.OpenAPIService
	docs map[string]cached.Value[*spec3.OpenAPI]
	v2   cached.Value[*spec.Swagger]
}

// builtinSets are the builtinSets of the process by their documents' keys.
var builtinSets sync.Map // string → *builtinSet

func sharedBuiltinSet(docs []builtinDocument) *builtinSet {
	var key strings.Builder
	for _, d := range docs {
		key.WriteString(d.path + "\x00" + d.key + "\x00")
	}
	if set, ok := builtinSets.Load(key.String()); ok {
		return set.(*builtinSet)
	}
	set := &builtinSet{v3: handler3.NewOpenAPIService(), docs: map[string]cached.Value[*spec3.OpenAPI]{}}
	for _, d := range docs {
		set.docs[d.path] = cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := buildBuiltinV3(d)
			return doc, "builtin", err
		}))
		set.v3.UpdateGroupVersionLazy(d.path, set.docs[d.path])
	}
	set.v2 = cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		doc, err := buildBuiltinV2(docs)
		return doc, "builtin", err
	}))
	actual, _ := builtinSets.LoadOrStore(key.String(), set)
	return actual.(*builtinSet)
}

// Sync takes a new registry Index. It only records it, so it is safe to
// call under the registry lock; the next request updates the documents.
func (p *Publisher) Sync(ix *registry.Index) {
	p.latest.Store(&syncedIndex{ix: ix, n: p.syncs.Add(1)})
}

// syncedIndex is an Index given to Sync and its number (from 1).
type syncedIndex struct {
	ix *registry.Index
	n  uint64
}

// ServeHTTP answers /openapi/v2, /openapi/v3 and /openapi/v3/...; anything
// else 404.
func (p *Publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.refresh()
	switch path := r.URL.Path; {
	case path == "/openapi/v2":
		p.v2Handler.ServeHTTP(w, r)
	case path == "/openapi/v3":
		p.serveV3Root(w, r)
	case strings.HasPrefix(path, "/openapi/v3/"):
		// The v3 service writes nothing for a document it does not have;
		// kube-apiserver answers 404.
		tw := &trackingWriter{ResponseWriter: w}
		if (*p.ownPaths.Load())[strings.TrimPrefix(path, "/openapi/v3/")] {
			p.v3.HandleGroupVersion(tw, r)
		} else {
			p.shared.HandleGroupVersion(tw, r)
		}
		if !tw.wrote {
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		request.WriteError(w, r, request.NotFound())
	}
}

// refresh brings the documents up to date with the latest Index.
func (p *Publisher) refresh() {
	l := p.latest.Load()
	if l == nil || p.applied.Load() == l.n {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l = p.latest.Load()
	if p.applied.Load() == l.n {
		return
	}
	p.apply(l.ix)
	p.applied.Store(l.n)
}

// apply publishes the Established CRDs of ix. Only the group/versions
// whose CRDs changed (by name and resourceVersion) get new documents, and
// those are built when first asked for.
func (p *Publisher) apply(ix *registry.Index) {
	docs := map[string]*crdDocs{}
	if ix != nil {
		for name, crd := range ix.CRDs {
			if !ix.Established[name] {
				continue
			}
			if d := p.crds[name]; d != nil && d.resourceVersion == crd.ResourceVersion {
				docs[name] = d
			} else {
				docs[name] = newCRDDocs(crd)
			}
		}
	}
	p.crds = docs
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	p.applyV3(docs, names)
	p.applyV2(docs, names)
}

func (p *Publisher) applyV3(docs map[string]*crdDocs, names []string) {
	members := map[schema.GroupVersion][]string{}
	for _, name := range names {
		for v := range docs[name].v3 {
			gv := schema.GroupVersion{Group: docs[name].group, Version: v}
			members[gv] = append(members[gv], name)
		}
	}
	fingerprints := make(map[schema.GroupVersion]string, len(members))
	for gv, in := range members {
		fp := fingerprint(docs, in)
		fingerprints[gv] = fp
		if p.v3Fingerprints[gv] == fp {
			continue
		}
		var values []cached.Value[*spec3.OpenAPI]
		if builtin := p.builtinV3[v3Path(gv)]; builtin != nil {
			values = append(values, builtin) // a CRD in a built-in group/version
		}
		for _, name := range in {
			values = append(values, docs[name].v3[gv.Version])
		}
		p.ownValues[v3Path(gv)] = mergeV3(fp, values)
		p.v3.UpdateGroupVersionLazy(v3Path(gv), p.ownValues[v3Path(gv)])
	}
	for gv := range p.v3Fingerprints {
		if _, ok := fingerprints[gv]; !ok {
			p.v3.DeleteGroupVersion(v3Path(gv)) // the shared built-in one, if any, is served again
			delete(p.ownValues, v3Path(gv))
		}
	}
	p.v3Fingerprints = fingerprints
	own := make(map[string]bool, len(fingerprints))
	for gv := range fingerprints {
		own[v3Path(gv)] = true
	}
	p.ownPaths.Store(&own)
}

func (p *Publisher) applyV2(docs map[string]*crdDocs, names []string) {
	fp := fingerprint(docs, names)
	if fp == p.v2Fingerprint {
		return
	}
	p.v2Fingerprint = fp
	values := make([]cached.Value[*spec.Swagger], 0, len(names))
	for _, name := range names {
		values = append(values, docs[name].v2)
	}
	p.v2.UpdateSpecLazy(mergeV2(fp, p.builtinV2, values))
}

// v3Path is the path of a CRD group/version's document.
func v3Path(gv schema.GroupVersion) string {
	return "apis/" + gv.Group + "/" + gv.Version
}

// captureHandler is a common.PathHandler that takes the one handler the v2
// service registers.
type captureHandler func(http.Handler)

func (f captureHandler) Handle(_ string, h http.Handler) { f(h) }

// trackingWriter records whether anything was written.
type trackingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackingWriter) WriteHeader(code int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// v3Root is an /openapi/v3 answer: the built-in documents' paths and this
// server's, with the answers (ETags) of the two services it was made from.
type v3Root struct {
	sharedTag, ownTag string
	body              []byte
	etag              string
	modified          time.Time
}

// serveV3Root answers /openapi/v3 as the v3 service does: the paths of
// the built-in documents (from the shared service) and of this server's
// CRD documents (from its own, which win for a path in both), each with
// the hash of its document.
func (p *Publisher) serveV3Root(w http.ResponseWriter, r *http.Request) {
	root, err := p.v3RootNow()
	if err != nil {
		slog.Error("openapi: serving /openapi/v3", "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Etag", strconv.Quote(root.etag))
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, "/openapi/v3", root.modified, bytes.NewReader(root.body))
}

func (p *Publisher) v3RootNow() (*v3Root, error) {
	shared, sharedTag, err := discoveryOf(p.shared)
	if err != nil {
		return nil, err
	}
	own, ownTag, err := discoveryOf(p.v3)
	if err != nil {
		return nil, err
	}
	p.rootMu.Lock()
	defer p.rootMu.Unlock()
	if p.root != nil && p.root.sharedTag == sharedTag && p.root.ownTag == ownTag {
		return p.root, nil
	}
	var merged, mine handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(shared, &merged); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(own, &mine); err != nil {
		return nil, err
	}
	if merged.Paths == nil {
		merged.Paths = map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}
	}
	maps.Copy(merged.Paths, mine.Paths)
	body, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	p.root = &v3Root{sharedTag: sharedTag, ownTag: ownTag, body: body, etag: fmt.Sprintf("%X", sha512.Sum512(body)), modified: time.Now()}
	return p.root, nil
}

// discoveryOf is a v3 service's /openapi/v3 answer and its ETag.
func discoveryOf(s *handler3.OpenAPIService) ([]byte, string, error) {
	rec := &bufferWriter{header: http.Header{}}
	s.HandleDiscovery(rec, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/openapi/v3"}, Header: http.Header{}})
	if rec.code != 0 && rec.code != http.StatusOK {
		return nil, "", fmt.Errorf("the OpenAPI v3 service answered %d", rec.code)
	}
	etag, err := strconv.Unquote(rec.header.Get("Etag"))
	if err != nil {
		return nil, "", fmt.Errorf("the OpenAPI v3 service's ETag %q: %w", rec.header.Get("Etag"), err)
	}
	return rec.body.Bytes(), etag, nil
}

// bufferWriter is an http.ResponseWriter that keeps the answer.
type bufferWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }

func (b *bufferWriter) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
