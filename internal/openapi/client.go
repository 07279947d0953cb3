package openapi

import (
	"fmt"
	"net/http"
	"net/url"

	"k8s.io/client-go/openapi"
)

// Client is an in-process OpenAPI v3 client of p's documents, for the
// server's own users of /openapi/v3 (the mutating admission policy
// plugin's type converters, the policy type checker). Unlike the
// /openapi/v3 root, its Paths builds no document: a path's
// ServerRelativeURL carries a version of the document's inputs (the
// built-in document's, or the fingerprint of its CRDs), which changes
// whenever the document does, and a document is built when its Schema is
// asked for. Through HTTP the plugin's first poll built, marshalled and
// hashed every built-in document at each start.
func (p *Publisher) Client() openapi.Client { return publisherClient{p} }

type publisherClient struct{ p *Publisher }

func (c publisherClient) Paths() (map[string]openapi.GroupVersion, error) {
	p := c.p
	p.refresh()
	own := p.own.Load()
	out := make(map[string]openapi.GroupVersion, len(p.builtinV3)+len(own.gvs))
	for path := range p.builtinV3 {
		out[path] = groupVersion{p: p, path: path, version: "builtin"}
	}
	for path, d := range own.gvs {
		out[path] = groupVersion{p: p, path: path, version: d.etag}
	}
	return out, nil
}

// groupVersion is one document of a publisherClient.
type groupVersion struct {
	p             *Publisher
	path, version string
}

func (g groupVersion) ServerRelativeURL() string {
	return "/openapi/v3/" + g.path + "?" + url.Values{"version": {g.version}}.Encode()
}

// Schema is the document as GET /openapi/v3/<path> answers it.
func (g groupVersion) Schema(contentType string) ([]byte, error) {
	w := &bufferWriter{header: http.Header{}}
	g.p.ServeHTTP(w, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/openapi/v3/" + g.path},
		Header: http.Header{"Accept": {contentType}}})
	if w.code != http.StatusOK {
		return nil, fmt.Errorf("/openapi/v3/%s: %d %s", g.path, w.code, w.body.String())
	}
	return w.body.Bytes(), nil
}
