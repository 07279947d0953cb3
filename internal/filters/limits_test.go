package filters

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/crdserver/crdserver/internal/auth"
	"github.com/crdserver/crdserver/internal/request"
)

func req(method, path string, u user.Info) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	ctx := request.WithInfo(r.Context(), request.Parse(r))
	if u != nil {
		ctx = auth.WithUser(ctx, u)
	}
	return r.WithContext(ctx)
}

func status(t *testing.T, rec *httptest.ResponseRecorder) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("not a Status: %s", rec.Body)
	}
	return st
}

func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	h := WithMaxInFlight(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}), 1, 1)
	jane := &user.DefaultInfo{Name: "jane", Groups: []string{user.AllAuthenticated}}
	var wg sync.WaitGroup
	hold := func(r *http.Request) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
		<-entered
	}
	// One read and one write take the two pools.
	hold(req("GET", "/apis/g/v1/namespaces/a/things", jane))
	hold(req("POST", "/apis/g/v1/namespaces/a/things", jane))

	for _, r := range []*http.Request{req("GET", "/apis/g/v1/namespaces/a/things/x", jane), req("DELETE", "/apis/g/v1/namespaces/a/things/x", jane)} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		st := status(t, rec)
		if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || st.Reason != metav1.StatusReasonTooManyRequests ||
			st.Message != "Too many requests, please try again later." || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Fatalf("%s over the limit: %d %v %s", r.Method, rec.Code, rec.Header(), rec.Body)
		}
	}
	// Watches and system:masters are not limited.
	for _, r := range []*http.Request{
		req("GET", "/apis/g/v1/namespaces/a/things?watch=true", jane),
		req("GET", "/apis/g/v1/namespaces/a/things", &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}),
	} {
		hold(r)
	}
	close(release)
	wg.Wait()
	// The slots are free again.
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { h.ServeHTTP(rec, req("GET", "/apis/g/v1/namespaces/a/things", jane)); close(done) }()
	<-entered
	<-done
	if rec.Code != 200 {
		t.Fatalf("after release: %d", rec.Code)
	}
}

func TestRequestTimeout(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	h := WithRequestTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			// Too late: this write is dropped.
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte("late"))
		case <-stop:
		}
	}), time.Hour)
	// ?timeout= shortens the server's bound.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req("GET", "/apis/g/v1/namespaces/a/things?timeout=20ms", nil))
	st := status(t, rec)
	if rec.Code != 504 || st.Reason != metav1.StatusReasonTimeout || st.Message != "Timeout: request did not complete within requested timeout - context deadline exceeded" {
		t.Fatalf("timed out request: %d %s", rec.Code, rec.Body)
	}
	// A handler that gives up at the deadline without writing: 504 too.
	quiet := WithRequestTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}), 10*time.Millisecond)
	rec = httptest.NewRecorder()
	quiet.ServeHTTP(rec, req("GET", "/apis/g/v1/namespaces/a/things", nil))
	if st := status(t, rec); rec.Code != 504 || st.Reason != metav1.StatusReasonTimeout {
		t.Fatalf("handler that gave up: %d %s", rec.Code, rec.Body)
	}
	// A request that answers in time is untouched, headers included.
	fast := WithRequestTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "1")
		w.WriteHeader(201)
		_, _ = w.Write([]byte("ok"))
	}), time.Hour)
	rec = httptest.NewRecorder()
	fast.ServeHTTP(rec, req("POST", "/apis/g/v1/namespaces/a/things", nil))
	if rec.Code != 201 || rec.Body.String() != "ok" || rec.Header().Get("X-Test") != "1" {
		t.Fatalf("fast request: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	// Watches are not bounded.
	watched := make(chan struct{})
	slow := WithRequestTimeout(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Context().Deadline(); ok {
			t.Error("a watch got a deadline")
		}
		close(watched)
	}), time.Millisecond)
	slow.ServeHTTP(httptest.NewRecorder(), req("GET", "/apis/g/v1/namespaces/a/things?watch=1", nil))
	<-watched
}
