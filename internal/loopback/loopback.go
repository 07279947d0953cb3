package loopback

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/crdserver/crdserver/internal/auth"

	"k8s.io/client-go/rest"
)

// Transport calls Handler for every request.
type Transport struct {
	Handler http.Handler
}

// Config returns a client-go config whose requests go to h.
func Config(h http.Handler) *rest.Config {
	return &rest.Config{
		Host:      "http://loopback",
		Transport: &Transport{Handler: h},
		QPS:       -1,
		UserAgent: "crdserver-loopback",
	}
}

type internalKey struct{}

// IsInternal reports whether a request comes from crdserver itself, through
// a Transport: nothing a client sends can make it so.
func IsInternal(ctx context.Context) bool {
	v, _ := ctx.Value(internalKey{}).(bool)
	return v
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// The controllers are crdserver itself: trusted, as kube-apiserver
	// trusts its loopback client.
	req = req.WithContext(context.WithValue(auth.WithUser(req.Context(), auth.Loopback), internalKey{}, true))
	pr, pw := io.Pipe()
	w := &writer{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
			w.start(http.StatusOK)
			_ = pw.Close()
		}()
		t.Handler.ServeHTTP(w, req)
	}()
	select {
	case <-w.started:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:        http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// writer is the ResponseWriter the handler writes into.
type writer struct {
	header  http.Header
	sent    http.Header
	pw      *io.PipeWriter
	code    int
	once    sync.Once
	started chan struct{}
}

func (w *writer) Header() http.Header { return w.header }

func (w *writer) start(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.started)
	})
}

func (w *writer) WriteHeader(code int) { w.start(code) }

func (w *writer) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(b)
}

// Flush implements http.Flusher: writes already reach the reader.
func (w *writer) Flush() { w.start(http.StatusOK) }
