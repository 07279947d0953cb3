package openapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/munnerz/goautoneg"

	"github.com/crdserver/crdserver/internal/budget"
)

// servedDoc is one served document made of CRDs: its JSON and protobuf
// encodings are built when first asked for, held in a budget.Pool (which
// may release them; they are built again when next asked for), and
// identified by etag, the fingerprint of what they are made from, which
// does not need them built.
type servedDoc struct {
	etag     string
	modified time.Time
	json     *budget.Value[[]byte]
	proto    *budget.Value[[]byte]
}

// newDocument is a document that build encodes as JSON and toProto
// converts to protobuf.
func (p *Publisher) newDocument(etag string, build func() ([]byte, error), toProto func([]byte) ([]byte, error)) *servedDoc {
	d := &servedDoc{etag: etag, modified: time.Now()}
	d.json = budget.NewValue(p.pool, func() ([]byte, int64, error) {
		b, err := build()
		return b, int64(len(b)), err
	})
	d.proto = budget.NewValue(p.pool, func() ([]byte, int64, error) {
		j, err := d.json.Get()
		if err != nil {
			return nil, 0, err
		}
		b, err := toProto(j)
		return b, int64(len(b)), err
	})
	return d
}

// drop releases the document's encodings (it is no longer served).
func (d *servedDoc) drop() {
	d.json.Drop()
	d.proto.Drop()
}

// format is a media type a document is served in.
type format struct {
	typ, subtype, contentType string
	proto                     bool
}

// The media types of the v2 and v3 documents, as kube-openapi's handlers
// offer them (the first of a client's Accept clauses that one matches).
var (
	v2Formats = []format{
		{"application", "json", "application/json", false},
		{"application", "com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", true},
		{"application", "com.github.proto-openapi.spec.v2.v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", true},
	}
	v3Formats = []format{
		{"application", "json", "application/json", false},
		{"application", "com.github.proto-openapi.spec.v3.v1.0+protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", true},
		{"application", "com.github.proto-openapi.spec.v3@v1.0+protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf", true},
	}
)

// serveDocument answers a GET of d as kube-openapi's handlers do: content
// negotiation (406 when nothing matches), the ETag, and for a v3 document
// asked for by hash, a redirect when the hash is stale and caching for a
// year when it is current.
func serveDocument(w http.ResponseWriter, r *http.Request, d *servedDoc, path string, formats []format, hashed bool) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	w.Header().Add("Vary", "Accept")
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, f := range formats {
			if (clause.Type != f.typ && clause.Type != "*") || (clause.SubType != f.subtype && clause.SubType != "*") {
				continue
			}
			value := d.json
			if f.proto {
				value = d.proto
			}
			body, err := value.Get()
			if err != nil {
				slog.Error("openapi: building a document", "path", path, "err", err)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", f.contentType)
			w.Header().Set("Etag", strconv.Quote(d.etag))
			if hash := r.URL.Query().Get("hash"); hashed && hash != "" {
				if hash != d.etag {
					http.Redirect(w, r, hashedURL(path[len("/openapi/v3/"):], d.etag), http.StatusMovedPermanently)
					return
				}
				w.Header().Set("Cache-Control", "public, immutable")
				w.Header().Set("Expires", time.Now().AddDate(1, 0, 0).Format(time.RFC1123))
			}
			http.ServeContent(w, r, "", d.modified, bytes.NewReader(body))
			return
		}
	}
	w.WriteHeader(http.StatusNotAcceptable)
}
