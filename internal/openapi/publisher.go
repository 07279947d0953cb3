package openapi

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/crdserver/crdserver/internal/budget"
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
	// process with the same built-in resources.
	shared *handler3.OpenAPIService
	// builtinV3 are the built-in documents by path ("api/v1"); builtinV2
	// is the built-in v2 document CRDs are merged onto.
	builtinV3 map[string]cached.Value[*spec3.OpenAPI]
	builtinV2 cached.Value[*spec.Swagger]
	// pool holds what is built for CRDs: their documents and the merged
	// ones, as JSON and protobuf.
	pool *budget.Pool

	// own are this server's documents of CRD group/versions and its v2
	// document, as of the last applied Index.
	own atomic.Pointer[ownDocs]
	// root is the last /openapi/v3 answer merged from shared's and own's.
	rootMu sync.Mutex
	root   *v3Root

	// Aggregated, when set, are the v3 documents of APIServices other
	// servers serve: listed in /openapi/v3 (and winning a path this
	// server has too), served by their servers.
	Aggregated Aggregated

	mu sync.Mutex // guards crds, and the updates of own
	// crds are the documents of the Established CRDs, by name.
	crds map[string]*crdDocs
}

// ownDocs are the documents made of CRDs, at one Index.
type ownDocs struct {
	// gvs are the group/versions holding CRDs, by path ("apis/g/v"),
	// each merged with the built-in document of its path if there is one.
	gvs map[string]*servedDoc
	// v2 is the built-in v2 document with every CRD's merged in.
	v2 *servedDoc
}

