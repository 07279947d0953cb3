package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckLoopback(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:6443", true},
		{"https://[::1]:6443", true},
		{"https://localhost:6443", true},
		{"http://10.0.0.1:6443", false},
		{"https://example.com", false},
		{"ftp://127.0.0.1", false},
	} {
		if _, err := checkLoopback(tc.url); (err == nil) != tc.ok {
			t.Errorf("checkLoopback(%q) error %v, want ok=%v", tc.url, err, tc.ok)
		}
	}
}

// getGzip decompresses a gzip answer and counts its bytes on the wire.
func TestGetGzip(t *testing.T) {
	body := []byte(strings.Repeat(`{"metadata":{"name":"item"}},`, 2000))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") != "gzip" || r.URL.Query().Get("plain") != "" {
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write(body)
		_ = zw.Close()
	}))
	defer srv.Close()
	c := &client{hc: srv.Client(), base: srv.URL}
	code, b, wire, enc, err := c.getGzip(context.Background(), srv.URL)
	if err != nil || code != 200 || enc != "gzip" || !bytes.Equal(b, body) || wire <= 0 || wire >= len(body)/4 {
		t.Fatalf("gzip: code %d enc %q err %v, %d bytes, %d on the wire", code, enc, err, len(b), wire)
	}
	code, b, wire, enc, err = c.getGzip(context.Background(), srv.URL+"?plain=1")
	if err != nil || code != 200 || enc != "" || !bytes.Equal(b, body) || wire != len(body) {
		t.Fatalf("plain: code %d enc %q err %v, %d bytes, %d on the wire", code, enc, err, len(b), wire)
	}
}

// create leaves an object that exists already alone, and says so.
func TestCreateExisting(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/taken") {
			http.Error(w, `{"reason":"AlreadyExists"}`, http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	c := &client{hc: srv.Client(), base: srv.URL}
	if f, err := c.create(context.Background(), "ns", "namespace free", srv.URL+"/free", namespaceBody("free")); f != nil || err != nil {
		t.Errorf("free: %v %v", f, err)
	}
	f, err := c.create(context.Background(), "ns", "namespace taken", srv.URL+"/taken", namespaceBody("taken"))
	if f == nil || f.Status != http.StatusConflict || f.Path != "/taken" || err == nil || !strings.Contains(err.Error(), "namespace taken already exists") {
		t.Errorf("taken: %+v %v", f, err)
	}
}
