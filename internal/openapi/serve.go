package openapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/munnerz/goautoneg"

	"github.com/crdserver/crdserver/internal/budget"
	"github.com/crdserver/crdserver/internal/filters"
)

// servedDoc is one served document made of CRDs: its JSON and protobuf
// encodings are built when first asked for, held gzipped (a tenth of their
// size; sent as they are to clients that take gzip) in a budget.Pool
// (which may release them; they are built again when next asked for), and
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
		if err != nil {
			return nil, 0, err
		}
		gz := gzipped(b)
		return gz, int64(len(gz)), nil
	})
	d.proto = budget.NewValue(p.pool, func() ([]byte, int64, error) {
		gz, err := d.json.Get()
		if err != nil {
			return nil, 0, err
		}
		j, err := gunzipped(gz)
		if err != nil {
			return nil, 0, err
		}
		b, err := toProto(j)
		if err != nil {
			return nil, 0, err
		}
		gz = gzipped(b)
		return gz, int64(len(gz)), nil
	})
	return d
}

// gzipped compresses b (at the fastest level: documents are built on
// request).
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	buf.Grow(len(b) / 8)
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// gunzipped uncompresses what gzipped compressed.
func gunzipped(gz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
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
			if err == nil && !filters.AcceptsGzip(r) {
				body, err = gunzipped(body)
			} else if err == nil {
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Add("Vary", "Accept-Encoding")
			}
			if err != nil {
				slog.Error("openapi: building a document", "path", path, "err", err)
				w.Header().Del("Content-Encoding")
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
