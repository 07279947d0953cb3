package openapi

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

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
	// latest is the Index given to Sync; applied is the one the documents
	// describe. They are reconciled on the next request.
	latest  atomic.Pointer[registry.Index]
	applied atomic.Pointer[registry.Index]

	v3 *handler3.OpenAPIService
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
}

// New returns a publisher of the documents of the built-in resources
// builtins (a server's Builtin.All). Nothing is built until a document is
// asked for. Call Sync with every registry Index (reg.Subscribe(p.Sync))
// to publish CRDs.
func New(builtins []*resource.Resource) *Publisher {
	p := &Publisher{
		v3:             handler3.NewOpenAPIService(),
		builtinV3:      map[string]cached.Value[*spec3.OpenAPI]{},
		crds:           map[string]*crdDocs{},
		v3Fingerprints: map[schema.GroupVersion]string{},
		v2Fingerprint:  fingerprint(nil, nil),
	}
	docs := builtinDocuments(builtins)
	for _, d := range docs {
		p.builtinV3[d.path] = cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, err := buildBuiltinV3(d)
			return doc, "builtin", err
		}))
		p.v3.UpdateGroupVersionLazy(d.path, p.builtinV3[d.path])
	}
	p.builtinV2 = cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		doc, err := buildBuiltinV2(docs)
		return doc, "builtin", err
	}))
	p.v2 = handler.NewOpenAPIServiceLazy(p.builtinV2)
	p.v2.RegisterOpenAPIVersionedService("/openapi/v2", captureHandler(func(h http.Handler) { p.v2Handler = h }))
	return p
}

// Sync takes a new registry Index. It only records it, so it is safe to
// call under the registry lock; the next request updates the documents.
func (p *Publisher) Sync(ix *registry.Index) {
	p.latest.Store(ix)
}

// ServeHTTP answers /openapi/v2, /openapi/v3 and /openapi/v3/...; anything
// else 404.
func (p *Publisher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.refresh()
	switch path := r.URL.Path; {
	case path == "/openapi/v2":
		p.v2Handler.ServeHTTP(w, r)
	case path == "/openapi/v3":
		p.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(path, "/openapi/v3/"):
		// The v3 service writes nothing for a document it does not have;
		// kube-apiserver answers 404.
		tw := &trackingWriter{ResponseWriter: w}
		p.v3.HandleGroupVersion(tw, r)
		if !tw.wrote {
			w.WriteHeader(http.StatusNotFound)
		}
	default:
		request.WriteError(w, r, request.NotFound())
	}
}

// refresh brings the documents up to date with the latest Index.
func (p *Publisher) refresh() {
	if p.applied.Load() == p.latest.Load() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ix := p.latest.Load()
	if p.applied.Load() == ix {
		return
	}
	p.apply(ix)
	p.applied.Store(ix)
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
		p.v3.UpdateGroupVersionLazy(v3Path(gv), mergeV3(fp, values))
	}
	for gv := range p.v3Fingerprints {
		if _, ok := fingerprints[gv]; ok {
			continue
		}
		if builtin := p.builtinV3[v3Path(gv)]; builtin != nil {
			p.v3.UpdateGroupVersionLazy(v3Path(gv), builtin)
		} else {
			p.v3.DeleteGroupVersion(v3Path(gv))
		}
	}
	p.v3Fingerprints = fingerprints
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
