package health

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestEndpoint(t *testing.T) {
	failing := false
	e := &Endpoint{Name: "readyz", Checks: []Check{
		Ping,
		{Name: "etcd", Check: func(*http.Request) error {
			if failing {
				return errors.New("down")
			}
			return nil
		}},
		{Name: "poststarthook/x", Check: func(*http.Request) error { return nil }},
	}}
	cases := []struct {
		path    string
		failing bool
		code    int
		body    string
	}{
		{"/readyz", false, 200, "ok"},
		{"/readyz?verbose", false, 200, "[+]ping ok\n[+]etcd ok\n[+]poststarthook/x ok\nreadyz check passed\n"},
		{"/readyz?verbose&exclude=etcd", false, 200, "[+]ping ok\n[+]etcd excluded: ok\n[+]poststarthook/x ok\nreadyz check passed\n"},
		{"/readyz?exclude=b&exclude=a", false, 200, "ok"},
		{"/readyz?verbose&exclude=b,a", false, 200, "[+]ping ok\n[+]etcd ok\n[+]poststarthook/x ok\nwarn: some health checks cannot be excluded: no matches for \"a\",\"b\"\nreadyz check passed\n"},
		{"/readyz", true, 500, "[+]ping ok\n[-]etcd failed: reason withheld\n[+]poststarthook/x ok\nreadyz check failed\n"},
		{"/readyz?exclude=etcd", true, 200, "ok"},
		{"/readyz/etcd", false, 200, "ok"},
		{"/readyz/etcd", true, 500, "internal server error: down\n"},
		{"/readyz/poststarthook/x", false, 200, "ok"},
		{"/readyz/nope", false, 404, "404 page not found\n"},
	}
	for _, c := range cases {
		failing = c.failing
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", c.path, nil))
		if w.Code != c.code || w.Body.String() != c.body {
			t.Errorf("%s (failing=%v): %d %q, want %d %q", c.path, c.failing, w.Code, w.Body.String(), c.code, c.body)
		}
	}
	w := httptest.NewRecorder()
	(&Endpoint{Name: "livez"}).ServeHTTP(w, httptest.NewRequest("GET", "/livez?verbose", nil))
	if w.Body.String() != "[+]ping ok\nlivez check passed\n" {
		t.Errorf("no checks: %q", w.Body.String())
	}
}
