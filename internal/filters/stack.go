package filters

import (
	"net/http"

	"github.com/crdserver/crdserver/internal/request"
)

// stackRoom is the stack a request's goroutine makes room for before it
// is handled. Go starts a goroutine's stack small and doubles it when a
// call does not fit, copying the stack (and adjusting every frame's
// pointers) each time. A request through the filters, the engine and
// structured-merge-diff needs some 20-30 KiB: grown on the way, the stack
// is copied twice, the second time with the handler's frames on it (some
// 6% of the server's CPU on a create). Grown at the start, it is copied
// once, nearly empty.
const stackRoom = 16 << 10

// WithStackRoom grows the stack of each request's goroutine at once (see
// stackRoom), but for watches, whose goroutines live long and need little.
// It runs inside WithRequestInfo, on the goroutine that serves the request.
func WithStackRoom(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := request.InfoFrom(r.Context()); info == nil || info.Verb != "watch" {
			growStack()
		}
		next.ServeHTTP(w, r)
	})
}

// growStack has a frame of stackRoom bytes.
//
//go:noinline
func growStack() {
	var room [stackRoom]byte
	keep(room[:])
}

//go:noinline
func keep([]byte) {}
