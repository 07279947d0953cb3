package filters

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/request"
)

// mutating are the verbs --max-mutating-requests-inflight counts.
var mutating = map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true, "post": true, "put": true}

// WithMaxInFlight bounds the requests served at once, as kube-apiserver's
// --max-requests-inflight and --max-mutating-requests-inflight do: beyond
// the bound a request gets 429 TooManyRequests with Retry-After: 1.
// Watches are not counted, nor are members of system:masters (the admin
// and crdserver's own controllers). A limit of 0 means no limit.
func WithMaxInFlight(next http.Handler, readOnly, mutatingLimit int) http.Handler {
	if readOnly <= 0 && mutatingLimit <= 0 {
		return next
	}
	var ro, rw chan struct{}
	if readOnly > 0 {
		ro = make(chan struct{}, readOnly)
	}
	if mutatingLimit > 0 {
		rw = make(chan struct{}, mutatingLimit)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.InfoFrom(r.Context())
		if info.IsLongRunning() {
			next.ServeHTTP(w, r)
			return
		}
		if u, ok := auth.UserFrom(r.Context()); ok && slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
			next.ServeHTTP(w, r)
			return
		}
		slots := ro
		if mutating[info.Verb] {
			slots = rw
		}
		if slots == nil {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			request.WriteError(w, r, &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
				Message: "Too many requests, please try again later.", Details: &metav1.StatusDetails{RetryAfterSeconds: 1},
			}})
		}
	})
}

// WithRequestTimeout ends requests that are not watches after timeout (or
// the shorter ?timeout= a client asks for) with 504 Timeout, as
// kube-apiserver's --request-timeout does. The handler's context ends
// then; anything it writes afterwards is dropped.
func WithRequestTimeout(next http.Handler, timeout time.Duration) http.Handler {
	if timeout <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := request.InfoFrom(r.Context())
		if info.IsLongRunning() {
			next.ServeHTTP(w, r)
			return
		}
		d := timeout
		if v := r.URL.Query().Get("timeout"); v != "" {
			if asked, err := time.ParseDuration(v); err == nil && asked > 0 && asked < d {
				d = asked
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		tw := &timeoutWriter{w: w, h: w.Header().Clone(), expired: ctx.Done()}
		done := make(chan any, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					// Re-raised below, on the request's goroutine: keep
					// where it happened.
					done <- fmt.Sprintf("%v\n\nin the handler's goroutine:\n%s", p, debug.Stack())
					return
				}
				done <- nil
			}()
			next.ServeHTTP(tw, r.WithContext(ctx))
		}()
		select {
		case p := <-done:
			if p != nil {
				panic(p)
			}
			// Done just after the deadline: what it tried to write then
			// was dropped, and the client gets the 504 it would have got.
			if tw.timeout() && ctx.Err() != nil {
				request.WriteError(w, r, apierrors.NewTimeoutError("request did not complete within requested timeout - "+ctx.Err().Error(), 0))
			}
		case <-ctx.Done():
			if tw.timeout() {
				request.WriteError(w, r, apierrors.NewTimeoutError("request did not complete within requested timeout - "+ctx.Err().Error(), 0))
			}
			// The handler goes on until it notices; its writes are dropped.
			go func() { <-done }()
		}
	})
}

// timeoutWriter passes writes through until the request times out.
type timeoutWriter struct {
	mu       sync.Mutex
	w        http.ResponseWriter
	h        http.Header
	wrote    bool
	timedOut bool
	// expired closes at the deadline: a response not begun by then is
	// not begun at all, even if the handler gets there before the filter
	// notices.
	expired <-chan struct{}
}

func (t *timeoutWriter) Header() http.Header { return t.h }

// writeHeaderLocked starts the response, unless the deadline has passed;
// it reports whether the response goes on.
func (t *timeoutWriter) writeHeaderLocked(code int) bool {
	if t.wrote {
		return true
	}
	select {
	case <-t.expired:
		t.timedOut = true
		return false
	default:
	}
	t.wrote = true
	dst := t.w.Header()
	for k, v := range t.h {
		dst[k] = v
	}
	t.w.WriteHeader(code)
	return true
}

func (t *timeoutWriter) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return
	}
	t.writeHeaderLocked(code)
}

func (t *timeoutWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if !t.writeHeaderLocked(http.StatusOK) {
		return 0, http.ErrHandlerTimeout
	}
	return t.w.Write(b)
}

func (t *timeoutWriter) Flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timedOut || !t.writeHeaderLocked(http.StatusOK) {
		return
	}
	if f, ok := t.w.(http.Flusher); ok {
		f.Flush()
	}
}

// timeout marks the writer timed out and reports whether the 504 can
// still be sent (nothing was written yet).
func (t *timeoutWriter) timeout() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timedOut = true
	return !t.wrote
}