// New returns a publisher of the documents of the built-in resources
// builtins (a server's Builtin.All), whose CRD documents are held in pool
// (nil: held once built). Nothing is built until a document is asked for.
// Call Sync with every registry Index (reg.Subscribe(p.Sync)) to publish
// CRDs.
func New(builtins []*resource.Resource, pool *budget.Pool) *Publisher {
	set := sharedBuiltinSet(builtinDocuments(builtins))
	p := &Publisher{
		shared:    set.v3,
		builtinV3: set.docs,
		builtinV2: set.v2,
		pool:      pool,
		crds:      map[string]*crdDocs{},
	}
	p.own.Store(&ownDocs{gvs: map[string]*servedDoc{}, v2: p.v2Document(nil, nil)})
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
	own := p.own.Load()
	switch path := r.URL.Path; {
	case path == "/openapi/v2":
		serveDocument(w, r, own.v2, "/openapi/v2", v2Formats, false)
	case path == "/openapi/v3":
		p.serveV3Root(w, r)
	case strings.HasPrefix(path, "/openapi/v3/"):
		gv := strings.TrimPrefix(path, "/openapi/v3/")
		if d := own.gvs[gv]; d != nil {
			serveDocument(w, r, d, path, v3Formats, true)
			return
		}
		// The v3 service writes nothing for a document it does not have;
		// kube-apiserver answers 404.
		tw := &trackingWriter{ResponseWriter: w}
		p.shared.HandleGroupVersion(tw, r)
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

// apply publishes the Established CRDs of ix. A CRD's documents are kept
// while its uid and generation stay the same (its documents are made of
// its spec alone); a group/version's merged document is kept while its
// CRDs' are. Documents are built when first asked for.
func (p *Publisher) apply(ix *registry.Index) {
	docs := map[string]*crdDocs{}
	if ix != nil {
		for name, crd := range ix.CRDs {
			if !ix.Established[name] {
				continue
			}
			if d := p.crds[name]; d != nil && d.uid == crd.UID && d.generation == crd.Generation {
				docs[name] = d
			} else {
				versions := map[string]func() (*apiextensionsv1.CustomResourceDefinition, error){}
				for _, v := range crd.Spec.Versions {
					versions[v.Name] = ix.VersionSource(name, v.Name)
				}
				docs[name] = newCRDDocs(crd, ix.CRDSource(name), versions, p.pool)
			}
		}
	}
	for name, d := range p.crds {
		if docs[name] != d {
			d.drop()
		}
	}
	p.crds = docs
	names := make([]string, 0, len(docs))
	for name := range docs {
		names = append(names, name)
	}
	sort.Strings(names)
	old := p.own.Load()
	own := &ownDocs{gvs: p.v3Documents(old, docs, names), v2: old.v2}
	if fp := fingerprint(docs, names, ""); fp != old.v2.etag {
		own.v2 = p.v2Document(docs, names)
	}
	for path, d := range old.gvs {
		if own.gvs[path] != d {
			d.drop()
		}
	}
	if own.v2 != old.v2 {
		old.v2.drop()
	}
	p.own.Store(own)
}

// v3Documents are the documents of the group/versions of docs, those whose
// CRDs did not change kept from old.
func (p *Publisher) v3Documents(old *ownDocs, docs map[string]*crdDocs, names []string) map[string]*servedDoc {
	members := map[schema.GroupVersion][]string{}
	for _, name := range names {
		for v := range docs[name].v3 {
			gv := schema.GroupVersion{Group: docs[name].group, Version: v}
			members[gv] = append(members[gv], name)
		}
	}
	out := make(map[string]*servedDoc, len(members))
	for gv, in := range members {
		path := v3Path(gv)
		builtin := p.builtinV3[path] // a CRD in a built-in group/version
		fp := fingerprint(docs, in, builtinKey(builtin, path))
		if d := old.gvs[path]; d != nil && d.etag == fp {
			out[path] = d
			continue
		}
		values := make([]*budget.Value[*spec3.OpenAPI], 0, len(in))
		for _, name := range in {
			values = append(values, docs[name].v3[gv.Version])
		}
		out[path] = p.newDocument(fp, func() ([]byte, error) {
			var specs []*spec3.OpenAPI
			if builtin != nil {
				doc, _, err := builtin.Get()
				if err != nil {
					return nil, err
				}
				specs = append(specs, doc)
			}
			specs = append(specs, buildAll(values)...)
			merged, err := builder.MergeSpecsV3(specs...)
			if err != nil {
				return nil, err
			}
			return json.Marshal(merged)
		}, handler3.ToV3ProtoBinary)
	}
	return out
}

// buildAll gets the documents of values, built on every CPU at once; one
// that cannot be built is left out, as kube-apiserver leaves out a CRD
// whose document it cannot build.
func buildAll[T any](values []*budget.Value[T]) []T {
	docs := make([]T, len(values))
	ok := make([]bool, len(values))
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, v := range values {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			doc, err := v.Get()
			if err != nil {
				slog.Warn("openapi: leaving a document out", "err", err)
				return
			}
			docs[i], ok[i] = doc, true
		}()
	}
	wg.Wait()
	out := docs[:0]
	for i, d := range docs {
		if ok[i] {
			out = append(out, d)
		}
	}
	return out
}

// builtinKey identifies the built-in document of a path in a fingerprint.
func builtinKey(builtin cached.Value[*spec3.OpenAPI], path string) string {
	if builtin == nil {
		return ""
	}
	return "builtin:" + path
}

// v2Document is the built-in v2 document with the CRDs' documents merged
// in (the built-in one wins any conflict; see mergeV2JSON).
func (p *Publisher) v2Document(docs map[string]*crdDocs, names []string) *servedDoc {
	values := make([]*budget.Value[[]byte], 0, len(names))
	for _, name := range names {
		values = append(values, docs[name].v2)
	}
	static := p.builtinV2
	return p.newDocument(fingerprint(docs, names, ""), func() ([]byte, error) {
		base, _, err := static.Get()
		if err != nil {
			return nil, err
		}
		pieces := buildAll(values)
		if len(pieces) == 0 {
			return base.MarshalJSON()
		}
		staticJSON, err := base.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if out, ok, err := mergeV2JSON(staticJSON, pieces); ok || err != nil {
			return out, err
		}
		return mergeV2Specs(base, pieces)
	}, handler.ToProtoBinary)
}

// v3Path is the path of a CRD group/version's document.
func v3Path(gv schema.GroupVersion) string {
	return "apis/" + gv.Group + "/" + gv.Version
}

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

// Aggregated lists the v3 documents other servers serve: path
// ("apis/<group>/<version>") → serverRelativeURL, and a generation that
// changes whenever they do.
type Aggregated interface {
	V3Paths(ctx context.Context) (map[string]string, uint64)
}

// v3Root is an /openapi/v3 answer: the built-in documents' paths and this
// server's, with the answer (ETag) of the shared service, the own
// documents and the aggregated generation it was made from.
type v3Root struct {
	sharedTag string
	own       *ownDocs
	aggGen    uint64
	body      []byte
	etag      string
	modified  time.Time
}

// serveV3Root answers /openapi/v3 as the v3 service does: the paths of
// the built-in documents (from the shared service) and of this server's
// CRD documents (which win for a path in both), each with its hash. The
// hash of a CRD document is the fingerprint of what it is made from, so
// listing it builds nothing.
func (p *Publisher) serveV3Root(w http.ResponseWriter, r *http.Request) {
	root, err := p.v3RootNow(r.Context())
	if err != nil {
		slog.Error("openapi: serving /openapi/v3", "err", err)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Etag", strconv.Quote(root.etag))
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, "/openapi/v3", root.modified, bytes.NewReader(root.body))
}

func (p *Publisher) v3RootNow(ctx context.Context) (*v3Root, error) {
	shared, sharedTag, err := discoveryOf(p.shared)
	if err != nil {
		return nil, err
	}
	own := p.own.Load()
	var agg map[string]string
	var aggGen uint64
	if p.Aggregated != nil {
		agg, aggGen = p.Aggregated.V3Paths(ctx)
	}
	p.rootMu.Lock()
	defer p.rootMu.Unlock()
	if p.root != nil && p.root.sharedTag == sharedTag && p.root.own == own && p.root.aggGen == aggGen {
		return p.root, nil
	}
	var merged handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(shared, &merged); err != nil {
		return nil, err
	}
	if merged.Paths == nil {
		merged.Paths = map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}
	}
	for path, d := range own.gvs {
		merged.Paths[path] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: hashedURL(path, d.etag)}
	}
	for path, u := range agg {
		merged.Paths[path] = handler3.OpenAPIV3DiscoveryGroupVersion{ServerRelativeURL: u}
	}
	body, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	p.root = &v3Root{sharedTag: sharedTag, own: own, aggGen: aggGen, body: body, etag: fmt.Sprintf("%X", sha512.Sum512(body)), modified: time.Now()}
	return p.root, nil
}

// hashedURL is the serverRelativeURL of a v3 document, as kube-openapi
// makes it.
func hashedURL(path, hash string) string {
	return (&url.URL{Path: "/openapi/v3/" + path, RawQuery: url.Values{"hash": {hash}}.Encode()}).String()
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
